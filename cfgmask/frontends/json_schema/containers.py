"""Objects and arrays.

Objects: members may come in any order.  Keys that must be counted
(``required``, ``dependentRequired`` names, and every key when
``min/maxProperties`` need counting) are *tracked*: the grammar has one rule
per set of tracked keys seen so far, so a tracked key appears at most once
and the object can close only in a state that satisfies the keywords.  That
is exponential in the number of tracked keys, hence ``MAX_TRACKED``, and no
exact grammar does essentially better: restricted to objects of n members, "n
required keys in any order" is the set of permutations of n symbols, for which
context-free grammars need size exponential in n.  Beyond it strict mode
rejects, and non-strict mode requires the required keys in schema order
(reported ``relaxed``).  Untracked keys may repeat: a JSON parser that
keeps the last value (Python's ``json``, JavaScript) sees a valid object,
since every occurrence's value is checked.

``patternProperties`` (any ``additionalProperties``, overlapping patterns): the
keys that are not listed names are split by which patterns they match, with a
product of the patterns' automata (:mod:`.chardfa`); each region's values get
the ``allOf`` of its patterns' schemas, the region of no pattern gets
``additionalProperties``.  A listed name gets its property schema and those of
the patterns it matches.  ``anyOf``/``oneOf``/``not`` of ``required`` arrive as
conditions on the set of tracked keys (``presence``), checked where the object
closes.

Arrays: ``prefixItems`` / ``items`` / ``minItems`` / ``maxItems`` exactly;
``uniqueItems`` when the items range over a small finite set of values (one
rule per subset); ``contains`` with ``minContains`` when no count bounds or
prefix apply.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ... import deadline, ir
from ...errors import GrammarError
from . import _ir_util as U
from . import chardfa
from .empty import Reason
from .lexical import Encoder, encode_text
from .merge import ANNOTATIONS, Unmergeable, equal, evaluate, intersect, is_annotation, type_set
from .report import ENFORCED, NARROWED, pointer
from .strings import not_in, pattern_dfa

if TYPE_CHECKING:
    from .walk import SchemaCompiler

MAX_TRACKED = 8
# a key whose rule-name stem is "prop-" and itself (``U.stem_of``: name characters only, no
# "-" at the end, at most 60 in all) and whose canonical spelling is itself in quotes (ASCII, no
# character JSON escapes): 1 to _KEY_MAX of _KEY_CHARS, not ending in "-" (plain_key)
_KEY_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
_KEY_MAX = 55
# _listed's one step polls the deadline once every this many members (each ~10 us)
_POLL_EVERY = 8
_QUOTE = U.lit('"')
# The type names :meth:`SchemaCompiler.scalar` compiles: a schema ``{"type": one of these}``.
SCALAR_TYPES = frozenset({"string", "number", "integer", "boolean", "null"})
# _listed's one step: a property value ``{"type": T}`` (T in SCALAR_TYPES, annotations beside
# it) whose member value is built takes it without member_value (off: every value goes there)
ONE_STEP = True
# Keywords that say what the keys an object does not list may be.
OPEN_KEYWORDS = ("additionalProperties", "patternProperties", "unevaluatedProperties")
ORDERED_RUN = 32  # forced members laid out in one rule before the next rule is referenced
MAX_ORDERED_STATES = 100_000  # (position, state) pairs of an object walked in order
_TOO_MANY = f"more than {MAX_ORDERED_STATES} states of keys to remember"  # (dependentRequired's row)
MAX_PATTERNS = 6  # patternProperties: the key regions are a product of their automata
MAX_UNIQUE_VALUES = 8
MAX_CONTAINS_STATES = 64  # positions and match counts of the contains machine, each
# (key, canonical) -> the key's expression with its quotes (Containers.key); bounded as
# _ir_util's literals are: the first _KEYS_MAX keys met are kept, later ones made each time
_KEYS: dict[tuple[str, bool], ir.Expr] = {}
_KEYS_MAX = 8192


def _why(several: bool, listed: bool, closed: bool) -> str:
    """The reason of canonical mode's ``narrowed`` row for ``properties`` ("" for none)."""
    why = []
    if several:
        why.append("properties in the order the schema lists them")
    if listed:
        why.append("listed keys spelled literally")
    if closed:
        why.append("keys the schema does not list are not generated")
    return "canonical: " + ", ".join(why) if why else ""


# listed_object's reasons, made once: (several keys listed, any, closed) -> _why's
_WHY = {(a, b, d): _why(a, b, d) for a in (False, True) for b in (False, True) for d in (False, True)}


def _closes(x: Any) -> bool:
    """The final test of a walk that remembers and counts nothing (:meth:`listed_object`)."""
    return True


def _trivial(s: Any) -> bool:
    if s is True:
        return True
    if not isinstance(s, dict):
        return False
    for k in s:  # no generator: one call per property value
        if k not in ANNOTATIONS and not k.startswith("x-"):  # not is_annotation(k), inline
            return False
    return True


def _holds(kind: str, sets: list[frozenset[str]], keys: frozenset[str]) -> bool:
    n = sum(1 for st in sets if st <= keys)
    return n >= 1 if kind == "anyOf" else n == 1 if kind == "oneOf" else n < len(sets)


def _strip(s: Any) -> Any:
    return {k: v for k, v in s.items() if not is_annotation(k)} if isinstance(s, dict) else s


def _same(a: Any, b: Any) -> bool:
    """The same schema (annotations aside; a cheap sufficient test)."""
    if _trivial(a) and _trivial(b):
        return True
    return U.dumps_sorted_key(_strip(a)) == U.dumps_sorted_key(_strip(b))


def _all_of(parts: list[Any]) -> Any:
    """One schema for all of ``parts`` (trivial and repeated parts dropped)."""
    if any(p is False for p in parts):
        return False
    keep: list[Any] = []
    for p in parts:
        if not _trivial(p) and not any(_same(p, q) for q in keep):
            keep.append(p)
    return True if not keep else keep[0] if len(keep) == 1 else {"allOf": keep}


@dataclass
class _Object:
    """An object schema's members, compiled (:meth:`Containers._members`)."""

    s: dict[str, Any]
    order: list[str]  # the listed keys that may appear, in schema order
    member: dict[str, ir.Expr]  # key -> ``"key": value``
    required: list[str]
    dep_req: dict[str, list[str]]
    presence: list[tuple[str, list[frozenset[str]]]]
    free: list[ir.Expr]  # members whose key is not listed
    closed: bool  # canonical mode closed the object to keys it does not list
    lo: int
    hi: int | None

    def watch_names(self) -> set[str]:
        """Listed keys whose presence a keyword other than ``required`` depends on."""
        out = set(self.dep_req) | {b for bs in self.dep_req.values() for b in bs}
        return out | {n for _, sets in self.presence for st in sets for n in st}


def plain_key(n: str) -> bool:
    """Whether ``n`` is a plain key (see _KEY_CHARS), as :meth:`Containers._listed` tests it
    inline: ``strip`` leaves nothing of a key of those characters, one C call (~0.3 k
    instructions, where a regex's match object cost ~2 k)."""
    return 0 < len(n) <= _KEY_MAX and not n.strip(_KEY_CHARS) and n[-1] != "-"


class Containers:
    def __init__(self, c: SchemaCompiler, max_depth: int) -> None:
        self.c = c
        self._shared: dict[ir.Expr, ir.Ref] = {}  # value expression -> its rule
        # _listed: a scalar type T -> shared(member_value({"type": T})), once made
        self._scalar_values: dict[str, ir.Expr] = {}
        self.max_depth = max_depth  # walk.MAX_DEPTH (tests lower it): member_value's test

    def shared(self, value: ir.Expr) -> ir.Expr:
        """``value`` as one rule per distinct expression: the members of a wide object whose
        values have the same schema call one automaton, instead of each holding a copy (the
        compiler still inlines a rule with one caller, or a small one).  Keyed by content:
        composite IR nodes keep their hash, so a shared subtree is hashed once."""
        if isinstance(value, (ir.Ref, ir.Literal)) or value in (ir.NOTHING, ir.EPSILON):
            return value
        ref = self._shared.get(value)
        if ref is None:
            ref = self._shared[value] = ir.Ref(U.fresh_stem(self.c.rules, "value"))
            self.c.rules[ref.name] = value
        return ref

    # ------------------------------------------------------------------ state machines

    def machine(
        self,
        prefix: str,
        start: Hashable,
        final: Callable[[Any], bool],
        moves: Callable[[Any], list[tuple[ir.Expr, Any]]],
        free: ir.Expr,
        open_: str,
        close: str,
    ) -> ir.Expr:
        """``open_ item (sep item)* close`` where items drive a state machine: ``moves(st)``
        lists (item, next state); ``free`` items keep the state; closing needs ``final``."""
        c = self.c
        live: dict[Any, bool] = {}

        def is_live(st: Any) -> bool:
            if st not in live:
                live[st] = False
                live[st] = final(st) or any(is_live(n) for _, n in moves(st))
            return live[st]

        if not is_live(start):
            return ir.NOTHING
        names: dict[Any, str] = {}

        def item_rule(st: Any) -> str | None:
            if st in names:
                return names[st]
            opts = [(e, n) for e, n in moves(st) if e != ir.NOTHING and is_live(n)]
            if not opts and free == ir.NOTHING:
                return None
            name = U.fresh_stem(c.rules, f"{prefix}-s{len(names)}")  # prefix: a fixed name
            names[st] = name
            alts = [ir.seq(e, tail(n)) for e, n in opts]
            if free != ir.NOTHING:
                alts.append(ir.seq(free, tail(st)))
            c.rules[name] = ir.alt(*alts)
            return name

        def tail(st: Any) -> ir.Expr:
            alts: list[ir.Expr] = []
            if final(st):
                alts.append(ir.seq(c.ws(), U.lit(close)))
            nxt = item_rule(st)
            if nxt is not None:
                alts.append(ir.seq(c.sep(","), ir.Ref(nxt)))
            return ir.alt(*alts) if alts else ir.NOTHING

        alts = []
        if final(start):
            alts.append(ir.seq(U.lit(open_), c.ws(), U.lit(close)))
        first = item_rule(start)
        if first is not None:
            alts.append(ir.seq(U.lit(open_), c.ws(), ir.Ref(first)))
        return ir.alt(*alts) if alts else ir.NOTHING

    def ordered(
        self,
        prefix: str,
        n: int,
        start: Hashable,
        steps: Callable[[int, Any], list[tuple[ir.Expr | None, int, Any]]],
        final: Callable[[Any], bool],
        close: str,
        max_states: int = MAX_ORDERED_STATES,
    ) -> ir.Expr | None:
        """The members of an object (or items of an array) as a walk along positions 0..n:
        ``steps(i, x)`` lists (member or None for a skip, next position, next state), and the
        container may close at position ``n`` in a state where ``final`` holds.  The output
        starts after the opening bracket and its whitespace.  One rule per reachable (position,
        state, anything written yet) that can still close, so the size is linear in ``n`` when
        the states are few; built without recursion.  None when more than ``max_states``
        (position, state) pairs are reachable.  The common object, with nothing to remember or
        count, takes :meth:`_ordered_constant`, which lays out the same rules without a search."""
        c = self.c
        edges: dict[tuple[int, Any], list[tuple[ir.Expr | None, int, Any]]] = {}
        live: set[tuple[int, Any]] | None = self._live(n, start, steps, final, edges, max_states)
        if live is None:
            return None
        if (0, start) not in live:
            return ir.NOTHING
        closes: dict[Any, bool] = {}  # final(x) at position n, once per state

        def closing(i: int, x: Any) -> bool:
            if i != n:
                return False
            out = closes.get(x)
            if out is None:
                out = closes[x] = final(x)
            return out

        names: dict[tuple[int, Any, bool], str] = {}
        bodies: list[tuple[str, tuple[int, Any, bool]]] = []

        def ref(key: tuple[int, Any, bool]) -> ir.Ref:
            if key not in names:
                names[key] = U.fresh_stem(c.rules, f"{prefix}-{key[0]}")  # prefix: a fixed name
                bodies.append((names[key], key))
            return ir.Ref(names[key])

        first = ref((0, start, False))
        while bodies:
            name, (i, x, written) = bodies.pop()
            # a run of forced members (one way on, no close) goes into one flat sequence:
            # a chain of one rule per member would make the compiler inline each rule's tail
            # into the rule before it, rebuilding a growing automaton per member
            run: list[ir.Expr] = []
            for _ in range(ORDERED_RUN):
                out = [(e, j, y) for e, j, y in edges[(i, x)] if (j, y) in live]
                forced = out[0][0] if len(out) == 1 else None
                if forced is None or closing(i, x):
                    break
                _, i, x = out[0]
                run += [c.sep(",") if written else ir.EPSILON, forced]
                written = True
            alts: list[ir.Expr] = []
            if closing(i, x):
                alts.append(ir.seq(c.ws(), U.lit(close)) if written else U.lit(close))
            for e, j, y in edges[(i, x)]:
                if (j, y) not in live:
                    continue
                if e is None:
                    alts.append(ref((j, y, written)))
                else:
                    alts.append(ir.seq(c.sep(",") if written else ir.EPSILON, e, ref((j, y, True))))
            c.rules[name] = ir.seq(*run, ir.alt(*alts))
        return first

    def _ordered_constant(
        self,
        order: list[str],
        member: dict[str, ir.Expr],
        required: set[str],
        free: ir.Expr,
        free_everywhere: bool,
        final: Callable[[Any], bool],
    ) -> ir.Expr | None:
        """:meth:`ordered` for the object whose walk keeps one state, ``(frozenset(), 0)``
        (nothing remembered or counted): when ``final`` allows it, every position is reached and
        can close, each listed member is a step to the next position (and, when not
        ``required``, so is a skip), and ``free`` members (if not NOTHING) come after the last
        (with ``free_everywhere``, at every position).  The same rules, in the same order and
        with the same names as :meth:`ordered` makes, laid out without its steps, edges and
        states."""
        c = self.c
        n = len(order)
        has_free = free != ir.NOTHING
        everywhere = free_everywhere and has_free
        if n + 1 > MAX_ORDERED_STATES:
            return None
        if not final((frozenset(), 0)):
            return ir.NOTHING
        # the rule of (position, anything written yet), at 2 * position + written; made (its
        # name reserved, its body queued) on first reference, as ``ordered`` does
        names: list[str | None] = [None] * (2 * n + 2)
        bodies: list[tuple[str, int, bool]] = []
        rules, fresh, seq, alt, Ref, eps = c.rules, U.fresh_stem, ir.seq, ir.alt, ir.Ref, ir.EPSILON
        comma: ir.Expr | None = None  # c.sep(","), asked for where ordered asks for it first
        close = U.lit("}")

        if not has_free and required.isdisjoint(order):
            return self._optional_walk([member[x] for x in order])
        if not has_free and n <= ORDERED_RUN and required.issuperset(order):
            # required members only, one run: the one rule the loop below makes for them
            name = fresh(rules, "obj-0")
            comma = c.sep(",")
            items = [eps, member[order[0]]]
            for x in order[1:]:
                items += [comma, member[x]]
            rules[name] = seq(*items, seq(c.ws(), close))
            return Ref(name)
        mem: list[ir.Expr] = []  # each position's member, whether it may be skipped, and
        optional: list[bool] = []  # whether it is one way on (required, no free one beside)
        forced: list[bool] = []
        for x in order:
            mem.append(member[x])
            skips = x not in required
            optional.append(skips)
            forced.append(not skips and not everywhere)

        name = names[0] = fresh(rules, "obj-0")
        bodies.append((name, 0, False))
        first = Ref(name)
        while bodies:
            name, i, written = bodies.pop()
            # a run of required members (one way on) goes into one flat sequence (see ordered)
            run: list[ir.Expr] | None = None
            if i < n and forced[i]:
                run = []
                for _ in range(ORDERED_RUN):
                    if i == n or not forced[i]:
                        break
                    if written:
                        if comma is None:
                            comma = c.sep(",")
                        run += [comma, mem[i]]
                    else:
                        run += [eps, mem[i]]
                    i += 1
                    written = True
            lead: ir.Expr = eps
            if written:
                if comma is None:
                    comma = c.sep(",")
                lead = comma
            if i == n:
                end = seq(c.ws(), close) if written else close
                if not has_free:
                    rules[name] = seq(*run, end) if run else end
                    continue
                alts = [end]
                j = n  # where a free member at the end leads
            else:
                alts = []
                j = i + 1  # where a member leads
            nxt = names[2 * j + 1]
            if nxt is None:
                nxt = names[2 * j + 1] = fresh(rules, f"obj-{j}")
                bodies.append((nxt, j, True))
            if i == n:
                alts.append(seq(lead, free, Ref(nxt)))
            else:
                alts.append(seq(lead, mem[i], Ref(nxt)))
                if optional[i]:
                    k = 2 * j + written
                    skip = names[k]
                    if skip is None:
                        skip = names[k] = fresh(rules, f"obj-{j}")
                        bodies.append((skip, j, written))
                    alts.append(Ref(skip))
                if everywhere:
                    here = names[2 * i + 1]
                    if here is None:
                        here = names[2 * i + 1] = fresh(rules, f"obj-{i}")
                        bodies.append((here, i, True))
                    alts.append(seq(lead, free, Ref(here)))
            body = alt(*alts)
            rules[name] = seq(*run, body) if run else body
        return first

    def _optional_walk(self, mem: list[ir.Expr]) -> ir.Ref:
        """:meth:`_ordered_constant` for members that are all optional and no free one: its
        search reaches every (position, written) but (0, written) and names them in the order
        it meets them, (0, not), then (j, written) and (j, not) for each j -- named here in
        that order, without the search; each rule is its member or a skip to the next
        position, the last one the close."""
        c = self.c
        rules, fresh, seq, alt, Ref, eps = c.rules, U.fresh_stem, ir.seq, ir.alt, ir.Ref, ir.EPSILON
        n = len(mem)
        first = fresh(rules, "obj-0")
        close = U.lit("}")
        if not n:
            rules[first] = close
            return Ref(first)
        names = [first]  # at 2 * j - written, j >= 1: (j, written) then (j, not)
        for j in range(1, n + 1):
            stem = f"obj-{j}"
            names += [fresh(rules, stem), fresh(rules, stem)]
        comma = c.sep(",")
        rules[first] = alt(seq(eps, mem[0], Ref(names[1])), Ref(names[2]))
        for i in range(1, n):
            on = Ref(names[2 * i + 1])
            rules[names[2 * i - 1]] = alt(seq(comma, mem[i], on), on)
            rules[names[2 * i]] = alt(seq(eps, mem[i], on), Ref(names[2 * i + 2]))
        rules[names[2 * n - 1]] = seq(c.ws(), close)
        rules[names[2 * n]] = close
        return Ref(first)

    @staticmethod
    def _live(
        n: int,
        start: Hashable,
        steps: Callable[[int, Any], list[tuple[ir.Expr | None, int, Any]]],
        final: Callable[[Any], bool],
        edges: dict[tuple[int, Any], list[tuple[ir.Expr | None, int, Any]]],
        max_states: int,
    ) -> set[tuple[int, Any]] | None:
        """The (position, state) pairs reachable from ``(0, start)`` (their steps put in
        ``edges``) that can still close; None past ``max_states`` pairs."""
        todo = [(0, start)]
        while todo:
            node = todo.pop()
            if node in edges:
                continue
            if len(edges) >= max_states:
                return None
            edges[node] = out = steps(*node)
            todo.extend((j, y) for _, j, y in out if (j, y) not in edges)
        # which (position, state) can still close: backwards over the reversed edges
        back: dict[tuple[int, Any], list[tuple[int, Any]]] = {}
        for node, out in edges.items():
            for _, j, y in out:
                back.setdefault((j, y), []).append(node)
        live = {node for node in edges if node[0] == n and final(node[1])}
        todo = list(live)
        while todo:
            for pred in back.get(todo.pop(), []):
                if pred not in live:
                    live.add(pred)
                    todo.append(pred)
        return live

    # ------------------------------------------------------------------ objects

    def object(
        self,
        s: dict[str, Any],
        path: str,
        base: str,
        presence: list[tuple[str, list[frozenset[str]]]] | None = None,
    ) -> ir.Expr:
        c = self.c
        presence = presence or []
        o = self._members(s, path, base, presence)
        if o is None:
            return ir.NOTHING
        if c.canonical:
            return self._canonical(o, path)
        return self._any_order(o, path)

    def listed_object(self, s: dict[str, Any], path: str, base: str) -> ir.Expr:
        """:meth:`object` in canonical mode for a schema whose keywords are ``type``,
        ``properties``, ``required`` and ``additionalProperties`` (annotations aside; most
        objects): what :meth:`_members`, :meth:`_canonical` and :meth:`_walk` do for it, the
        same rules and report rows in the same order, in one step -- nothing is remembered or
        counted (no ``dependentRequired``, condition or ``min/maxProperties``), so the walk is
        :meth:`_ordered_constant`'s and closing is always allowed."""
        c = self.c
        rows = c.rep.rows
        props = s.get("properties")
        if props is None:
            props = {}
        else:
            rows.append((path + "/properties", "properties", ENFORCED, ""))
        req = s.get("required")
        if req is None:
            required = []
        else:
            rows.append((path + "/required", "required", ENFORCED, ""))
            required = list(dict.fromkeys(req))
        addl = s.get("additionalProperties", True)
        closed = bool(props) and "additionalProperties" not in s  # as _members' canon_closed
        names = list(dict.fromkeys([*props, *required])) if required else list(props)
        values: dict[str, Any] = {}
        for n in names:
            if n in props:  # _all_of([p]), inline
                p = props[n]
                if p.__class__ is dict and "type" in p:  # typed: not trivial, no _trivial loop
                    values[n] = p
                else:
                    values[n] = False if p is False else True if _trivial(p) else p
            else:
                values[n] = addl
        if "additionalProperties" in s:
            rows.append((path + "/additionalProperties", "additionalProperties", ENFORCED, ""))
        elif closed:  # canonical: keys the schema does not list are not generated
            addl = False
        member = self._listed(names, values, set(required), path, base)
        if member is None:
            return ir.NOTHING
        free: ir.Expr = ir.NOTHING
        if addl is not False:
            key_lang = not_in(names, c.rules, True) if names else ir.Repeat(c.char_generic(), 0, None)
            value = c.schema(addl, path + "/additionalProperties", base)
            if value != ir.NOTHING:
                free = ir.seq(U.lit('"'), key_lang, U.lit('"'), c.sep(":"), value)
        order = [n for n in names if n in member] if len(member) < len(names) else names
        why = _WHY[len(order) > 1, bool(order), closed]
        if why:  # rep.narrowed's row: canonical mode (narrowing allowed), which never raises on it
            rows.append((path + "/properties" if "properties" in s else path, "properties", NARROWED, why))
        if free is not ir.NOTHING:
            self._repeats_note(s, path)
        req = member.keys() & required  # one C call, not a comprehension's frame (read by membership)
        body = self._ordered_constant(order, member, req, free, False, _closes)
        if body is None:
            c.rep.rejected(path, "dependentRequired", _TOO_MANY)
            return ir.NOTHING
        if body == ir.NOTHING:
            return body
        return ir.seq(U.lit("{"), c.ws(), body)

    def _members(
        self, s: dict[str, Any], path: str, base: str, presence: list[tuple[str, list[frozenset[str]]]]
    ) -> _Object | None:
        """The object's listed members and free members (keys it does not list), compiled;
        None when a required key can have no value."""
        c, rep = self.c, self.c.rep
        conditioned = sorted({n for _, sets in presence for st in sets for n in st}) if presence else []
        props: dict[str, Any] = dict(s.get("properties", {}))
        required = list(dict.fromkeys(s.get("required", [])))
        addl = s.get("additionalProperties", True)
        patterns: dict[str, Any] = dict(s.get("patternProperties", {}))
        dep_req: dict[str, list[str]] = dict(s.get("dependentRequired", {}))
        for k in ("properties", "required", "additionalProperties", "patternProperties", "dependentRequired"):
            if k in s:
                rep.enforced(path + "/" + k, k)
        if "unevaluatedProperties" in s:
            where = path + "/unevaluatedProperties"
            if "additionalProperties" not in s:
                addl = s["unevaluatedProperties"]
            rep.enforced(where, "unevaluatedProperties", "no applicator left: acts as additionalProperties")
        for k, v in s.get("dependentSchemas", {}).items():
            if not _trivial(v):
                rep.rejected(pointer(path, "dependentSchemas", k), "dependentSchemas", "not supported")
        # patternProperties: a key gets the schemas of every pattern it matches (and of its
        # listed property); a key that matches none and is not listed gets additionalProperties
        automata = None
        if patterns:
            patterns = {p: v for p, v in patterns.items() if not (_trivial(v) and _trivial(addl))}
            automata = self._pattern_automata(patterns, path)
            if automata is None:
                patterns = {}
        listed = [*props, *required]
        if dep_req:
            listed += [*dep_req, *(b for bs in dep_req.values() for b in bs)]
        names = list(dict.fromkeys(listed + conditioned))
        values: dict[str, Any] = {}
        region_of: dict[str, tuple[bool, ...]] = {}
        for n in names:
            if not automata:  # no pattern (``patterns`` is empty): the property's own schema
                region_of[n] = ()
                if n in props:  # _all_of([p]), inline: the commonest case, once per property
                    p = props[n]
                    if p.__class__ is dict and "type" in p:  # typed: not trivial, no _trivial loop
                        values[n] = p
                    else:
                        values[n] = False if p is False else True if _trivial(p) else p
                else:
                    values[n] = addl
                continue
            region_of[n] = tuple(d.matches(n) for d in automata)
            hits = [ps for ps, hit in zip(patterns.values(), region_of[n], strict=True) if hit]
            parts = ([props[n]] if n in props else []) + hits
            values[n] = _all_of(parts) if parts else addl
        canon_closed = (
            c.canonical
            and bool(props)
            and s.keys().isdisjoint(OPEN_KEYWORDS)
            and s.get("minProperties", 0) <= len(names)
            and addl is not False
        )
        if canon_closed:  # canonical: keys the schema does not list are not generated
            addl = False
        pn = s.get("propertyNames", True)
        key_lang: ir.Expr | None = None  # spelling of additional keys, when propertyNames restricts them
        if "propertyNames" in s:
            where = path + "/propertyNames"
            if pn is False:
                names, patterns, addl = [], {}, False
            elif not _trivial(pn):
                if patterns:
                    rep.rejected(where, "propertyNames", "propertyNames together with patternProperties")
                for n in list(names):
                    ok = evaluate(pn, n)
                    if ok is None:
                        rep.rejected(where, "propertyNames", "cannot evaluate propertyNames on a listed name")
                    elif not ok:
                        values[n] = False
                if addl is not False:
                    key_lang = self._key_language(pn, where, bool(names or patterns))
            rep.enforced(where, "propertyNames")
        member = self._listed(names, values, set(required), path, base)
        if member is None:
            return None
        free_parts: list[ir.Expr] = []
        if patterns and automata:
            free_parts += self._pattern_members(
                patterns, automata, names, values, region_of, addl, path, base
            )
        if addl is not False and not patterns:
            if key_lang is None:
                key_lang = (
                    not_in(names, c.rules, c.canonical) if names else ir.Repeat(c.char_generic(), 0, None)
                )
            value = c.schema(addl, path + "/additionalProperties", base)
            if value != ir.NOTHING:
                free_parts.append(ir.seq(U.lit('"'), key_lang, U.lit('"'), c.sep(":"), value))
        for a, bs in dep_req.items():
            if a in member and any(b not in member for b in bs):
                member.pop(a)  # a may not appear: one of its dependencies is impossible
        return _Object(
            s, [n for n in names if n in member], member, [n for n in required if n in member],
            dep_req, presence, free_parts, canon_closed, s.get("minProperties", 0), s.get("maxProperties"),
        )  # fmt: skip

    def _listed(
        self, names: list[str], values: dict[str, Any], required: set[str], path: str, base: str
    ) -> dict[str, ir.Expr] | None:
        """Each listed key that may appear -> its member rule; None when a required one cannot."""
        c = self.c
        rules, canonical, rows, scalars = c.rules, c.canonical, c.rep.rows, self._scalar_values
        colon: ir.Expr | None = None  # c.sep(":"), asked for where it was asked for first
        member: dict[str, ir.Expr] = {}
        nothing, chars = ir.NOTHING, _KEY_CHARS
        steps = 0  # one-step members since the deadline was last polled
        for n in names:
            v = values[n]
            if v is False:
                if n in required:
                    return None
                continue
            # a key of name characters (most: plain_key, inline; letters and digits only, the
            # commonest, by two C tests without the strip of _KEY_CHARS): no "~" or "/" in it
            plain = 0 < len(n) <= _KEY_MAX and (
                n.isalnum() and n.isascii() or not n.strip(chars) and n[-1] != "-"
            )
            where = (
                path + "/properties/" + n
                if plain or ("~" not in n and "/" not in n)
                else pointer(path, "properties", n)
            )
            # {"type": T} (annotations beside it): member_value's scalar path, which gives the
            # same value for every such T (SchemaCompiler.scalar's, once per schema) and adds the
            # annotations' rows and then the type's; after the first, here in one step
            t = v.get("type") if v.__class__ is dict and ONE_STEP and c.depth < self.max_depth else None
            if t is not None:
                if t.__class__ is not str or t not in SCALAR_TYPES:
                    t = None
                elif len(v) > 1:
                    for k in v:  # is_annotation(k), inline
                        if k != "type" and k not in ANNOTATIONS and not k.startswith("x-"):
                            t = None
                            break
            value = scalars.get(t) if t is not None else None
            if value is None:
                value = self.shared(c.member_value(v, where, base))
                if t is not None:
                    scalars[t] = value
            else:
                steps += 1
                if steps == _POLL_EVERY:
                    steps = 0
                    deadline.check("JSON Schema")
                if len(v) > 1:
                    for k in v:
                        if k != "type":
                            # (an annotation's name, the commonest, has no "~" or "/")
                            plain_k = k in ANNOTATIONS or ("~" not in k and "/" not in k)
                            at = where + "/" + k if plain_k else pointer(where, k)
                            rows.append((at, k, ENFORCED, "annotation"))
                rows.append((where + "/type", "type", ENFORCED, ""))
            if value == nothing:  # the key cannot appear: the object neither, if it is required
                if n in required:
                    c.empty_why = Reason(None, path, c.empty_why, n)  # said when read
                    return None
                continue
            # a plain key: its rule's stem is "prop-" and the key as they are (fresh_stem, its
            # first try inline), and its canonical spelling the key in quotes, in the member's one seq
            if plain:
                name = "prop-" + n
                if name in rules:
                    name = U.fresh_stem(rules, name)
                else:
                    rules[name] = nothing  # reserved, as fresh_stem does
                key = None if canonical else self.key(n)
            else:
                name = U.fresh(rules, f"prop-{n}")
                key = self.key(n)
            if colon is None:
                colon = c.sep(":")
            if key is None:
                rules[name] = ir.seq(_QUOTE, ir.Literal(n.encode()), _QUOTE, colon, value)
            else:
                rules[name] = ir.seq(key, colon, value)
            member[n] = ir.Ref(name)
        return member

    def _canonical(self, o: _Object, path: str) -> ir.Expr:
        """Canonical mode: the listed members in the order the schema lists them (optional ones
        may be skipped, never moved), then the free members; no listed key twice.  Linear in
        the number of keys: counters and the few keys ``dependentRequired`` or a condition on
        ``required`` names are remembered, never the set of keys seen."""
        rep = self.c.rep
        why = _WHY[len(o.order) > 1, bool(o.order), o.closed]
        if why:
            where = path + "/properties" if "properties" in o.s else path
            rep.narrowed(where, "properties", why)
        free = ir.alt(*o.free) if o.free else ir.NOTHING
        if o.free:
            self._repeats_note(o.s, path)
        lo, hi = o.lo, o.hi
        if o.free and lo > len(o.required) + 1:
            rep.rejected(
                path + "/minProperties",
                "minProperties",
                "counting properties when extra keys may repeat",
            )
            lo = 0
        for k in ("minProperties", "maxProperties"):
            if k in o.s:
                rep.enforced(path + "/" + k, k)
        out = self._walk(o, o.order, free, False, lo, hi)
        if out is None:
            rep.rejected(path, "dependentRequired", _TOO_MANY)
            return ir.NOTHING
        return out

    def _walk(
        self, o: _Object, order: list[str], free: ir.Expr, free_everywhere: bool, lo: int, hi: int | None
    ) -> ir.Expr | None:
        """``{`` members ``}`` walked along ``order`` (required ones forced), with ``free``
        members at the end (or between any two with ``free_everywhere``), counted for
        ``lo``/``hi``, ``dependentRequired`` and conditions on ``required`` checked at the close."""
        c = self.c
        req = set(o.required)
        on = set(order)
        watch = (
            on & (
                set(o.dep_req) | {b for bs in o.dep_req.values() for b in bs}
                | {n for _, sets in o.presence for st in sets for n in st}
            )
            if o.dep_req or o.presence
            else set()
        )  # fmt: skip
        count = lo > len(req) or hi is not None
        cap = max(lo, 0 if hi is None else hi + 1)
        has_free = free != ir.NOTHING

        def steps(i: int, x: tuple[frozenset[str], int]) -> list[tuple[ir.Expr | None, int, Any]]:
            seen, k = x
            more = hi is None or k < hi
            nk = min(k + 1, cap) if count else 0
            out: list[tuple[ir.Expr | None, int, Any]] = []
            if i < len(order):
                n = order[i]
                if more:
                    out.append((o.member[n], i + 1, (seen | {n} if n in watch else seen, nk)))
                if n not in req:
                    out.append((None, i + 1, x))
            if has_free and more and (free_everywhere or i == len(order)):
                out.append((free, i, (seen, nk)))
            return out

        dep_req, presence = o.dep_req, o.presence

        def final(x: tuple[frozenset[str], int]) -> bool:
            seen, k = x
            if dep_req and any(b not in seen for a in seen for b in dep_req.get(a, [])):
                return False
            if presence and not all(_holds(kind, sets, seen) for kind, sets in presence):
                return False
            return not count or (lo <= k and (hi is None or k <= hi))

        # nothing to remember (no key watched) nor count (no maxProperties, so a member may
        # always come): the state stays (frozenset(), 0) and the walk needs no search
        if not watch and not count:
            body = self._ordered_constant(order, o.member, req, free, free_everywhere, final)
        else:
            body = self.ordered("obj", len(order), (frozenset(), 0), steps, final, "}")
        if body is None or body == ir.NOTHING:
            return body
        return ir.seq(U.lit("{"), c.ws(), body)

    def _repeats_note(self, s: dict[str, Any], path: str) -> None:
        kw = "type"
        for k in ("additionalProperties", "patternProperties", "properties"):  # the first present
            if k in s:
                kw = k
                break
        why = "keys not tracked may appear twice, each value checked (RFC 8259: names SHOULD be unique)"
        self.c.rep.enforced(pointer(path, kw), kw, why)

    def _any_order(self, o: _Object, path: str) -> ir.Expr:
        """The whole language: members in any order.  Keys that must be counted (``required``,
        ``dependentRequired`` names, those of a condition, every key when ``min/maxProperties``
        need counting) are tracked, one rule per set of them seen; past ``MAX_TRACKED`` the
        tracked keys come in schema order (narrowed)."""
        rep = self.c.rep
        member, free_parts, required = o.member, o.free, o.required
        tracked = list(required)
        for n in o.order:
            if n not in tracked and (n in o.watch_names()):
                tracked.append(n)
        lo, hi = o.lo, o.hi
        count = False
        if lo > len(required) or hi is not None:
            closed = not free_parts
            if hi is not None and closed and hi >= len(member):
                hi = None
            if lo <= len(required) and hi is None:
                pass
            elif closed:
                count = True
                tracked = list(o.order)
            elif not tracked and lo <= 1:
                return self._counted_free(member, free_parts, lo, hi, path)
            else:
                for k in ("minProperties", "maxProperties"):
                    if k in o.s:
                        rep.rejected(pointer(path, k), k, "counting properties when extra keys may repeat")
                lo, hi = 0, None
        for k in ("minProperties", "maxProperties"):
            if k in o.s:
                rep.enforced(pointer(path, k), k)
        untracked = [member[n] for n in o.order if n not in tracked]
        if untracked or free_parts:
            self._repeats_note(o.s, path)
        free = ir.alt(*untracked, *free_parts) if untracked or free_parts else ir.NOTHING
        if free != ir.NOTHING:  # one shared rule: every key-subset state refers to it
            fname = U.fresh_stem(self.c.rules, "members")
            self.c.rules[fname] = free
            free = ir.Ref(fname)
        if len(tracked) > MAX_TRACKED:
            if o.presence:
                rep.rejected(path, "oneOf", f"a condition on more than {MAX_TRACKED} tracked keys")
            why = f"more than {MAX_TRACKED} tracked keys: they come in schema order"
            rep.narrowed(path + "/required", "required", why)
            order = [n for n in o.order if n in tracked]
            out = self._walk(o, order, free, True, lo if count else 0, hi if count else None)
            return ir.NOTHING if out is None else out
        req, dep_req, presence = required, o.dep_req, o.presence

        def final(st: frozenset[str]) -> bool:
            if not all(r in st for r in req):
                return False
            if not all(all(b in st for b in dep_req.get(a, [])) for a in st):
                return False
            if not all(_holds(kind, sets, st) for kind, sets in presence):
                return False
            return not count or (lo <= len(st) and (hi is None or len(st) <= hi))

        def moves(st: frozenset[str]) -> list[tuple[ir.Expr, Any]]:
            return [(member[t], st | {t}) for t in tracked if t not in st]

        return self.machine("obj", frozenset(), final, moves, free, "{", "}")

    def _pattern_automata(self, patterns: dict[str, Any], path: str) -> list[chardfa.CharDFA] | None:
        """One automaton per pattern (its ECMA-262 search language), or None (reported)."""
        if not patterns:
            return None
        where = path + "/patternProperties"
        if len(patterns) > MAX_PATTERNS:
            self.c.rep.rejected(where, "patternProperties", f"more than {MAX_PATTERNS} patterns")
            return None
        try:
            return [pattern_dfa(p) for p in patterns]  # kept across compiles (strings)
        except GrammarError as e:
            self.c.rep.rejected(where, "patternProperties", e.message)
            return None

    def _pattern_members(
        self,
        patterns: dict[str, Any],
        automata: list[chardfa.CharDFA],
        names: list[str],
        values: dict[str, Any],
        region_of: dict[str, tuple[bool, ...]],
        addl: Any,
        path: str,
        base: str,
    ) -> list[ir.Expr]:
        """Members whose key is not a listed name: the keys are split by which patterns they
        match (a product of the patterns' automata), each region with the ``allOf`` of its
        patterns' schemas, or ``additionalProperties`` where none matches.  A listed name is cut
        out of its region only when its own schema differs from the region's."""
        c, rep = self.c, self.c.rep
        where = path + "/patternProperties"
        schemas = list(patterns.values())
        try:
            raw, flags = chardfa.regions(automata)
        except GrammarError as e:
            rep.rejected(where, "patternProperties", e.message)
            return []
        out: list[ir.Expr] = []
        for region in sorted(set(flags), key=lambda f: [not x for x in f]):
            hits = [ps for ps, hit in zip(schemas, region, strict=True) if hit]
            value = _all_of(hits) if hits else addl
            if value is False:
                continue
            own = [n for n in names if region_of[n] == region and not _same(values[n], value)]
            try:
                keys = raw.where([f == region for f in flags])
                if own:
                    keys = chardfa.product([keys, chardfa.words(own)], lambda f: f[0] and not f[1])
                if keys.is_empty():
                    continue
                local: dict[str, ir.Expr] = {}
                key_expr = keys.to_expr(local, "key")
            except GrammarError as e:
                rep.rejected(where, "patternProperties", e.message)
                continue
            at = (
                path + "/additionalProperties" if not hits
                else pointer(where, next(p for p, hit in zip(patterns, region, strict=True) if hit))
            )  # fmt: skip
            v = c.schema(value, at, base)
            if v == ir.NOTHING:
                continue
            key = Encoder(c.rules, "key", share_classes=True).encode_all(key_expr, local)
            out.append(ir.seq(U.lit('"'), key, U.lit('"'), c.sep(":"), v))
        rep.enforced(where, "patternProperties", "keys split by the patterns they match (ECMA-262 search)")
        return out

    def _counted_free(
        self, member: dict[str, ir.Expr], free_parts: list[ir.Expr], lo: int, hi: int | None, path: str
    ) -> ir.Expr:
        c = self.c
        m = ir.alt(*member.values(), *free_parts)
        alts = []
        if lo == 0:
            alts.append(ir.seq(U.lit("{"), c.ws(), U.lit("}")))
        if hi is None or hi >= 1:
            more = ir.Repeat(ir.seq(c.sep(","), m), 0, None if hi is None else hi - 1)
            alts.append(ir.seq(U.lit("{"), c.ws(), m, more, c.ws(), U.lit("}")))
        return ir.alt(*alts) if alts else ir.NOTHING

    def key(self, name: str) -> ir.Expr:
        """``"name"`` in every JSON spelling (canonical: its one), made once per process: keys
        repeat across schemas ("id", "name", "type"), and IR is immutable."""
        canonical = self.c.canonical
        out = _KEYS.get((name, canonical))
        if out is None:
            out = ir.seq(_QUOTE, encode_text(name, canonical), _QUOTE)
            if len(_KEYS) < _KEYS_MAX:
                _KEYS[(name, canonical)] = out
        return out

    def _key_language(self, pn: Any, where: str, others: bool) -> ir.Expr | None:
        c = self.c
        if others:
            c.rep.rejected(
                where, "propertyNames", "propertyNames together with listed properties and extra keys"
            )
            return None
        try:
            pn = c.resolve_part(pn, "", [16])
        except (Unmergeable, GrammarError):
            c.rep.rejected(where, "propertyNames", "cannot resolve propertyNames")
            return None
        if "string" not in type_set(pn):
            return ir.NOTHING
        if "enum" in pn:  # a finite set of names: those the other keywords let through
            others_kw = {k: v for k, v in pn.items() if k != "enum"}
            verdicts = [(v, evaluate(others_kw, v)) for v in pn["enum"] if isinstance(v, str)]
            if any(ok is None for _, ok in verdicts):
                c.rep.rejected(where, "propertyNames", "an enum beside keywords not evaluated here")
                return None
            names = list(dict.fromkeys(v for v, ok in verdicts if ok))
            return ir.alt(*[encode_text(n, c.canonical) for n in names]) if names else ir.NOTHING
        if any(
            k not in ("type", "minLength", "maxLength", "pattern", "format") and not is_annotation(k)
            for k in pn
        ):
            c.rep.rejected(where, "propertyNames", "only string keywords are supported in propertyNames")
            return None
        return c.strings.body(pn, where)

    # ------------------------------------------------------------------ arrays

    def array(self, s: dict[str, Any], path: str, base: str) -> ir.Expr:
        c, rep = self.c, self.c.rep
        prefix = list(s.get("prefixItems", []))
        rest = s.get("items", True)
        if "unevaluatedItems" in s:
            if "items" in s:
                rep.enforced(path + "/unevaluatedItems", "unevaluatedItems", "no effect beside items")
            elif "contains" in s:
                rep.rejected(
                    path + "/unevaluatedItems", "unevaluatedItems", "unevaluatedItems beside contains"
                )
            else:
                rest = s["unevaluatedItems"]
                rep.enforced(path + "/unevaluatedItems", "unevaluatedItems", "acts as items here")
        lo = s.get("minItems", 0)
        hi = s.get("maxItems")
        if c.canonical and prefix and "items" not in s and "unevaluatedItems" not in s and lo <= len(prefix):
            # canonical: no items beyond those the schema lists (XGrammar's default)
            rest = False
            why = "canonical: no items beyond prefixItems are generated"
            rep.narrowed(path + "/prefixItems", "prefixItems", why)
        for k in ("prefixItems", "items", "minItems", "maxItems"):
            if k in s:
                rep.enforced(pointer(path, k), k)
        if "maxContains" in s or "minContains" in s:
            if "contains" not in s:
                for k in ("minContains", "maxContains"):
                    if k in s:
                        rep.enforced(pointer(path, k), k, "no effect without contains")
        if "contains" in s:
            out = self._contains(s, prefix, rest, lo, hi, path, base)
            if out is not None:
                return out
        if s.get("uniqueItems") is True and (hi is None or hi > 1):
            out = self._unique(s, prefix, rest, lo, hi, path, base)
            if out is not None:
                return out
        elif "uniqueItems" in s:
            rep.enforced(path + "/uniqueItems", "uniqueItems")
        elems = [c.schema(x, pointer(path, "prefixItems", i), base) for i, x in enumerate(prefix)]
        r = c.schema(rest, path + "/items", base)
        if r not in (ir.NOTHING, ir.EPSILON) and not isinstance(r, ir.Ref):
            # the item grammar is used twice below: share it, or nested arrays double per level
            name = U.fresh_stem(c.rules, "items")
            c.rules[name] = r
            r = ir.Ref(name)
        sep = c.sep(",")
        n = len(elems)
        if hi is not None and hi < lo:
            return ir.NOTHING

        def tail(i: int) -> ir.Expr:
            if i >= n:
                need = max(lo - i, 0)
                top = None if hi is None else hi - i
                if r == ir.NOTHING:
                    return ir.EPSILON if need == 0 else ir.NOTHING
                if top is not None and top < need:
                    return ir.NOTHING
                return ir.Repeat(ir.seq(sep, r), need, top) if top != 0 else ir.EPSILON
            alts: list[ir.Expr] = []
            if i >= lo:
                alts.append(ir.EPSILON)
            if hi is None or i < hi:
                alts.append(ir.seq(sep, elems[i], tail(i + 1)))
            return ir.alt(*alts) if alts else ir.NOTHING

        alts = []
        if lo == 0:
            alts.append(ir.seq(U.lit("["), c.ws(), U.lit("]")))
        if hi is None or hi >= 1:
            first, after = (elems[0], tail(1)) if n else (r, tail(1))
            if first != ir.NOTHING and after != ir.NOTHING:
                alts.append(ir.seq(U.lit("["), c.ws(), first, after, c.ws(), U.lit("]")))
        tail = U.spent  # it calls itself through its cell: rebound, it is freed here, not by the collector
        return ir.alt(*alts) if alts else ir.NOTHING

    def _contains(
        self, s: dict[str, Any], prefix: list[Any], rest: Any, lo: int, hi: int | None, path: str, base: str
    ) -> ir.Expr | None:
        c, rep = self.c, self.c.rep
        where = path + "/contains"
        m = s.get("minContains", 1)
        if m == 0 and "maxContains" not in s:
            rep.enforced(where, "contains", "minContains 0")
            return None
        if prefix or hi is not None or lo > m or "maxContains" in s:
            return self._contains_counted(s, prefix, rest, lo, hi, path, base)
        try:
            both = intersect(c.resolve_part(rest, base, [16]), c.resolve_part(s["contains"], base, [16]))
        except (Unmergeable, GrammarError):
            rep.rejected(where, "contains", "cannot intersect contains with items")
            return None
        rep.enforced(where, "contains")
        if "minContains" in s:
            rep.enforced(path + "/minContains", "minContains")
        r = c.schema(rest, path + "/items", base)
        hit = c.schema(both, where, base)
        sep = c.sep(",")
        skip = ir.Repeat(ir.seq(r, sep), 0, None)
        body = ir.seq(
            skip, hit, ir.Repeat(ir.seq(sep, skip, hit), m - 1, m - 1), ir.Repeat(ir.seq(sep, r), 0, None)
        )
        return ir.seq(U.lit("["), c.ws(), body, c.ws(), U.lit("]"))

    def _contains_counted(
        self, s: dict[str, Any], prefix: list[Any], rest: Any, lo: int, hi: int | None, path: str, base: str
    ) -> ir.Expr | None:
        """``contains`` with counts, ``prefixItems`` or ``maxItems``: each item either matches
        ``contains`` or one of the schemas of its complement (:meth:`SchemaCompiler._negate`),
        and a machine on (position, matches) checks the counts and the length."""
        c, rep = self.c, self.c.rep
        where = path + "/contains"
        m = s.get("minContains", 1)
        top = s.get("maxContains")
        width = max(len(prefix), lo, hi or 0)
        cap = max(m, top + 1 if top is not None else 0)
        if width > MAX_CONTAINS_STATES or cap > MAX_CONTAINS_STATES:
            rep.rejected(where, "contains", f"contains counts or positions beyond {MAX_CONTAINS_STATES}")
            return None
        try:
            cont = c.resolve_part(s["contains"], base, [16])
            negs = c._negate(cont)
            if negs is None:
                raise Unmergeable("contains", "the complement of this contains schema cannot be written")
            parts = [c.resolve_part(x, base, [16]) for x in [*prefix, rest]]
            hits = [intersect(p, cont) for p in parts]
            misses = [[intersect(p, d) for d in negs] for p in parts]
        except Unmergeable as e:
            rep.rejected(where, "contains", e.reason)
            return None
        except GrammarError as e:
            rep.rejected(where, "contains", e.message)
            return None
        for k in ("contains", "minContains", "maxContains"):
            if k in s:
                rep.enforced(pointer(path, k), k, "items counted by a machine on (position, matches)")
        exprs: dict[int, tuple[ir.Expr, ir.Expr]] = {}

        def item(i: int) -> tuple[ir.Expr, ir.Expr]:
            j = min(i, len(prefix))
            if j not in exprs:
                at = pointer(path, "prefixItems", j) if j < len(prefix) else path + "/items"
                hit = c.schema(hits[j], where, base)
                miss = [c.schema(x, at, base) for x in misses[j]]
                live = [x for x in miss if x != ir.NOTHING]
                exprs[j] = (hit, ir.alt(*live) if live else ir.NOTHING)
            return exprs[j]

        def moves(st: tuple[int, int]) -> list[tuple[ir.Expr, Any]]:
            i, h = st
            if hi is not None and i >= hi:
                return []
            hit, miss = item(i)
            nxt = min(i + 1, width)
            return [(hit, (nxt, min(h + 1, cap))), (miss, (nxt, h))]

        def final(st: tuple[int, int]) -> bool:
            i, h = st
            return i >= lo and h >= m and (top is None or h <= top)

        return self.machine("contains", (0, 0), final, moves, ir.NOTHING, "[", "]")

    def _unique(
        self, s: dict[str, Any], prefix: list[Any], rest: Any, lo: int, hi: int | None, path: str, base: str
    ) -> ir.Expr | None:
        c, rep = self.c, self.c.rep
        where = path + "/uniqueItems"
        values = None
        if not prefix:
            try:
                r = c.resolve_part(rest, base, [16])
                values = finite_values(r)
            except (Unmergeable, GrammarError):
                values = None
        if values is None or len(values) > MAX_UNIQUE_VALUES:
            rep.rejected(where, "uniqueItems", "only for items drawn from a small finite set of values")
            return None
        rep.enforced(where, "uniqueItems")
        consts = [c.const_value(v, where) for v in values]
        idx = range(len(values))
        return self.machine(
            "uniq", frozenset(), lambda st: lo <= len(st) and (hi is None or len(st) <= hi),
            lambda st: [(consts[i], st | {i}) for i in idx if i not in st], ir.NOTHING, "[", "]",
        )  # fmt: skip


def finite_values(s: dict[str, Any]) -> list[Any] | None:
    """The values a schema allows when they are finitely many and it says so plainly."""
    if "enum" in s:
        rest = {k: v for k, v in s.items() if k != "enum"}
        out: list[Any] = []
        for v in s["enum"]:
            ok = evaluate(rest, v)
            if ok is None:
                return None
            if ok and not any(equal(v, w) for w in out):
                out.append(v)
        return out
    if any(not is_annotation(k) and k != "type" for k in s):
        return None
    ts = type_set(s)
    if ts <= {"null", "boolean"}:
        return ([None] if "null" in ts else []) + ([False, True] if "boolean" in ts else [])
    return None

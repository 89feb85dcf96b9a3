"""Token-level grammars with follow restrictions → IR.

A Lark terminal may come with *follow restrictions*: a string of a terminal
variant may not be followed directly by a character in that variant's
``forbidden`` set (a trailing ``(?!C)`` in its pattern, or a greedy terminal's
longest match, see :func:`cfgmask.frontends.regex.terminal_variants`).  The IR has no
lookahead, so the restriction is compiled into the grammar: the grammar is
intersected with the automaton whose state is "the set of characters the next
character must avoid" (state 0 is the empty set).  Reading a terminal variant
in state ``s`` keeps only its strings that start outside ``s`` and moves to
the variant's ``forbidden`` set.  Each nonterminal ``A`` becomes ``A[s>t]``:
the strings of ``A`` read from state ``s`` that leave the automaton in state
``t`` (the classic product of a context-free grammar with a finite
automaton, here over terminals).  End of input is allowed in every state.

To keep the product small, a state is dropped (to state 0) wherever none of
its characters can come next: inside an expansion whose remainder cannot be
empty, the next character is one of the remainder's first characters.  And the
remainders of expansions (``<tail n>`` rules) are shared, since the state an
expansion starts in mostly matters for its first symbol only.

Without restrictions the grammar is written out unchanged, one IR rule per
nonterminal and per terminal.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from ..ir_ops import Ranges, first_chars, intersect, nullable, restrict_first, union
from ..lookahead import lookahead_classes

Variants = list[tuple[ir.Expr, Ranges]]


@dataclass(frozen=True, slots=True)
class Symbol:
    """A nonterminal or terminal (``terminal=True``) of the token-level grammar."""

    name: str
    terminal: bool


Rules = dict[str, list[list[Symbol]]]


def to_ir(
    rules: Rules,
    variants: dict[str, Variants],
    top: str,
    start: str,
    ignore: tuple[str, ...] = (),
    opaque: dict[str, Ranges] | None = None,
) -> dict[str, ir.Expr]:
    """IR rules for ``rules`` (nonterminal → expansions); ``start`` is the new start rule.
    ``ignore``: the ``%ignore`` terminals (``rules`` lets them occur before every terminal
    and at the end).  ``opaque``: terminals whose expressions refer to rules or tokens (the
    llguidance extensions of :mod:`.lark_ext`), with the characters they may start with;
    they have no follow restriction of their own."""
    if all(not forbidden for vs in variants.values() for _, forbidden in vs):
        return _plain(
            rules, {name: ir.alt(*(expr for expr, _ in vs)) for name, vs in variants.items()}, top, start
        )
    opaque = opaque or {}
    marked = _with_markers(variants, ignore, opaque)
    if marked is not None:
        return _plain(rules, marked, top, start)
    return _Product(rules, variants, opaque).emit(top, start)


def _first_chars(name: str, expr: ir.Expr, opaque: dict[str, Ranges]) -> Ranges:
    return opaque[name] if name in opaque else first_chars(expr)


def _plain(rules: Rules, terminals: dict[str, ir.Expr], top: str, start: str) -> dict[str, ir.Expr]:
    out = {name: ir.alt(*(_plain_seq(e) for e in body)) for name, body in rules.items()}
    out.update(terminals)
    out[start] = ir.Ref(top)
    return out


def _with_markers(
    variants: dict[str, Variants], ignore: tuple[str, ...], opaque: dict[str, Ranges]
) -> dict[str, ir.Expr] | None:
    """Each terminal as the union of its variants, a restricted variant followed by a
    lookahead (:class:`cfgmask.ir.Lookahead`) on its forbidden characters: the
    parser checks the restriction on the next bytes at run time, instead of the product with
    the restriction automaton (about 10 times the rules on sql.lark, and Earley sets as many
    times wider).  None when that would not be exact.  The parser's sets hold items that owe
    a restriction, and an item whose every continuation is forbidden would be a dead end the
    product trims; there is none when some ``%ignore`` terminal ``I`` (which may come after
    any terminal, and before the end) starts with a character no other marker forbids, and
    forbids no character a non-ignored terminal starts with.
    """
    first = {
        n: ir.normalize_ranges([r for e, _ in vs for r in _first_chars(n, e, opaque)])
        for n, vs in variants.items()
    }
    # no other character can come next: forbidding it or not is the same
    any_first = ir.normalize_ranges([r for rs in first.values() for r in rs])
    met: dict[Ranges, Ranges] = {}  # most keywords forbid the same word class after them

    def reachable(f: Ranges) -> Ranges:
        if f not in met:
            met[f] = intersect(ir.normalize_ranges(list(f)), any_first) if f else ()
        return met[f]

    forbidden = {n: [reachable(f) for _, f in vs] for n, vs in variants.items()}
    out: dict[str, ir.Expr] = {}
    for name, vs in variants.items():
        options = []
        for (expr, _), f in zip(vs, forbidden[name], strict=True):
            if not f:
                options.append(expr)
            elif nullable(expr):
                return None
            else:
                options.append(ir.seq(expr, ir.lookahead(f)))
        out[name] = ir.alt(*options)
    try:
        lookahead_classes(tuple(sorted({f for fs in forbidden.values() for f in fs if f})))
    except ValueError:
        return None
    starts = ir.normalize_ranges([r for n in variants if n not in ignore for r in first[n]])
    for i in ignore:
        own = ir.normalize_ranges([r for f in forbidden.get(i, ()) for r in f])
        others = [f for n, fs in forbidden.items() if n != i for f in fs if f]
        if (
            i in variants
            and not intersect(own, starts)
            and all(intersect(first[i], ir.complement_ranges(f)) for f in others)
        ):
            return out
    return None


def _plain_seq(expansion: list[Symbol]) -> ir.Expr:
    return ir.seq(*(ir.Ref(s.name) for s in expansion)) if expansion else ir.EPSILON


class _Product:
    """The grammar intersected with the follow-restriction automaton."""

    def __init__(self, rules: Rules, variants: dict[str, Variants], opaque: dict[str, Ranges]) -> None:
        self.rules = rules
        self.opaque = opaque
        self.variants = variants
        self.states: list[Ranges] = [()]
        self.ids: dict[Ranges, int] = {(): 0}
        self.term_cache: dict[tuple[str, int], dict[int, ir.Expr]] = {}
        self.projected: dict[tuple[int, frozenset[str]], int] = {}
        self.hit: dict[tuple[int, str], bool] = {}
        self.out: dict[tuple[str, int], set[int]] = {}
        self.changed = False
        self.nullable, self.first = _first_sets(rules, variants)
        self.first_chars = {
            n: ir.normalize_ranges([r for e, _ in vs for r in _first_chars(n, e, opaque)])
            for n, vs in variants.items()
        }
        # Every next character is the first character of some terminal (or there is none:
        # end of input is always allowed), so a forbidden character no terminal can start
        # with never matters: states are kept as their intersection with these.  This merges
        # e.g. a keyword's (?!\w) with NAME's longest match [A-Za-z0-9_].
        self.any_first: Ranges = ir.normalize_ranges([r for rs in self.first_chars.values() for r in rs])
        self.suffix = {(n, i): self._suffixes(e) for n, body in rules.items() for i, e in enumerate(body)}

    def state(self, ranges: Ranges) -> int:
        ranges = intersect(ranges, self.any_first)
        if ranges not in self.ids:
            self.ids[ranges] = len(self.states)
            self.states.append(ranges)
        return self.ids[ranges]

    def _suffixes(self, expansion: list[Symbol]) -> list[frozenset[str] | None]:
        """For each position, the terminals that can start the rest (None: the rest may be empty)."""
        out: list[frozenset[str] | None] = [None]
        for sym in reversed(expansion):
            out.insert(0, self.rest_first((sym,), out[0]))
        return out

    def rest_first(
        self, symbols: tuple[Symbol, ...], then: frozenset[str] | None = None
    ) -> frozenset[str] | None:
        """The terminals that can start ``symbols`` followed by something that starts with
        ``then``; None when all of it may be empty."""
        acc: frozenset[str] = frozenset()
        for sym in symbols:
            acc |= self.first[sym.name]
            if sym.name not in self.nullable:
                return acc
        return None if then is None else acc | then

    def project(self, state: int, nxt: frozenset[str] | None) -> int:
        """``state``, or 0 when none of the characters it forbids can start what comes next."""
        if nxt is None or state == 0:
            return state
        key = (state, nxt)
        if key not in self.projected:
            self.projected[key] = state if any(self.hits(state, t) for t in nxt) else 0
        return self.projected[key]

    def hits(self, state: int, terminal: str) -> bool:
        key = (state, terminal)
        if key not in self.hit:
            self.hit[key] = bool(intersect(self.states[state], self.first_chars[terminal]))
        return self.hit[key]

    # ---------------------------------------------------------------- analysis

    def terminal(self, name: str, state: int) -> dict[int, ir.Expr]:
        """The variants of ``name`` readable in ``state``, by the state they lead to."""
        key = (name, state)
        if key not in self.term_cache:
            allowed = ir.complement_ranges(self.states[state])
            by_target: dict[int, list[ir.Expr]] = {}
            for expr, forbidden in self.variants[name]:
                if state == 0:
                    kept = expr
                elif name in self.opaque or nullable(expr):  # a token or nothing may come first:
                    # the restriction is checked on whatever character comes next
                    kept = ir.seq(ir.lookahead(self.states[state]), expr)
                else:
                    kept = restrict_first(expr, allowed)
                if kept != ir.NOTHING:
                    by_target.setdefault(self.state(forbidden), []).append(kept)
            self.term_cache[key] = {t: ir.alt(*es) for t, es in by_target.items()}
        return self.term_cache[key]

    def targets(self, sym: Symbol, state: int) -> set[int]:
        if sym.terminal:
            return set(self.terminal(sym.name, state))
        key = (sym.name, state)
        if key not in self.out:
            self.out[key] = set()
            self.changed = True
        return self.out[key]

    def analyse(self, top: str) -> None:
        """Least fixpoint of ``out[(A, s)]``: the states ``A`` can end in when read from ``s``."""
        self.out = {(top, 0): set()}
        self.changed = True
        while self.changed:
            self.changed = False
            for (name, state), ends in list(self.out.items()):
                for index in range(len(self.rules[name])):
                    reached = self.walk(name, index, state)
                    if not reached <= ends:
                        ends |= reached
                        self.changed = True

    def walk(self, name: str, index: int, state: int) -> set[int]:
        """The states an expansion can end in when read from ``state``."""
        expansion, suffix = self.rules[name][index], self.suffix[(name, index)]
        states = {self.project(state, suffix[0])}
        for k, sym in enumerate(expansion):
            states = {self.project(t, suffix[k + 1]) for s in states for t in self.targets(sym, s)}
        return states

    # ---------------------------------------------------------------- output

    def emit(self, top: str, start: str) -> dict[str, ir.Expr]:
        self.analyse(top)
        out: dict[str, ir.Expr] = {}
        self.emitted = out
        self.tails: dict[tuple[tuple[Symbol, ...], int, int], ir.Expr] = {}
        for (name, state), ends in self.out.items():
            for end in sorted(ends):
                bodies = [
                    self.tail(tuple(e), self.project(state, self.suffix[(name, i)][0]), end)
                    for i, e in enumerate(self.rules[name])
                ]
                out[self.name(name, state, end)] = union(bodies)
        for (name, state), by_target in self.term_cache.items():
            for end, expr in by_target.items():
                out[self.name(name, state, end)] = expr
        out[start] = union([ir.Ref(self.name(top, 0, end)) for end in sorted(self.out[(top, 0)])])
        return out

    def name(self, name: str, state: int, end: int) -> str:
        return name if state == end == 0 else f"{name}[{state}>{end}]"

    def tail(self, symbols: tuple[Symbol, ...], state: int, end: int) -> ir.Expr:
        """The strings of ``symbols`` read from (projected) ``state`` that end in ``end``.

        Shared by every expansion with the same remainder: the state before an
        expansion mostly matters for its first symbol only.  A tail with more than
        one way through becomes a rule ``<tail n>``; a single way stays inline.
        """
        if not symbols:
            return ir.EPSILON if state == end else ir.NOTHING
        key = (symbols, state, end)
        if key not in self.tails:
            first, rest = symbols[0], symbols[1:]
            nxt = self.rest_first(rest)
            options = []
            for t in sorted(self.targets(first, state)):
                after = self.tail(rest, self.project(t, nxt), end)
                if after != ir.NOTHING:
                    options.append(ir.seq(ir.Ref(self.name(first.name, state, t)), after))
            expr = union(options)
            if len(options) > 1:
                rule = f"<tail {len(self.tails)}>"
                self.emitted[rule] = expr
                expr = ir.Ref(rule)
            self.tails[key] = expr
        return self.tails[key]


def _first_sets(rules: Rules, variants: dict[str, Variants]) -> tuple[set[str], dict[str, frozenset[str]]]:
    """Nullable nonterminals and the terminals that can start each symbol (least fixpoints)."""
    first: dict[str, frozenset[str]] = {n: frozenset((n,)) for n in variants}
    first.update({n: frozenset() for n in rules})
    nullable: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, body in rules.items():
            for expansion in body:
                acc = first[name]
                for sym in expansion:
                    acc |= first[sym.name]
                    if sym.terminal or sym.name not in nullable:
                        break
                else:
                    if name not in nullable:
                        nullable.add(name)
                        changed = True
                if acc != first[name]:
                    first[name] = acc
                    changed = True
    return nullable, first

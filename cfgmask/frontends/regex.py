"""Regular expressions → IR: Python ``re`` (the default) or ECMAScript (``flavor="ecmascript"``).

A byte string is in the language of ``parse_regex(p)`` iff it is the UTF-8
encoding of a string ``s`` with ``re.fullmatch(p, s)``; of
``parse_regex(p, flavor="ecmascript")`` iff ECMAScript's ``/^(?:p)$/u`` matches
``s``.  The ECMAScript flavour (JSON Schema's ``pattern`` dialect) is parsed by
:mod:`.ecmascript` into the same node tuples as ``re``'s parser produces, every
character set spelled as explicit ranges, and translated by the same code below;
:func:`ecmascript_search` gives its search language (a match anywhere).

How it stays exact
------------------
The pattern is parsed by Python's own parser (``re._parser``, formerly
``sre_parse``), so escapes, classes, ``\\N{...}``, inline and scoped flags and
verbose mode mean exactly what they mean to ``re``.  The parse tree is then
translated node by node.  Every single-character item (a literal, ``[...]``,
``.``, ``\\d`` and friends) becomes the exact set of code points it matches:
plain literals and ranges directly; anything that depends on Unicode tables
(``\\d \\w \\s`` and their negations, and every item under ``IGNORECASE``) by
letting ``re`` itself scan a string of all code points once per distinct item
(cached).  Surrogates are dropped: they have no UTF-8 encoding.

Supported: literals, escapes, classes, ``.``, ``\\d \\w \\s \\D \\W \\S``,
greedy and lazy quantifiers (``* + ? {m} {m,} {m,n} {,n}``; under fullmatch a
lazy quantifier accepts the same strings), alternation, ``( )``, ``(?: )``,
``(?P<n> )``, flags ``i s x a m`` (global or scoped).

Anchors: ``^`` and ``\\A`` where nothing can have been consumed before them are
no-ops, and where something must have been consumed they match nothing;
``$`` and ``\\Z`` where nothing can be consumed after them are no-ops (``$``
before a final newline never ends a full match, so ``a$`` fullmatches only
``"a"``), and ``\\Z`` with something after it matches nothing.  Any other
placement is rejected.

Word boundaries ``\\b`` and ``\\B`` (over ``\\w``: Unicode or ASCII as the flags
say; ``[A-Za-z0-9_]`` in ECMAScript) are compiled into both neighbours in their
sequence: what precedes is split by its last character (a word character,
another, or none) and what follows by its first, and the pairs the assertion
allows are kept.  "None" is the edge of the text, so a neighbour that may be
empty must reach it (the sequence starts or ends every match); otherwise the
assertion is rejected.

Lookaround of one character (``(?=C) (?!C) (?<=C) (?<!C)``, ``C`` a literal,
class or ``.``) is compiled into the neighbouring text: a lookahead restricts
the first character of what follows it in its sequence when that cannot be
empty (at the very end of the pattern, ``(?!C)`` always holds and ``(?=C)``
never does); a lookbehind restricts the last character of what precedes it in
its sequence, which may be empty only where the sequence starts every match
(there ``(?<!C)`` holds and ``(?<=C)`` does not).
Other lookaround is rejected.

Rejected with a :class:`GrammarError` naming the construct: backreferences,
lookaround of more than one character or in other places, conditionals
``(?(1)...)``, atomic groups and possessive quantifiers (``a*+a`` never
matches, so treating them as greedy would change the language), and the
``LOCALE`` flag.
"""

from __future__ import annotations

import _sre
import functools
import re
from typing import Any

from .. import ir
from ..errors import GrammarError
from ..ir_ops import (
    Ranges,
    concat,
    intersect,
    longest_match_follow,
    nullable,
    restrict_first,
    restrict_last,
    through_ref,
    union,
    without_refs,
)
from . import ecmascript
from .unicode_props import scalar_at, scalar_values

try:  # Python 3.11+
    from re import _constants as _c  # type: ignore[attr-defined]
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - older Pythons
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

# Plain ints: ``flags & re.IGNORECASE`` builds a ``RegexFlag`` (an enum operation) each time.
_I, _S, _M, _A, _L = (int(f) for f in (re.IGNORECASE, re.DOTALL, re.MULTILINE, re.ASCII, re.LOCALE))
_MAXREPEAT = _c.MAXREPEAT
ECMA_WORD = ecmascript.WORD
_MARKER = "<follow-restriction>"  # a trailing lookahead in terminal mode, numbered
_CATEGORY_TEXT = {
    _c.CATEGORY_DIGIT: r"\d",
    _c.CATEGORY_NOT_DIGIT: r"\D",
    _c.CATEGORY_SPACE: r"\s",
    _c.CATEGORY_NOT_SPACE: r"\S",
    _c.CATEGORY_WORD: r"\w",
    _c.CATEGORY_NOT_WORD: r"\W",
}
_REJECTED = {
    _c.GROUPREF: ("backreference", "backreference"),
    _c.GROUPREF_EXISTS: ("conditional group (?(...)...)", "conditional"),
}
if hasattr(_c, "ATOMIC_GROUP"):
    _REJECTED[_c.ATOMIC_GROUP] = ("atomic group (?>...)", "atomic")
    _REJECTED[_c.POSSESSIVE_REPEAT] = ("possessive quantifier", "possessive")

# What a position in the pattern knows about the text matched before (or after) it.
ZERO, SOME, MAYBE = "zero", "some", "maybe"

Node = tuple[Any, Any]  # one (opcode, argument) pair of the parse tree


FLAVORS = ("python", "ecmascript")


def parse_regex(pattern: str, flags: int = 0, *, flavor: str = "python") -> ir.Grammar:
    """A grammar with one start rule ``root`` whose language is ``re.fullmatch(pattern, ·)``
    (``flavor="ecmascript"``: the strings ECMAScript's ``/^(?:pattern)$/u`` matches)."""
    return ir.Grammar({"root": regex_to_expr(pattern, flags, flavor=flavor)}, "root", meta={"regex": pattern})


def regex_to_expr(pattern: str, flags: int = 0, *, anchors: bool = True, flavor: str = "python") -> ir.Expr:
    """The IR expression for ``pattern`` (``re`` flags in ``flags``); raises GrammarError.

    ``anchors=False`` rejects every anchor (for patterns used with ``re.match(text, pos)``,
    where ``^`` and ``$`` refer to the whole text rather than to the match).
    ``flavor="ecmascript"`` reads ECMA-262 syntax and semantics with the ``u`` flag
    (:mod:`.ecmascript`; ``flags`` must be 0).
    """
    if flavor == "ecmascript":
        if flags:
            raise GrammarError("re flags do not apply to an ECMAScript pattern")
        parsed = ecmascript.parse(pattern)
        return _Translator(pattern, 0, anchors, ecmascript=True).sequence(parsed.nodes, 0, ZERO, ZERO)
    if flavor != "python":
        raise GrammarError(f"unknown regex flavor {flavor!r} (expected one of {', '.join(FLAVORS)})")
    tree = _parse(pattern, flags)
    return _Translator(pattern, tree.state.flags, anchors).sequence(list(tree), tree.state.flags, ZERO, ZERO)


def ecmascript_search(pattern: str, parsed: ecmascript.Parsed | None = None) -> list[ir.Expr]:
    """Alternatives whose union is the strings an ECMAScript ``u`` regex *finds* a match in
    (``/pattern/u.test(s)``, JSON Schema's ``pattern``): each top-level branch becomes
    ``[^]* branch [^]*``, the left (right) side dropped where the branch starts with ``^``
    (ends with ``$``).  A branch with an assertion gets the wrapping in its own sequence, so
    that an assertion at its edge (``\\bcat\\b``) sees the text around the match.  ``parsed``:
    ``ecmascript.parse(pattern)`` when the caller has it (read here, never changed)."""
    if parsed is None:
        parsed = ecmascript.parse(pattern)
    branches = _top_branches(parsed.nodes)
    anything: Node = (_c.MAX_REPEAT, (0, _MAXREPEAT, [ecmascript.ranges_node(ecmascript.everything())]))
    start, end = (_c.AT, _c.AT_BEGINNING_STRING), (_c.AT, _c.AT_END_STRING)
    translator = _Translator(pattern, 0, True, ecmascript=True)
    # Branches without assertions share one wrapping per kind of anchoring: the automaton of
    # [^]*(b1|...|bn)[^]* is built directly, where n wrapped copies make subset construction
    # track every branch's partial match separately.  A branch with an assertion keeps its own
    # wrapping, in its own sequence, so that the assertion sees the text around the match.
    shared: dict[tuple[bool, bool], list[list[Node]]] = {}
    sequences = []
    for body in branches:
        anchored = (body[:1] == [start], body[-1:] == [end])
        if _has_assertion(body[anchored[0] : len(body) - anchored[1]]):
            sequences.append(([] if anchored[0] else [anything]) + body + ([] if anchored[1] else [anything]))
        else:
            shared.setdefault(anchored, []).append(body[anchored[0] : len(body) - anchored[1]])
    for (left, right), cores in shared.items():
        middle = cores[0] if len(cores) == 1 else [(_c.BRANCH, (None, cores))]
        sequences.append(([] if left else [anything]) + middle + ([] if right else [anything]))
    return [translator.sequence(nodes, 0, ZERO, ZERO) for nodes in sequences]


def _has_assertion(nodes: list[Node]) -> bool:
    """Whether an anchor, word boundary or lookaround occurs in ``nodes``."""
    for op, av in nodes:
        if op in (_c.AT, _c.ASSERT, _c.ASSERT_NOT):
            return True
        if op is _c.BRANCH and any(_has_assertion(list(b)) for b in av[1]):
            return True
        if op is _c.SUBPATTERN and _has_assertion(list(av[-1])):
            return True
        if op in (_c.MAX_REPEAT, _c.MIN_REPEAT) and _has_assertion(list(av[2])):
            return True
    return False


def terminal_variants(pattern: str, parsed: Any = None) -> list[tuple[ir.Expr, Ranges]]:
    """``pattern`` as a terminal matched inside a text: ``(expr, forbidden)`` pairs.

    The terminal's strings are the union of the ``expr``s; a string of a pair may
    not be followed directly by a character in ``forbidden``.  Two sources:

    * a trailing negative lookahead ``(?!C)`` (one character): the branches that
      end in it get ``forbidden = C``;
    * longest match: when only greedy quantifiers are used, no branch but the last
      can match the empty string, and the pattern is deterministic (see
      :func:`cfgmask.ir_ops.longest_match_follow`), ``re.match`` returns the
      longest match, so a match cannot be followed by a character that extends it.

    Anchors are rejected.  ``parsed``: ``re``'s parse of ``pattern`` (flags 0), if made already.
    """
    tree = _parse(pattern, 0) if parsed is None else parsed
    translator = _Translator(pattern, tree.state.flags, anchors=False, terminal=True)
    expr = translator.sequence(list(tree), tree.state.flags, ZERO, ZERO)
    follow = translator.follow or []
    if not follow and _greedy(list(tree)):
        variants = longest_match_follow(expr)
    else:
        variants = [(without_refs(expr), ())]
        variants += [(through_ref(expr, f"{_MARKER}{i}"), f) for i, f in enumerate(follow)]
    by_follow: dict[Ranges, list[ir.Expr]] = {}
    for variant, forbidden in variants:
        if variant != ir.NOTHING:
            by_follow.setdefault(forbidden, []).append(variant)
    return [(ir.alt(*exprs), forbidden) for forbidden, exprs in by_follow.items()]


def _top_branches(nodes: list[Node]) -> list[list[Node]]:
    """The alternatives of a sequence, through groups that are all of it: ``(^a$)|(^b$)``
    is the branches ``^a$`` and ``^b$``, so each gets its own anchors; a group at either
    end whose alternatives hold that end's anchor is distributed (``^a(b|$)`` is ``^ab``
    and ``^a$``)."""
    if len(nodes) == 1 and nodes[0][0] is _c.SUBPATTERN:
        return _top_branches(list(nodes[0][1][-1]))
    if len(nodes) == 1 and nodes[0][0] is _c.BRANCH:
        return [b for branch in nodes[0][1][1] for b in _top_branches(list(branch))]
    if len(nodes) > 1:
        for k, anchor in ((0, _c.AT_BEGINNING_STRING), (len(nodes) - 1, _c.AT_END_STRING)):
            inner = _top_branches([nodes[k]])
            edges = [(b[0] if k == 0 else b[-1]) for b in inner if b]
            if len(inner) > 1 and (_c.AT, anchor) in edges:
                before, after = nodes[:k], nodes[k + 1 :]
                return [b for x in inner for b in _top_branches(before + x + after)]
    return [nodes]


def _greedy(nodes: list[Node]) -> bool:
    """No lazy or possessive quantifier, no assertion, and in every alternation only the
    last branch may match the empty string: every choice ``re`` makes prefers going on."""
    for op, av in nodes:
        if op is _c.BRANCH:
            branches = [list(b) for b in av[1]]
            if any(_min_len(b) == 0 for b in branches[:-1]) or not all(_greedy(b) for b in branches):
                return False
        elif op is _c.SUBPATTERN:
            if not _greedy(list(av[-1])):
                return False
        elif op is _c.MAX_REPEAT:
            if not _greedy(list(av[2])):
                return False
        elif op not in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
            return False
    return True


def _parse(pattern: str, flags: int) -> Any:
    if flags & _L:
        raise GrammarError("the LOCALE flag is not supported")
    try:
        return _sre_parse.parse(pattern, flags)
    except re.error as e:
        raise GrammarError.at(f"invalid regular expression: {e.msg}", pattern, e.pos or 0) from None


# --------------------------------------------------------------------------- code-point sets


@functools.lru_cache(maxsize=4096)
def scan_class(atom: str) -> tuple[tuple[int, int], ...]:
    """The code points (surrogates excluded) that the one-character regex ``atom`` matches.

    Exact by construction: ``re`` itself finds the runs of matching code points.
    """
    found = re.finditer(f"(?:{atom})+", scalar_values())
    runs = [(scalar_at(m.start()), scalar_at(m.end() - 1)) for m in found]
    return ir.without_surrogates(ir.normalize_ranges(runs))  # a run may span the surrogates


@functools.lru_cache(maxsize=256)
def _others(chars: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """The code points not in normalized ``chars``, surrogates excluded: what ``(?!C)`` lets
    through.  Kept: every keyword of a Lark grammar asks it of the same ``\\w``."""
    return ir.without_surrogates(ir.complement_ranges(chars))


@functools.lru_cache(maxsize=64)
def _flag_prefix(flags: int, relevant: int) -> str:
    letters = "".join(ch for ch, f in (("i", _I), ("s", _S), ("a", _A)) if flags & relevant & f)
    return f"(?{letters}:" if letters else "(?:"


def _class_text(items: list[Node]) -> str:
    parts = []
    for op, av in items:
        if op is _c.NEGATE:
            parts.append("^")
        elif op is _c.LITERAL:
            parts.append(f"\\U{av:08x}")
        elif op is _c.RANGE:
            parts.append(f"\\U{av[0]:08x}-\\U{av[1]:08x}")
        elif op is _c.CATEGORY:
            parts.append(_CATEGORY_TEXT[av])
        else:  # pragma: no cover - the parser emits nothing else in a class
            raise GrammarError(f"unsupported class item {op}")
    return "[" + "".join(parts) + "]"


def _direct_ranges(items: list[Node]) -> tuple[tuple[int, int], ...] | None:
    """Ranges of a case-sensitive class made only of literals and ranges, else None."""
    negate, out = False, []
    for op, av in items:
        if op is _c.NEGATE:
            negate = True
        elif op is _c.LITERAL:
            out.append((av, av))
        elif op is _c.RANGE:
            out.append(av)
        else:
            return None
    norm = ir.normalize_ranges(out)
    return ir.without_surrogates(ir.complement_ranges(norm) if negate else norm)


def char_set(node: Node, flags: int) -> tuple[tuple[int, int], ...]:
    """Code points matched by a one-character node (LITERAL, NOT_LITERAL, ANY, IN)."""
    op, av = node
    if op is _c.ANY:
        everything = ((0, ir.MAX_CODE_POINT),) if flags & _S else ((0, 9), (11, ir.MAX_CODE_POINT))
        return ir.without_surrogates(everything)
    items = (
        [(_c.LITERAL, av)]
        if op is _c.LITERAL
        else [(_c.NEGATE, None), (_c.LITERAL, av)]
        if op is _c.NOT_LITERAL
        else av
    )
    direct = _direct_ranges(items)
    if direct is not None and not flags & _I:
        return direct
    atom = _flag_prefix(flags, _I | _A) + _class_text(items) + ")"
    return scan_class(atom) if direct is None else _ignoring_case(atom, direct)


@functools.lru_cache(maxsize=4096)
def _ignoring_case(atom: str, direct: Ranges) -> Ranges:
    """What the case-insensitive one-character ``atom`` matches, given ``direct``: what its class
    of literals and ranges matches with case respected.  Only a code point of
    :func:`_case_related` can be matched one way and not the other, so ``re`` is asked about
    those (~2,900 characters) instead of every scalar value (a Lark keyword's ``"select"i``
    asked it of 1.1 M code points per letter: 30-80 ms each, a second per grammar)."""
    text, points, related = _case_related()
    hits = [(points[m.start()], points[m.start()]) for m in re.finditer(atom, text)]
    return ir.normalize_ranges([*intersect(direct, ir.complement_ranges(related)), *hits])


@functools.lru_cache(maxsize=1)
def _case_related() -> tuple[str, list[int], Ranges]:
    """The scalar values whose case matters to ``re``: each one whose lowercase or uppercase
    (``str.lower``/``upper``, one character or more) is not itself, and every character of those
    mappings, with ``re``'s extra equivalences (the long s, the Kelvin sign): as a string, its
    code points in order, and as ranges.  Any other code point is its own simple lowercase and no
    other's, so ``re`` matches it under IGNORECASE exactly as without (a class compiled with it
    holds the lowercase of its members, and a character is looked up by its lowercase).  Made
    once a process from the scalar values in blocks (a block whose mapping keeps its length maps
    character to character: compared as UTF-32 arrays), ~30 ms."""
    import numpy as np

    text = scalar_values()
    found: set[int] = set()
    step = 4096
    for i in range(0, len(text), step):
        block = text[i : i + step]
        for mapped in (block.lower(), block.upper()):
            if mapped == block:
                continue
            if len(mapped) == len(block):
                a = np.frombuffer(block.encode("utf-32-le"), dtype="<u4")
                b = np.frombuffer(mapped.encode("utf-32-le"), dtype="<u4")
                at = np.nonzero(a != b)[0]
                found.update(a[at].tolist())
                found.update(b[at].tolist())
            else:  # a character maps to several (the German sharp s to SS): one by one
                for ch in block:
                    for m in (ch.lower(), ch.upper()):
                        if m != ch:
                            found.add(ord(ch))
                            found.update(map(ord, m))
    for lower, others in _extra_cases().items():
        found.add(lower)
        found.update(others)
    points = sorted(found)
    runs = ir.normalize_ranges([(c, c) for c in points])
    return "".join(map(chr, points)), points, runs


def _extra_cases() -> dict[int, tuple[int, ...]]:
    """``re``'s case equivalences beyond lowercasing (its compiler's table; empty where a Python
    keeps it elsewhere: every member has a case mapping of its own anyway, which the tests check)."""
    compiler = getattr(re, "_compiler", None)
    table = getattr(compiler, "_EXTRA_CASES", None)
    return dict(table) if isinstance(table, dict) else {}


# --------------------------------------------------------------------------- widths


def _min_len(nodes: list[Node]) -> int:
    return sum(_node_min(n) for n in nodes)


def _node_min(node: Node) -> int:
    op, av = node
    if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
        return 1
    if op is _c.BRANCH:
        return min(_min_len(list(b)) for b in av[1])
    if op is _c.SUBPATTERN:
        return _min_len(list(av[-1]))
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT):
        return int(av[0]) * _min_len(list(av[2]))
    return 0


def _can_consume(nodes: list[Node]) -> bool:
    for n in nodes:  # not any() of a generator: one stopped early raises GeneratorExit inside it
        if _node_consumes(n):
            return True
    return False


def _node_consumes(node: Node) -> bool:
    op, av = node
    if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
        return True
    if op is _c.BRANCH:
        return any(_can_consume(list(b)) for b in av[1])
    if op is _c.SUBPATTERN:
        return _can_consume(list(av[-1]))
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT):
        return av[1] > 0 and _can_consume(list(av[2]))
    return False


def _state(nodes: list[Node]) -> str:
    if _min_len(nodes) > 0:
        return SOME
    return MAYBE if _can_consume(nodes) else ZERO


def _join(a: str, b: str) -> str:
    if SOME in (a, b):
        return SOME
    return ZERO if a == b == ZERO else MAYBE


# --------------------------------------------------------------------------- translation


class _Translator:
    """Walks the parse tree; ``before``/``after`` say what surrounds a node in any match."""

    def __init__(
        self,
        pattern: str,
        global_flags: int,
        anchors: bool = True,
        terminal: bool = False,
        ecmascript: bool = False,
    ) -> None:
        self.pattern = pattern
        self.ecmascript = ecmascript
        self.anchors = anchors
        # Terminal mode: a trailing (?!C) becomes a marker whose index here holds C.
        self.follow: list[tuple[tuple[int, int], ...]] | None = [] if terminal else None
        self.verbose = bool(global_flags & re.VERBOSE)
        self.seen: dict[str, int] = {}
        self.states: dict[int, tuple[Node, str]] = {}

    def sequence(self, nodes: list[Node], flags: int, before: str, after: str) -> ir.Expr:
        states = [self.state(node) for node in nodes]
        afters = [after] * (len(nodes) + 1)
        for k in range(len(nodes) - 1, -1, -1):
            afters[k] = _join(states[k], afters[k + 1])
        out: list[ir.Expr] = []
        start = before
        for k, node in enumerate(nodes):
            if _is_boundary(node):
                j = k  # adjacent assertions test one position: \\b\\b is \\b, \\b\\B is nothing
                while j < len(nodes) and _is_boundary(nodes[j]):
                    j += 1
                kinds = {n[1] for n in nodes[k:j]}
                self.seen["boundary"] = self.seen.get("boundary", 0) + j - k - 1
                if len(kinds) > 1:
                    return ir.NOTHING
                rest = self.sequence(nodes[j:], flags, before, after)
                return self.boundary(node[1] is _c.AT_BOUNDARY, concat(out), rest, start, after, flags)
            if node[0] in (_c.ASSERT, _c.ASSERT_NOT) and node[1][0] == 1:
                out.append(self.lookahead(node, nodes[k + 1 :], flags, before, after))
                break
            if node[0] in (_c.ASSERT, _c.ASSERT_NOT):
                out = [self.lookbehind(node, concat(out), start, flags)]
                continue
            out.append(self.node(node, flags, before, afters[k + 1]))
            before = _join(before, states[k])
        return concat(out)

    def state(self, node: Node) -> str:
        """``_state([node])``, once a node: nested sequences ask it of the same nodes again."""
        known = self.states.get(id(node))
        if known is None:
            known = self.states[id(node)] = (node, _state([node]))  # the node kept: its id stays its own
        return known[1]

    def boundary(
        self, word_b: bool, prefix: ir.Expr, rest: ir.Expr, start: str, after: str, flags: int
    ) -> ir.Expr:
        """``\\b`` (``word_b``) or ``\\B`` between ``prefix`` (what this sequence matched before
        it) and ``rest`` (what it matches after), exactly: each side split by its character
        next to the assertion (a word character, another one, or none).  "None" is the edge
        of the text, so a side that may be empty must reach it: the start (end) of the
        sequence must be the start (end) of every match, else the assertion is refused."""
        kind = "boundary"
        self.seen[kind] = self.seen.get(kind, 0) + 1
        edges = self.follow is None and self.anchors
        if nullable(prefix) and not (edges and start == ZERO):
            raise self.error("word boundary that may look before the enclosing group is not supported", kind)
        if nullable(rest) and not (edges and after == ZERO):
            raise self.error("word boundary that may look past the enclosing group is not supported", kind)
        word = self.word_chars(flags)
        other = _others(word)
        p_word, p_other = restrict_last(prefix, word), restrict_last(prefix, other)
        r_word, r_other = restrict_first(rest, word), restrict_first(rest, other)
        p_edge = ir.EPSILON if nullable(prefix) else ir.NOTHING
        r_edge = ir.EPSILON if nullable(rest) else ir.NOTHING
        if word_b:
            pairs = [(p_word, r_other), (p_word, r_edge), (p_other, r_word), (p_edge, r_word)]
        else:
            pairs = [
                (p_word, r_word),
                (p_other, r_other),
                (p_other, r_edge),
                (p_edge, r_other),
                (p_edge, r_edge),
            ]
        return union([concat([a, b]) for a, b in pairs])

    def word_chars(self, flags: int) -> Ranges:
        if self.ecmascript:
            return ECMA_WORD
        return scan_class(_flag_prefix(flags, _A) + r"\w)")

    def lookbehind(self, node: Node, prefix: ir.Expr, start: str, flags: int) -> ir.Expr:
        """``(?<=C)`` / ``(?<!C)`` for a one-character ``C``: restricts the last character of
        ``prefix`` (what this sequence matched before it).  Where ``prefix`` may be empty, the
        sequence must start every match: nothing precedes, so ``(?<!C)`` holds there and
        ``(?<=C)`` does not."""
        op, (_direction, body) = node
        kind = "assert" if op is _c.ASSERT else "assert_not"
        self.seen[kind] = self.seen.get(kind, 0) + 1
        chars = self.one_char(list(body), flags, kind, "lookbehind")
        allowed = chars if op is _c.ASSERT else _others(chars)
        out = restrict_last(prefix, allowed)
        if nullable(prefix):
            if not (self.follow is None and self.anchors and start == ZERO):
                raise self.error("lookbehind that may look before the enclosing group is not supported", kind)
            if op is _c.ASSERT_NOT:
                out = union([out, ir.EPSILON])
        return out

    def one_char(self, body: list[Node], flags: int, kind: str, what: str) -> Ranges:
        if len(body) != 1 or body[0][0] not in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
            raise self.error(f"{what} of more than one character is not supported", kind)
        return char_set(body[0], flags)

    def lookahead(self, node: Node, rest: list[Node], flags: int, before: str, after: str) -> ir.Expr:
        """``(?=C)`` / ``(?!C)`` for a one-character ``C``, applied to the next character:
        the first character of ``rest`` when ``rest`` must consume one; when it may be
        empty and nothing follows the sequence, that character or the end of the text
        (or, for a terminal, a follow restriction)."""
        op, (_direction, body) = node
        kind = "assert" if op is _c.ASSERT else "assert_not"
        self.seen[kind] = self.seen.get(kind, 0) + 1
        chars = self.one_char(list(body), flags, kind, "lookahead")
        allowed = chars if op is _c.ASSERT else _others(chars)
        if _min_len(rest) > 0:
            return restrict_first(self.sequence(rest, flags, before, after), allowed)
        if rest and after == ZERO and self.follow is None and self.anchors:  # else the end of the text
            seq = self.sequence(rest, flags, before, after)
            out = restrict_first(seq, allowed)
            return union([out, ir.EPSILON]) if op is _c.ASSERT_NOT and nullable(seq) else out
        if rest or after != ZERO:
            raise self.error("lookahead that may be followed by nothing or by text is not supported", kind)
        if self.follow is None:  # fullmatch: the end of the text follows
            return ir.EPSILON if op is _c.ASSERT_NOT else ir.NOTHING
        if op is _c.ASSERT:
            raise self.error("positive lookahead at the end of a terminal is not supported", kind)
        self.follow.append(chars)
        return ir.Ref(f"{_MARKER}{len(self.follow) - 1}")

    def node(self, node: Node, flags: int, before: str, after: str) -> ir.Expr:
        op, av = node
        if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
            return self.single(node, flags)
        if op is _c.BRANCH:
            return ir.alt(*(self.sequence(list(b), flags, before, after) for b in av[1]))
        if op is _c.SUBPATTERN:
            _group, add, remove, body = av
            return self.sequence(list(body), _combine_flags(flags, add, remove), before, after)
        if op in (_c.MAX_REPEAT, _c.MIN_REPEAT):
            return self.repeat(av, flags, before, after)
        if op is _c.AT:
            return self.anchor(av, flags, before, after)
        if op in _REJECTED:
            what, kind = _REJECTED[op]
            self.seen[kind] = self.seen.get(kind, 0) + 1
            raise self.error(f"{what} is not supported", kind)
        raise self.error(f"unsupported regex construct {op}", "")

    def single(self, node: Node, flags: int) -> ir.Expr:
        op, av = node
        if op is _c.LITERAL and (not flags & _I or not _cased(av, flags)):
            return ir.literal(chr(av)) if not ir.SURROGATES[0] <= av <= ir.SURROGATES[1] else ir.NOTHING
        ranges = char_set(node, flags)
        if not ranges:
            return ir.NOTHING
        if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            return ir.literal(chr(ranges[0][0]))
        return ir.CharClass(ranges)

    def repeat(self, av: tuple[int, int, Any], flags: int, before: str, after: str) -> ir.Expr:
        lo, hi, body = int(av[0]), int(av[1]), list(av[2])
        if hi > 1 and _can_consume(body):  # other iterations may surround this one
            before, after = _join(before, MAYBE), _join(after, MAYBE)
        item = self.sequence(body, flags, before, after)
        upper = None if hi == _MAXREPEAT else hi
        if upper == 0:
            return ir.EPSILON
        if lo == 1 and upper == 1:
            return item
        return ir.Repeat(item, lo, upper)

    def anchor(self, at: Any, flags: int, before: str, after: str) -> ir.Expr:
        start = at in (_c.AT_BEGINNING, _c.AT_BEGINNING_STRING)
        kind = "start" if start else "end" if at in (_c.AT_END, _c.AT_END_STRING) else "boundary"
        self.seen[kind] = self.seen.get(kind, 0) + 1
        side = before if start else after
        if not self.anchors:
            raise self.error(
                r"anchors (^ $ \A \Z) are not supported in a pattern matched inside a text", kind
            )
        name = {_c.AT_BEGINNING: "^", _c.AT_BEGINNING_STRING: r"\A", _c.AT_END: "$"}.get(at, r"\Z")
        if self.ecmascript:
            name = "^" if start else "$"
        if side == ZERO:
            return ir.EPSILON
        if side == SOME and not (at is _c.AT_BEGINNING and flags & _M) and at is not _c.AT_END:
            return ir.NOTHING
        where = "before" if start else "after"
        raise self.error(f"anchor {name} with text {where} it is not supported", kind)

    def error(self, message: str, kind: str) -> GrammarError:
        offset = locate(self.pattern, kind, self.seen.get(kind, 0), self.verbose)
        return GrammarError.at(message, self.pattern, offset)


def _is_boundary(node: Node) -> bool:
    return node[0] is _c.AT and node[1] in (_c.AT_BOUNDARY, _c.AT_NON_BOUNDARY)


def _combine_flags(flags: int, add: int, remove: int) -> int:
    if add & _sre_parse.TYPE_FLAGS:
        flags &= ~_sre_parse.TYPE_FLAGS
    return (flags | add) & ~remove


def _cased(cp: int, flags: int) -> bool:
    """Whether ``re`` treats literal ``cp`` case-insensitively (the compiler's own test)."""
    test = getattr(_sre, "ascii_iscased" if flags & _A else "unicode_iscased", None)
    return True if test is None else bool(test(cp))


# --------------------------------------------------------------------------- error positions

_KIND_PATTERNS = {
    "backreference": re.compile(r"\\[1-9]|\(\?P=|\\k<"),
    "conditional": re.compile(r"\(\?\("),
    "assert": re.compile(r"\(\?<?="),
    "assert_not": re.compile(r"\(\?<?!"),
    "atomic": re.compile(r"\(\?>"),
    "possessive": re.compile(r"[*+?}]\+"),
    "start": re.compile(r"\^|\\A"),
    "end": re.compile(r"\$|\\Z"),
    "boundary": re.compile(r"\\[bB]"),
}


def locate(pattern: str, kind: str, occurrence: int, verbose: bool = False) -> int:
    """Offset of the ``occurrence``-th (1-based) ``kind`` construct outside classes and escapes."""
    rx = _KIND_PATTERNS.get(kind)
    if rx is None:
        return 0
    hits = [i for i in _outside_classes(pattern, verbose) if rx.match(pattern, i)]
    if not hits:
        return 0
    return hits[min(max(occurrence, 1), len(hits)) - 1]


def _outside_classes(pattern: str, verbose: bool) -> list[int]:
    """Offsets where a token starts outside ``[...]`` and comments (escapes start tokens)."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "[":
            i = _skip_class(pattern, i)
            continue
        if verbose and ch == "#":
            j = pattern.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        out.append(i)
        i += 2 if ch == "\\" else 1
    return out


def _skip_class(pattern: str, i: int) -> int:
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1

"""Hypothesis strategies for differential tests: grammars, vocabularies, prefixes, regexes.

``grammars()`` draws small IR grammars that exercise what engines get wrong:
characters that straddle UTF-8 length boundaries, byte classes that split a
character, nested and nullable repetition, left and mutual recursion, rules
that derive nothing.  ``vocabularies()`` draws token lists with split UTF-8
sequences, invalid UTF-8, duplicates and special tokens.  ``token_walks()``
walks the reference mask, so the prefixes it returns are viable.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from hypothesis import strategies as st

from cfgmask import ir

from .reference import ReferenceMatcher

# --------------------------------------------------------------------------- alphabets


@dataclass(frozen=True)
class Alphabet:
    """What the leaves of a drawn grammar are made of."""

    units: tuple[str, ...]  # literal text pieces
    char_ranges: tuple[tuple[int, int], ...]  # code-point ranges for CharClass
    byte_ranges: tuple[tuple[int, int], ...]  # byte ranges for ByteClass


WIDE = Alphabet(
    units=("a", "b", "x", "é", "€", "😀", "ab"),
    char_ranges=(
        (0x61, 0x62),  # a-b
        (0x70, 0xA0),  # crosses the 1/2-byte boundary at U+0080
        (0x7F0, 0x810),  # crosses 2/3 bytes at U+0800
        (0xD7F0, 0xE010),  # straddles the surrogates
        (0xFFF0, 0x10010),  # crosses 3/4 bytes at U+10000
        (0x10FFF0, 0x10FFFF),  # the top
        (0xE9, 0xE9),  # é
        (0x1F600, 0x1F600),  # 😀
    ),
    byte_ranges=(
        (0x61, 0x62),
        (0x78, 0x78),
        (0x80, 0xBF),
        (0xC3, 0xC3),
        (0xA9, 0xA9),
        (0xF0, 0xF4),
        (0, 0xFF),
    ),
)

SMALL = Alphabet(
    units=("a", "b", "é"),
    char_ranges=((0x61, 0x61), (0x62, 0x62), (0x61, 0x62), (0xE9, 0xE9)),
    byte_ranges=((0x61, 0x61), (0x61, 0x62), (0xC3, 0xC3), (0xA9, 0xA9)),
)

SMALL_BYTES = (b"a", b"b", b"\xc3", b"\xa9")  # every byte a SMALL grammar can use


# --------------------------------------------------------------------------- grammars


def _leaf(names: Sequence[str], alphabet: Alphabet) -> st.SearchStrategy[ir.Expr]:
    text = st.lists(st.sampled_from(alphabet.units), min_size=1, max_size=3).map(
        lambda us: ir.literal("".join(us))
    )
    ranges = st.lists(st.sampled_from(alphabet.char_ranges), min_size=1, max_size=2)
    byte_ranges = st.lists(st.sampled_from(alphabet.byte_ranges), min_size=1, max_size=2)
    return st.one_of(  # listed twice: drawn twice as often
        text,
        text,
        ranges.map(lambda rs: ir.CharClass(tuple(rs))),
        byte_ranges.map(lambda rs: ir.ByteClass(tuple(rs))),
        st.sampled_from(names).map(ir.Ref),
        st.sampled_from((ir.EPSILON, ir.EPSILON, ir.EPSILON, ir.NOTHING)),
    )


def _repeat(item: st.SearchStrategy[ir.Expr]) -> st.SearchStrategy[ir.Expr]:
    def build(e: ir.Expr, lo: int, extra: int | None) -> ir.Expr:
        return ir.Repeat(e, lo, None if extra is None else lo + extra)

    return st.builds(build, item, st.integers(0, 2), st.none() | st.integers(0, 3))


def _big_repeat(leaf: st.SearchStrategy[ir.Expr]) -> st.SearchStrategy[ir.Expr]:
    """Bounds an engine must not unroll (of a leaf only: the reference does unroll them)."""
    return st.builds(ir.Repeat, leaf, st.sampled_from((0, 1, 7)), st.sampled_from((20, 50)))


def exprs(
    names: Sequence[str], alphabet: Alphabet = WIDE, max_leaves: int = 8, big_repeats: bool = True
) -> st.SearchStrategy[ir.Expr]:
    """Expression trees over ``alphabet`` that may refer to ``names``."""
    leaf = _leaf(names, alphabet)

    def extend(children: st.SearchStrategy[ir.Expr]) -> st.SearchStrategy[ir.Expr]:
        parts = st.lists(children, min_size=1, max_size=3).map(tuple)
        big = [_big_repeat(leaf)] if big_repeats else []
        return st.one_of(parts.map(ir.Seq), parts.map(ir.Alt), _repeat(children), *big)

    return st.recursive(leaf, extend, max_leaves=max_leaves)


@st.composite
def _recursive_rule(draw: st.DrawFn, name: str, body: st.SearchStrategy[ir.Expr]) -> ir.Expr:
    """A rule shaped to recurse: left (``a ::= a x | y``), right, or both ends."""
    x, y = draw(body), draw(body)
    shape = draw(st.sampled_from(("left", "left", "right", "middle", "self-only")))
    me = ir.Ref(name)
    if shape == "left":
        return ir.Alt((ir.Seq((me, x)), y))
    if shape == "right":
        return ir.Alt((ir.Seq((x, me)), y))
    if shape == "middle":
        return ir.Alt((ir.Seq((x, me, y)), ir.EPSILON))
    return ir.Seq((me, x))  # unproductive on its own


@st.composite
def grammars(
    draw: st.DrawFn, alphabet: Alphabet = WIDE, max_rules: int = 5, big_repeats: bool = True
) -> ir.Grammar:
    """Small grammars (1-``max_rules`` rules, start ``r0``), with recursion of every kind.

    Rule ``ri`` mostly refers to later rules (so most grammars are productive); a
    quarter of the rules are shaped to recurse, and any rule may refer back now and then.
    ``big_repeats`` adds bounds like ``{7,50}`` (of a leaf, possibly a rule reference).
    """
    n = draw(st.integers(1, max_rules))
    names = [f"r{i}" for i in range(n)]
    rules: dict[str, ir.Expr] = {}
    for i, name in enumerate(names):
        body = exprs(names[i + 1 :] * 3 + names, alphabet, max_leaves=6, big_repeats=big_repeats)
        if draw(st.integers(0, 3)) == 0:
            rules[name] = draw(_recursive_rule(name, body))
        else:
            rules[name] = draw(body)
    return ir.Grammar(rules, "r0")


@st.composite
def ebnf_macro_grammars(draw: st.DrawFn) -> ir.Grammar:
    """Grammars around XGrammar's EBNF macros as the EBNF front end lowers them
    (:mod:`cfgmask.frontends.ebnf_macros`, ``ebnf_lazy``): ``TagDispatch`` (tags that overlap and nest,
    excluded strings, with or without the loop), ``Substring``, ``Regex(json_string=true)`` and
    lazy rules,
    between drawn expressions and under drawn rules."""
    from cfgmask.frontends import ebnf_macros

    units = st.sampled_from(("a", "b", "é", "<", ">"))
    word = st.lists(units, min_size=1, max_size=3).map("".join)
    body = exprs(["r1"], SMALL, max_leaves=4, big_repeats=False)
    rules: dict[str, ir.Expr] = {"r1": draw(exprs(["r1"], SMALL, max_leaves=4, big_repeats=False))}
    kind = draw(st.sampled_from(("tags", "tags", "substring", "json", "lazy")))
    if kind == "tags":
        tags = draw(st.lists(word, min_size=0, max_size=3, unique=True))
        excludes = [x for x in draw(st.lists(word, max_size=2)) if not any(t.startswith(x) for t in tags)]
        pairs = [(t, draw(st.sampled_from((ir.Ref("r1"), ir.literal("a"), ir.EPSILON)))) for t in tags]
        macro, helpers = ebnf_macros.tag_dispatch(pairs, "td", loop=draw(st.booleans()), excludes=excludes)
    elif kind == "substring":
        macro, helpers = ebnf_macros.substring(draw(st.lists(word | st.just(""), max_size=4)), "sub")
    elif kind == "json":
        macro, helpers = ebnf_macros.json_string_only(draw(body)), {}
    else:
        from cfgmask.frontends.ebnf_lazy import NotTerminalLike, shortest_matches

        try:
            macro, helpers = shortest_matches(draw(body), {"r1": ir.literal("a")}, "lazy")
        except NotTerminalLike:  # a byte class or a reference to the (maybe recursive) r1
            macro, helpers = ir.literal("a"), {}
    rules.update(helpers)
    rules["r0"] = ir.seq(draw(body), macro, draw(body))
    return ir.Grammar(rules, "r0")


# --------------------------------------------------------------------------- vocabularies


@dataclass
class Vocab:
    """Token texts by id (``None``: no text) and the ids with a role."""

    tokens: list[bytes | None]
    stop_ids: tuple[int, ...]
    special_ids: tuple[int, ...] = field(default=())


_AWKWARD_TOKENS = (
    b"\xc3",  # lead byte of é alone
    b"\xa9",  # its continuation alone
    b"\xa9a",
    b"\xe2\x82",  # two thirds of €
    b"\xac",  # the last third
    b"\xf0\x9f",  # half of 😀
    b"\x98\x80",  # the other half
    b"\xc0\x80",  # overlong NUL
    b"\xed\xa0\x80",  # a surrogate
    b"\xf4\x90\x80\x80",  # above U+10FFFF
    b"\xff",
    "é€😀".encode(),
)


def _pieces(alphabet_hint: Sequence[bytes]) -> st.SearchStrategy[bytes]:
    """Token texts made from the hint: whole units, slices of them, and joins."""
    hint = [h for h in alphabet_hint if h] or [b"a"]
    whole = st.sampled_from(hint)
    sliced = st.builds(
        lambda h, i, j: h[min(i, j) : max(i, j)] or h, whole, st.integers(0, 4), st.integers(1, 8)
    )
    joined = st.lists(whole, min_size=2, max_size=3).map(b"".join)
    return st.one_of(
        whole, sliced, joined, st.sampled_from(_AWKWARD_TOKENS), st.binary(min_size=1, max_size=3)
    )


@st.composite
def vocabularies(draw: st.DrawFn, alphabet_hint: Sequence[bytes] = (b"a", b"b", "é".encode())) -> Vocab:
    """10-60 tokens, some duplicated, 1-2 stop ids (text or none), 0-3 special ids.

    Up to 8 hint pieces and 8 of their bytes are always in the vocabulary, so walks can move.
    """
    singles = sorted({h[i : i + 1] for h in alphabet_hint for i in range(len(h))})
    texts: list[bytes | None] = [*alphabet_hint[:8], *singles[:8]]
    texts += draw(
        st.lists(_pieces(alphabet_hint), min_size=max(0, 10 - len(texts)), max_size=60 - len(texts))
    )
    texts = draw(st.permutations(texts))
    n = len(texts)
    for i in draw(st.lists(st.integers(0, n - 1), max_size=3)):  # duplicates
        texts[draw(st.integers(0, n - 1))] = texts[i]
    roles = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=5, unique=True))
    n_stop = draw(st.integers(1, min(2, len(roles))))
    stop_ids, special_ids = tuple(roles[:n_stop]), tuple(roles[n_stop:])
    for t in roles:  # a role token has no text, empty text, a marker, or text the grammar uses
        texts[t] = draw(st.sampled_from((None, b"", b"</s>", *alphabet_hint[:3])))
    return Vocab(texts, stop_ids, special_ids)


def grammar_alphabet(grammar: ir.Grammar) -> list[bytes]:
    """Byte strings a grammar is built from: its literals and a few members of each class."""
    out: set[bytes] = set()
    stack = list(grammar.rules.values())
    while stack:
        e = stack.pop()
        if isinstance(e, ir.Literal):
            out.add(e.data)
        elif isinstance(e, ir.CharClass):
            out.update(_class_samples(e.ranges))
        elif isinstance(e, ir.ByteClass):
            out.update(bytes((b,)) for lo, hi in e.ranges for b in {lo, hi} if 0 <= b <= 255)
        elif isinstance(e, (ir.Seq, ir.Alt)):
            stack.extend(e.items)
        elif isinstance(e, ir.Repeat):
            stack.append(e.item)
    return sorted(out)


def _class_samples(ranges: Sequence[tuple[int, int]]) -> list[bytes]:
    points = {c for lo, hi in ranges for c in (lo, hi, (lo + hi) // 2)}
    return [chr(c).encode() for c in points if c <= ir.MAX_CODE_POINT and not 0xD800 <= c <= 0xDFFF]


# --------------------------------------------------------------------------- prefixes


@dataclass
class Walk:
    """A token sequence the reference mask allowed step by step, and its bytes."""

    token_ids: list[int]
    prefix: bytes


@st.composite
def token_walks(draw: st.DrawFn, matcher: ReferenceMatcher, vocab: Vocab, max_steps: int = 6) -> Walk:
    """Walk random allowed tokens (never a stop token), so every prefix on the way is viable."""
    walk = Walk([], b"")
    for _ in range(max_steps - draw(st.integers(0, max_steps - 1))):  # hypothesis favours 0: long walks
        allowed = matcher.mask(walk.prefix, vocab.tokens, vocab.stop_ids, vocab.special_ids)
        choices = [t for t, ok in enumerate(allowed) if ok and t not in vocab.stop_ids]
        if not choices:
            break
        t = draw(st.sampled_from(choices))
        text = vocab.tokens[t]
        assert text is not None
        walk.token_ids.append(t)
        walk.prefix += text
    return walk


# --------------------------------------------------------------------------- regexes

REGEX_UNITS = ("a", "b", "é", "€", "😀")
REGEX_CLASSES: tuple[tuple[str, tuple[tuple[int, int], ...], bool], ...] = (
    ("[ab]", ((0x61, 0x62),), False),
    ("[a-é]", ((0x61, 0xE9),), False),
    ("[é-😀]", ((0xE9, 0x1F600),), False),
    ("[^a]", ((0x61, 0x61),), True),
    ("[^é€]", ((0xE9, 0xE9), (0x20AC, 0x20AC)), True),
)


@dataclass(frozen=True)
class Regex:
    """A Python regex and the IR expression that should match the same strings."""

    pattern: str
    expr: ir.Expr

    def grammar(self) -> ir.Grammar:
        return ir.Grammar({"root": self.expr}, "root")


def _regex_leaf() -> st.SearchStrategy[Regex]:
    unit = st.sampled_from(REGEX_UNITS).map(lambda u: Regex(re.escape(u), ir.literal(u)))
    cls = st.sampled_from(REGEX_CLASSES).map(lambda c: Regex(c[0], ir.char_class(c[1], negate=c[2])))
    return unit | cls


def _regex_extend(children: st.SearchStrategy[Regex]) -> st.SearchStrategy[Regex]:
    def cat(rs: list[Regex]) -> Regex:
        return Regex("".join(f"(?:{r.pattern})" for r in rs), ir.Seq(tuple(r.expr for r in rs)))

    def union(rs: list[Regex]) -> Regex:
        return Regex("|".join(f"(?:{r.pattern})" for r in rs), ir.Alt(tuple(r.expr for r in rs)))

    def quantify(r: Regex, lo: int, extra: int | None) -> Regex:
        hi = None if extra is None else lo + extra
        q = f"{{{lo},{'' if hi is None else hi}}}"
        return Regex(f"(?:{r.pattern}){q}", ir.Repeat(r.expr, lo, hi))

    parts = st.lists(children, min_size=1, max_size=3)
    return st.one_of(
        parts.map(cat),
        parts.map(union),
        st.builds(quantify, children, st.integers(0, 2), st.none() | st.integers(0, 2)),
    )


def regexes() -> st.SearchStrategy[Regex]:
    """Small regexes with literal, class, concatenation, union and ``{m,n}`` nodes."""
    return st.recursive(_regex_leaf(), _regex_extend, max_leaves=6)

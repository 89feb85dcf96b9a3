"""The JSON Schema front end's tail cuts (session 37, helper ``fetail``), each against what it
replaced: ``fresh``'s hint against a scan from the first suffix, ``not_in`` against its former
construction (same expression, same rules, same order), ``chardfa._union`` against
``ir.normalize_ranges``, a trimmed automaton's ``is_empty`` against its live states, and the
encoder's remembered leaves and references against the generic ``encode``."""

from __future__ import annotations

import re
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from cfgmask import ir
from cfgmask.frontends.json_schema import _ir_util as U
from cfgmask.frontends.json_schema import chardfa, lexical, strings
from cfgmask.frontends.json_schema.lexical import ALL_CHARS, encode_class

# ---- fresh ---------------------------------------------------------------------------------

_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def scan_fresh(rules: dict[str, ir.Expr], base: str) -> str:
    """``fresh`` before its hint: every suffix tried from the first."""
    plain = base.isascii() and base.replace("-", "").replace("_", "").isalnum()
    stem = (base if plain else _NOT_NAME.sub("-", base)).strip("-")[:60] or "r"
    name, n = stem, 1
    while name in rules:
        n += 1
        name = f"{stem}-{n}"
    rules[name] = ir.NOTHING
    return name


BASES = st.sampled_from(["obj-0", "obj-0-2", "prop-a", "prop a", "-x-", "key-not-in", "x" * 70, ""])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("fresh"), st.integers(0, 2), BASES),
        st.tuples(st.just("set"), st.integers(0, 2), st.sampled_from(["obj-0-3", "obj-0", "prop-a-2", "r"])),
        st.tuples(st.just("release"), st.just(0), st.just("")),
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(ops=OPS)
def test_fresh_names_what_a_scan_names(ops: list[tuple[str, int, str]]) -> None:
    """Interleaved dicts (the hint follows one at a time), names set without ``fresh`` (the hint
    may only skip names that are taken) and releases: the same names as a scan."""
    mine: list[dict[str, ir.Expr]] = [{}, {}, {}]
    ref: list[dict[str, ir.Expr]] = [{}, {}, {}]
    for op, i, arg in ops:
        if op == "fresh":
            assert U.fresh(mine[i], arg) == scan_fresh(ref[i], arg)
        elif op == "set":
            mine[i][arg] = ref[i][arg] = ir.EPSILON
        else:
            U.release()
        assert list(mine[i]) == list(ref[i])
    U.release()


# ---- not_in ----------------------------------------------------------------------------------


def former_not_in(names: list[str], rules: dict[str, ir.Expr] | None, canonical: bool) -> ir.Expr:
    """``strings.not_in`` as it was before its per-call tables (session 36)."""
    trie: dict[str, Any] = {}
    for n in names:
        node = trie
        for ch in n:
            node = node.setdefault(ch, {})
        node[""] = {}
    anything = ir.Repeat(encode_class(ALL_CHARS, canonical), 0, None)
    sizes: dict[int, int] = {}

    def size(node: dict[str, Any]) -> int:
        n = sizes.get(id(node))
        if n is None:
            n = sizes[id(node)] = 1 + sum(size(v) for k, v in node.items() if k)
        return n

    leaf = ir.seq(encode_class(ALL_CHARS, canonical), anything)

    def build(node: dict[str, Any], top: bool) -> ir.Expr:
        if len(node) == 1 and "" in node:
            return leaf
        if rules is not None and not top and size(node) >= strings.NOT_IN_RULE_SIZE:
            name = scan_fresh(rules, "key-not-in")
            rules[name] = build(node, True)
            return ir.Ref(name)
        alts: list[ir.Expr] = [] if "" in node else [ir.EPSILON]
        chars = sorted(ord(k) for k in node if k)
        taken: list[tuple[int, int]] = []
        for cp in chars:
            alts.append(ir.seq(encode_class(((cp, cp),), canonical), build(node[chr(cp)], False)))
            if taken and taken[-1][1] + 1 == cp:
                taken[-1] = (taken[-1][0], cp)
            else:
                taken.append((cp, cp))
        others = ir.complement_ranges(tuple(taken))
        if others:
            alts.append(ir.seq(encode_class(others, canonical), anything))
        return ir.alt(*alts)

    return build(trie, True)


@settings(max_examples=60, deadline=None)
@given(
    names=st.lists(st.text("abcé_", max_size=7), max_size=14),
    canonical=st.booleans(),
    rule_size=st.sampled_from([None, 1, 2, 4, 9, 24]),
)
def test_not_in_builds_what_it_built(names: list[str], canonical: bool, rule_size: int | None) -> None:
    """The same expression and the same rules in the same order (the cut decisions: a subtree
    below the size is never cut, nor anything in it)."""
    mine: dict[str, ir.Expr] = {"key-not-in": ir.EPSILON}  # a taken name: the suffixes move on
    ref: dict[str, ir.Expr] = dict(mine)
    with mock.patch.object(strings, "NOT_IN_RULE_SIZE", rule_size or 24):
        got = strings.not_in(names, mine if rule_size else None, canonical)
        want = former_not_in(names, ref if rule_size else None, canonical)
    assert repr(got) == repr(want)
    assert [(k, repr(v)) for k, v in mine.items()] == [(k, repr(v)) for k, v in ref.items()]
    U.release()


# ---- chardfa ---------------------------------------------------------------------------------


@st.composite
def partitions(draw: Any) -> tuple[list[chardfa.Ranges], list[int]]:
    """Atoms that partition the code points (each a union of pieces between cut points), and a
    group of them."""
    cuts = sorted(set(draw(st.lists(st.integers(1, chardfa.TOP), max_size=12))))
    bounds = [0, *cuts, chardfa.TOP + 1]
    k = draw(st.integers(1, 6))
    owner = [draw(st.integers(0, k - 1)) for _ in range(len(bounds) - 1)]
    atoms = [
        ir.normalize_ranges([(bounds[j], bounds[j + 1] - 1) for j in range(len(owner)) if owner[j] == a])
        for a in range(k)
    ]
    atoms = [a for a in atoms if a]
    group = draw(st.lists(st.integers(0, len(atoms) - 1), min_size=1, unique=True))
    return atoms, group


@settings(max_examples=80, deadline=None)
@given(pg=partitions())
def test_union_of_pieces_is_normalize_ranges(pg: tuple[list[chardfa.Ranges], list[int]]) -> None:
    atoms, group = pg
    want = ir.normalize_ranges([r for a in group for r in atoms[a]])
    assert chardfa._union(chardfa._pieces(atoms), set(group)) == want


PATTERNS = ["^(ab|ac)$", "^a+b?$", "x", "^[a-c]{2,4}$", "^(mbox|account)$", "é|b", "^$"]


@settings(max_examples=40, deadline=None)
@given(ps=st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=3), pick=st.integers(0, 7))
def test_trimmed_is_empty_is_the_live_start(ps: list[str], pick: int) -> None:
    """``is_empty`` of a minimal automaton (read off its start) against its live states."""
    raw, flags = chardfa.regions([strings.pattern_dfa(p) for p in ps])
    regions = sorted(set(flags))
    d = raw.where([f == regions[pick % len(regions)] for f in flags])
    assert d.minimal
    assert d.is_empty() == (not d.live()[0])
    e = chardfa.product([d, chardfa.words(["ab", "b"])], lambda f: f[0] and f[1])
    assert e.is_empty() == (not e.live()[0])


# ---- the encoder -----------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    p=st.sampled_from(["^[a-z0-9-]+:([0-9]+)?$", "^(ab|ac)c*$", "^[a-fA-F0-9]{4}-[a-f]{2}$", "é+"]),
    hi=st.sampled_from([None, 3, 7, 12]),
    share=st.booleans(),
    canonical=st.booleans(),
)
def test_encode_all_is_encode(p: str, hi: int | None, share: bool, canonical: bool) -> None:
    """An automaton's states (classes repeated, rules referred to many times) through
    ``encode_all``'s loop, which remembers leaves and references, against the generic ``encode``:
    the same rules (names and bodies) and the same expression."""
    parts = [strings.pattern_dfa(p)] + ([chardfa.length(0, hi)] if hi is not None else [])
    local: dict[str, ir.Expr] = {}
    e = chardfa.intersection(parts).to_expr(local, "str")
    a: dict[str, ir.Expr] = {}
    b: dict[str, ir.Expr] = {}
    got = lexical.Encoder(a, "str", share_classes=share, canonical=canonical).encode_all(e, local)
    want = lexical.Encoder(b, "str", share_classes=share, canonical=canonical).encode(e, local)
    assert repr(got) == repr(want)
    assert {k: repr(v) for k, v in a.items()} == {k: repr(v) for k, v in b.items()}
    U.release()

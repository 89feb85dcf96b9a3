"""Counted repetitions of one unit share their counting rules (cfgmask/compile/repeats.py).

``x{lo,hi}`` past the unroll budget is cut into blocks ``B = x^b`` counted by rules
``P_j = B^(2^j)``.  With ``RepeatRewriter.share_counts`` every count of the same unit (by content)
uses one family of those rules, grown to the largest power any count needs, instead of a family
per repetition: a schema's strings with different ``maxLength`` share the block's states and
cache entries.  Here several counts of one
unit (and of a second unit) with random bounds sit in one grammar; every mask along random walks
must equal the pure-Python reference's (which unrolls) and the unshared compile's, and the
rewriter must really have made one family a unit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import ir
from cfgmask.compile.repeats import RepeatRewriter

from .helpers import alt, chars, grammar, lit, ref, rep, seq, walk_agrees
from .reference import ReferenceMatcher
from .strategies import Vocab, token_walks, vocabularies
from .test_engine_differential import _vocab
from .test_repeats import _same_masks_along

UNIT = alt(chars("ac"), lit("\\n"), chars("\u00e9"))  # weighs 7 (repeats.size_estimate)
OTHER = chars("bc")  # weighs 2: another family
PIECES = (b"a", b"b", b"c", b"ab", b"abca", b"aaaaaaa", b"\\n", b"\\", "\u00e9".encode(), b'"', b'a"', b'",')


@contextmanager
def apart() -> Iterator[None]:
    """Compiles with a family of counting rules per repetition (the rewriter before sharing),
    the caches cleared around them."""
    cfgmask.clear_caches()
    RepeatRewriter.share_counts = False
    try:
        yield
    finally:
        RepeatRewriter.share_counts = True
        cfgmask.clear_caches()


def _families(rules: dict[str, ir.Expr], budget: int) -> set[str]:
    """The rules P_0 (one a family) the rewriter makes for ``rules``."""
    out = RepeatRewriter(rules, cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0)).run()
    return {n for n in out if "#rep" in n and n.endswith(".p0")}


@st.composite
def counts(draw: st.DrawFn) -> tuple[ir.Grammar, int, int]:
    """A list of strings "..." each a count of UNIT or OTHER with its own bounds; some of them
    in rules of their own (called from several places), some inline.  Returns the grammar,
    the unroll budget and how many distinct units are counted past it."""
    budget = draw(st.sampled_from((2, 3, 8, 16)))
    n = draw(st.integers(2, 4))
    strings: list[ir.Expr] = []
    rules: dict[str, ir.Expr] = {}
    units = set()
    for i in range(n):
        unit = draw(st.sampled_from((UNIT, UNIT, OTHER)))
        lo = draw(st.sampled_from((0, 0, 1, 2)))
        hi = lo + draw(st.integers(3, 30))
        body = seq(lit('"'), rep(unit, lo, hi), lit('"'))
        if draw(st.booleans()):
            rules[f"s{i}"] = body
            body = ref(f"s{i}")
        strings.append(body)
        units.add(id(unit))
    root = seq(alt(*strings) if len(strings) > 1 else strings[0], rep(seq(lit(","), ref("root")), 0, 1))
    return grammar(root=root, **rules), budget, len(units)


def _compile(g: ir.Grammar, vocab: cfgmask.Vocabulary, budget: int) -> cfgmask.CompiledGrammar:
    return cfgmask.compile(g, vocab, limits=cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0))


@settings(max_examples=60, deadline=None)
@given(counts(), vocabularies(PIECES), st.data())
def test_shared_counts_masks_equal_reference(
    case: tuple[ir.Grammar, int, int], v: Vocab, data: st.DataObject
) -> None:
    g, budget, _ = case
    ref_m = ReferenceMatcher(g)
    vocab = _vocab(v)
    cfgmask.clear_caches()
    shared = _compile(g, vocab, budget)
    with apart():
        unshared = _compile(g, vocab, budget)
    walk = data.draw(token_walks(ref_m, v, max_steps=16))
    walk_agrees(
        ref_m,
        v.tokens,
        v.stop_ids,
        v.special_ids,
        walk.token_ids,
        shared=cfgmask.Matcher(shared),
        apart=cfgmask.Matcher(unshared),
    )


@given(counts())
def test_one_family_a_unit(case: tuple[ir.Grammar, int, int]) -> None:
    """The rewriter makes one family of counting rules per distinct unit counted in blocks (and
    one per count with sharing off): the shared path ran, not only the old one."""
    g, budget, _ = case
    blocked = [r for r in _repeats(g) if _blocked(r, budget)]
    assert len(_families(dict(g.rules), budget)) == len({r.item for r in blocked})
    with apart():
        assert len(_families(dict(g.rules), budget)) == len(blocked)


def _repeats(g: ir.Grammar) -> list[ir.Repeat]:
    out: list[ir.Repeat] = []

    def walk(e: ir.Expr) -> None:
        if isinstance(e, ir.Repeat):
            out.append(e)
        for x in getattr(e, "items", ()):
            walk(x)
        if isinstance(e, ir.Repeat):
            walk(e.item)

    for body in g.rules.values():
        walk(body)
    return out


def _blocked(r: ir.Repeat, budget: int) -> bool:
    """Is ``r`` cut into blocks (its unrolled size past the budget: RepeatRewriter.expr)?"""
    from cfgmask.compile.repeats import size_estimate

    bound = max(r.lo, r.hi or 0, 1)
    return bound > 1 and size_estimate(r.item) * bound > budget


def test_json_strings_share_blocks_with_llama3() -> None:
    """A schema's strings of several ``maxLength`` past the whole-chain budget: fewer states
    shared than apart, and the same masks along a document that fills every string."""
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    vocab = cfgmask.Vocabulary.llama3()
    bounds = (1024, 2000, 4096, 300)
    schema = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "maxLength": n} for i, n in enumerate(bounds)},
        "required": [f"p{i}" for i in range(len(bounds))],
        "additionalProperties": False,
    }
    g = cfgmask.Grammar.from_json_schema(json.dumps(schema))
    cfgmask.clear_caches()
    shared = cfgmask.compile(g, vocab)
    with apart():
        unshared = cfgmask.compile(g, vocab)
    assert shared.tables.n_states < unshared.tables.n_states
    # one block rule serves the four strings
    names = [n for n in shared.tables.rule_names if "#rep" in n]
    assert sum(n.endswith(".p0") for n in names) == 1, names
    assert sum(n.endswith(".p0") for n in unshared.tables.rule_names) == len(bounds)
    # strings across block ends (a block of a JSON string's character is well under 300)
    doc = {f"p{i}": ("ab\\u00e9 " * (n // 5))[: n - 2] for i, n in enumerate(bounds)}
    text = json.dumps(doc, separators=(",", ":"))
    _same_masks_along(shared, unshared, enc.encode_ordinary(text))

"""Counted repetitions cut into blocks: masks against the reference, with and without wraps.

``x{lo,hi}`` past the unroll budget becomes blocks ``B = x^b`` counted by helper rules
(cfgmask/compile/repeats.py).  A token that crosses the end of a block depends on the count; the entry of a
block state keeps those that go on inside the next block (``wrap_bits``) and a mask takes them
whole where the real chart lets the block start again (``Strategy.wrap_repeats``;
csrc/wrap.c).  Here tiny unroll budgets force blocks of a
few units on random bounds and vocabularies, and every mask along random walks must equal the
pure-Python reference's (which unrolls), with the wraps forced on every entry and with them off.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import ir
from cfgmask.compile.strategy import Strategy

from .helpers import alt, chars, grammar, lit, ref, rep, seq
from .reference import ReferenceMatcher
from .strategies import Vocab, token_walks, vocabularies
from .test_engine_differential import _mask_bools, _vocab

ROOT = Path(__file__).resolve().parent.parent

# x: a letter, or an escape of two bytes, or a two-byte character
UNIT = alt(chars("ac"), lit("\\n"), chars("\u00e9"))
PIECES = (b"a", b"b", b"c", b"ab", b"abca", b"aaaaaaa", b"\\n", b"\\", "\u00e9".encode(), b'"', b'a"', b'"a')


@st.composite
def bounded(draw: st.DrawFn) -> tuple[ir.Grammar, int]:
    lo = draw(st.sampled_from((0, 0, 1, 5)))
    hi = lo + draw(st.integers(4, 40))
    budget = draw(st.sampled_from((2, 3, 4, 8)))
    tail = draw(st.sampled_from(("quote", "list")))
    body = rep(UNIT, lo, hi)
    if tail == "quote":  # a JSON string's shape
        return grammar(root=seq(lit('"'), body, lit('"'))), budget
    # several bounded strings in a row: the blocks' rule is shared
    return grammar(root=seq(lit('"'), body, lit('"'), rep(seq(lit(","), ref("root")), 0, 1))), budget


def _compile(g: ir.Grammar, vocab: cfgmask.Vocabulary, budget: int, wrap: int) -> cfgmask.CompiledGrammar:
    limits = cfgmask.CompileLimits(unroll_budget=budget)
    no_memo = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63}
    return cfgmask.compile(g, vocab, limits=limits, _strategy=Strategy(wrap_repeats=wrap, **no_memo))


@given(bounded(), vocabularies(PIECES), st.data())
def test_blocks_masks_equal_reference(case: tuple[ir.Grammar, int], v: Vocab, data: st.DataObject) -> None:
    g, budget = case
    ref_m = ReferenceMatcher(g)
    vocab = _vocab(v)
    wrapped = _compile(g, vocab, budget, wrap=1)  # every block entry with an uncertain token wraps
    plain = _compile(g, vocab, budget, wrap=0)
    walk = data.draw(token_walks(ref_m, v, max_steps=14))
    m, p = cfgmask.Matcher(wrapped), cfgmask.Matcher(plain)
    prefix = b""
    for t in [*walk.token_ids, None]:
        expected = ref_m.mask(prefix, v.tokens, v.stop_ids, v.special_ids)
        assert _mask_bools(m, vocab.size) == expected, f"wraps on, prefix {prefix!r}"
        assert _mask_bools(p, vocab.size) == expected, f"wraps off, prefix {prefix!r}"
        if t is None:
            break
        assert m.accept_token(t) and p.accept_token(t)
        prefix += v.tokens[t] or b""


def test_snowplow_strings_wrap_with_llama3() -> None:
    """Snowplow's maxLength strings with Llama-3: the same masks with wraps on and off along the
    schema's valid instances, and far fewer tokens left to check near the ends of blocks."""
    quicktok = __import__("pytest").importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    bench = ROOT / "tests" / "corpora" / "jsonschemabench" / "Snowplow.jsonl"
    case = next(json.loads(x) for x in bench.read_text().splitlines() if '"Snowplow/sp_13_Normalized"' in x)
    vocab = cfgmask.Vocabulary.llama3()
    # the whole language: every escape of every character, the widest strings to wrap
    g = cfgmask.Grammar.from_json_schema(case["schema"], whitespace="compact", canonical=False)
    no_memo = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63}
    on = cfgmask.compile(g, vocab, _strategy=Strategy(**no_memo))
    off = cfgmask.compile(g, vocab, _strategy=Strategy(wrap_repeats=0, **no_memo))
    a, b = cfgmask.allocate_bitmask(1, vocab.size), cfgmask.allocate_bitmask(1, vocab.size)
    worst = {"on": 0, "off": 0}
    docs = [json.dumps(t["data"], separators=(",", ":")) for t in case["tests"] if t["valid"]]
    assert docs
    for doc in docs:
        m, p = cfgmask.Matcher(on), cfgmask.Matcher(off)
        for t in [*enc.encode_ordinary(doc), None]:
            m.fill_bitmask(a)
            p.fill_bitmask(b)
            assert np.array_equal(a, b), doc
            worst["on"] = max(worst["on"], m._h.mask_stats()["checked"])
            worst["off"] = max(worst["off"], p._h.mask_stats()["checked"])
            if t is None:
                break
            assert m.accept_token(t) and p.accept_token(t)
    assert worst["off"] > 10_000 and worst["on"] * 10 < worst["off"], worst

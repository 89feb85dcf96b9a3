"""The whole-mask memo on a real grammar and vocabulary: grammars/sql.lark under Llama-3.

Masks of the memo path (every set memoized, entries shared across documents) must equal masks
computed with the memo off, at every step of every query, and queries of the same shape must
actually hit entries that other queries stored.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import cfgmask
from cfgmask.compile.strategy import Strategy

quicktok = pytest.importorskip("quicktok")

ROOT = Path(__file__).resolve().parent.parent

QUERIES = [
    "SELECT id, name FROM users WHERE active = 1;",
    "SELECT a, b FROM t WHERE c = 2;",
    "select x from y where z > 3 and w < 4",
    "SELECT p.id FROM people p JOIN pets q ON p.id = q.owner",
]


@pytest.mark.parametrize(
    "limits",
    [
        Strategy(mask_memo_min_items=1),  # every mask, before anything else
        Strategy(mask_memo_min_items=2**63, mask_memo_min_candidates=1),  # after gather
    ],
    ids=["by-items", "by-candidates"],
)
def test_sql_lark_masks_with_memo_equal_masks_without(limits) -> None:
    vocab = cfgmask.Vocabulary.llama3()
    enc = quicktok.get_encoding("llama3")
    g = cfgmask.Grammar.from_lark((ROOT / "grammars" / "sql.lark").read_text())
    memo = cfgmask.compile(g, vocab, _strategy=limits)
    plain = cfgmask.compile(
        g,
        vocab,
        _strategy=Strategy(mask_memo_min_items=2**63, mask_memo_min_candidates=2**63),
    )
    a, b = cfgmask.allocate_bitmask(1, vocab.size), cfgmask.allocate_bitmask(1, vocab.size)
    hits = 0
    for q in QUERIES:
        m, p = cfgmask.Matcher(memo), cfgmask.Matcher(plain)
        for t in [*enc.encode_ordinary(q), None]:
            m.fill_bitmask(a)
            p.fill_bitmask(b)
            assert np.array_equal(a, b), (q, t)
            hits += m._h.mask_stats()["memo_hit"]
            if t is None:
                break
            assert m.accept_token(t) and p.accept_token(t)
        assert m.is_accepting()
    assert hits > 0


def test_sql_lark_filtered_uncertain_tokens_same_masks_fewer_checks() -> None:
    """Cache entries drop the uncertain tokens that no context can read past the rule's end
    (``filter_uncertain``): the masks stay those of the unfiltered entries, with fewer tokens
    left for the run-time check.  And since ``%ignore`` text is read before a terminal, in the
    rule that reads it, a space-led token after a name is not uncertain at all (it used to make
    48,000 candidates after ``SELECT id``)."""
    vocab = cfgmask.Vocabulary.llama3()
    enc = quicktok.get_encoding("llama3")
    g = cfgmask.Grammar.from_lark((ROOT / "grammars" / "sql.lark").read_text())
    no_memo = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63, "direct_walk_states": 2**32}
    on = cfgmask.compile(g, vocab, _strategy=Strategy(**no_memo))
    off = cfgmask.compile(g, vocab, _strategy=Strategy(filter_uncertain=False, **no_memo))
    a, b = cfgmask.allocate_bitmask(1, vocab.size), cfgmask.allocate_bitmask(1, vocab.size)
    candidates = {"on": 0, "off": 0}
    for q in QUERIES[:2]:
        m, p = cfgmask.Matcher(on), cfgmask.Matcher(off)
        for t in [*enc.encode_ordinary(q), None]:
            m.fill_bitmask(a)
            p.fill_bitmask(b)
            assert np.array_equal(a, b), (q, t)
            candidates["on"] += m._h.mask_stats()["candidates"]
            candidates["off"] += p._h.mask_stats()["candidates"]
            if t is None:
                break
            assert m.accept_token(t) and p.accept_token(t)
    assert candidates["on"] * 2 < candidates["off"], candidates
    m = cfgmask.Matcher(on)
    assert m.accept_bytes(b"SELECT id")
    m.fill_bitmask(a)
    assert m._h.mask_stats()["candidates"] < 2_000

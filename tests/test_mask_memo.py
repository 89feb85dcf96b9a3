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
        cfgmask.MatcherLimits(mask_memo_min_items=1),  # every mask, before anything else
        cfgmask.MatcherLimits(mask_memo_min_items=2**63, mask_memo_min_candidates=1),  # after gather
    ],
    ids=["by-items", "by-candidates"],
)
def test_sql_lark_masks_with_memo_equal_masks_without(limits) -> None:
    vocab = cfgmask.Vocabulary.llama3()
    enc = quicktok.get_encoding("llama3")
    g = cfgmask.Grammar.from_lark((ROOT / "grammars" / "sql.lark").read_text())
    memo = cfgmask.compile(g, vocab, matcher_limits=limits)
    plain = cfgmask.compile(
        g,
        vocab,
        matcher_limits=cfgmask.MatcherLimits(mask_memo_min_items=2**63, mask_memo_min_candidates=2**63),
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

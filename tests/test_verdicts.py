"""Closing verdicts: candidates inside a string decided by its items' automata and kept verdicts.

Inside a string whose body may end at every position, the tokens that close it (``abc",``,
``x"}``) are uncertain at every mask.  When the current set is a few items that read bytes and
call nothing, a mask walks each candidate through those items' automata, and decides the rest
of the token after an item's rule completes by a verdict the matcher keeps per (the set that
completion makes, the rest) and reuses at later masks while the sets below stay
(``Strategy.closing_verdicts``; csrc/mask.c ``check_split``, csrc/verdict.c).  Here the masks
must stay those of the pure-Python reference along random walks of JSON-like grammars whose
strings are one shared rule (keys and values, bounded or not), with a rollback and a fork in the
middle of each walk; and the same as with it off along Snowplow documents with Llama-3, where
kept verdicts must decide checks.  A rest that is a run of one byte (``----``, 64 spaces: the
long tokens that cross a block's end) is decided by how many of that byte the completion's set
reads, kept per (set, byte).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import ir
from cfgmask.compile.strategy import Strategy

from .helpers import alt, chars, grammar, lit, opt, ref, rep, seq
from .reference import ReferenceMatcher
from .strategies import Vocab, token_walks, vocabularies
from .test_engine_differential import ReferenceWalk, _vocab

ROOT = Path(__file__).resolve().parent.parent
NO_MEMO = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63}
# closing tokens of every kind, tokens that stay inside, and ones that cross a string's end
PIECES = (
    b'"', b'",', b'"}', b'"]', b'":', b'","', b'"},', b"a", b"ab", b'a"', b'a",', b'ab"}', b"\\n", b"\\",
    b"{", b"}", b"[", b"]", b",", b":", b"1", b'{"', b'["', b'}"', b'1,"', b"aaaaaaa", b'aaaa",',
    b"aaaaaaaaaaaaaaaa", b"a" * 40, b"bbbbb", b"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
)  # fmt: skip


@st.composite
def shared_strings(draw: st.DrawFn) -> tuple[ir.Grammar, int]:
    """JSON-like values whose every string, key or value, is one rule (bounded or not)."""
    hi = draw(st.sampled_from((None, 3, 9, 30)))
    budget = draw(st.sampled_from((2, 4, 64)))
    unit = alt(chars("ab"), lit("\\n"))
    member = seq(ref("string"), lit(":"), ref("value"))
    rules = {
        "root": ref("value"),
        "string": seq(lit('"'), rep(unit, 0, hi), lit('"')),
        "value": alt(ref("string"), lit("1"), ref("object"), ref("array")),
        "object": seq(lit("{"), opt(seq(member, rep(seq(lit(","), member)))), lit("}")),
        "array": seq(lit("["), opt(seq(ref("value"), rep(seq(lit(","), ref("value"))))), lit("]")),
    }
    return grammar(**rules), budget


def _compile(
    g: ir.Grammar, vocab: cfgmask.Vocabulary, budget: int, verdicts: bool
) -> cfgmask.CompiledGrammar:
    limits = cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0)
    strategy = Strategy(closing_verdicts=1 if verdicts else 0, **NO_MEMO)  # every mask with a candidate
    return cfgmask.compile(g, vocab, limits=limits, _strategy=strategy)


@given(shared_strings(), vocabularies(PIECES), st.data())
def test_shared_strings_masks_equal_reference_with_rollback_and_fork(
    case: tuple[ir.Grammar, int], v: Vocab, data: st.DataObject
) -> None:
    g, budget = case
    ref_m = ReferenceMatcher(g)
    vocab = _vocab(v)
    m = cfgmask.Matcher(_compile(g, vocab, budget, verdicts=True))
    walk = data.draw(token_walks(ref_m, v, max_steps=16))
    ids = walk.token_ids
    at = data.draw(st.integers(0, len(ids)))
    back = data.draw(st.integers(0, at))
    rw = ReferenceWalk(ref_m, v, vocab, ids)
    rw.follow(m, 0, at)  # masks to the middle, verdicts kept along the way
    f = m.fork()
    m.rollback(back)  # the sets below may change under the kept verdicts: they must not stand
    rw.follow(m, at - back)
    rw.follow(f, at)  # a fork starts with none and goes on from the middle
    m.reset()
    rw.follow(m, 0)


def _schema_case(split: str, case_id: str) -> dict:
    bench = ROOT / "tests" / "corpora" / "jsonschemabench" / f"{split}.jsonl"
    return next(json.loads(x) for x in bench.read_text().splitlines() if f'"{case_id}"' in x)


@pytest.mark.parametrize("case_id", ["Snowplow/sp_339_Normalized", "Snowplow/sp_0_Normalized"])
def test_snowplow_documents_same_masks_with_verdicts_and_without(case_id: str) -> None:
    """Snowplow objects of many maxLength strings (one string rule per bound, shared by the
    properties): the same masks with the memo and without along the schema's valid instances,
    with a rollback into an earlier string and a fork; and the memo decides checks."""
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    case = _schema_case("Snowplow", case_id)
    vocab = cfgmask.Vocabulary.llama3()
    g = cfgmask.Grammar.from_json_schema(case["schema"])
    on = cfgmask.compile(g, vocab, _strategy=Strategy(**NO_MEMO))
    off = cfgmask.compile(g, vocab, _strategy=Strategy(closing_verdicts=0, **NO_MEMO))
    a, b = cfgmask.allocate_bitmask(1, vocab.size), cfgmask.allocate_bitmask(1, vocab.size)
    docs = [json.dumps(t["data"], separators=(",", ":")) for t in case["tests"] if t["valid"]]
    assert docs
    decided = 0

    def same(m: cfgmask.Matcher, p: cfgmask.Matcher, where: str) -> int:
        m.fill_bitmask(a)
        p.fill_bitmask(b)
        assert np.array_equal(a, b), where
        assert p._h.mask_stats()["verdicts"] == 0
        return int(m._h.mask_stats()["verdicts"])

    for doc in docs[:2]:
        ids = enc.encode_ordinary(doc)
        m, p = cfgmask.Matcher(on), cfgmask.Matcher(off)
        half = len(ids) // 2
        for i, t in enumerate(ids):
            decided += same(m, p, f"{doc[:40]} token {i}")
            assert m.accept_token(t) and p.accept_token(t)
            if i == half:  # back into an earlier string, and forward again; a fork goes on too
                f, fp = m.fork(), p.fork()
                m.rollback(5)
                p.rollback(5)
                for u in ids[i - 4 : i + 1]:
                    decided += same(m, p, f"{doc[:40]} after rollback")
                    assert m.accept_token(u) and p.accept_token(u)
                for u in ids[i + 1 : i + 30]:
                    decided += same(f, fp, f"{doc[:40]} fork")
                    assert f.accept_token(u) and fp.accept_token(u)
        same(m, p, f"{doc[:40]} end")
        assert m.is_accepting()
    assert decided > 100

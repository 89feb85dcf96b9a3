"""A wrapping block position's split made from its chain walk's lists (csrc/chains.c, gather_ranges).

Near the end of a block of a long bounded string (x{0,n} cut into blocks x^b), the entry of a
position of budget B holds uncertain every token that reaches the block's end; those that go on
inside the next block (budget b2 there) are taken whole by a mask where the block may start
again (the wrap bits), the rest are checked.  ``gather_nodes`` read every such token (10^4-10^5
near the end with Llama-3) for its id and a bit test.  For a block whose units are whole trips
from the chain's first label back to it (``ranged_key``) the split follows from the walk: the
wrap bits are the tokens ending inside with need in [B, B + b2) (two of the walk's bitsets),
the rest the subtrees that die after B units or more and the tokens too long for the next
block.  ``_core.chain_wrap_ranges_mode``: 0 token by token (the reference), 1 where it pays (the
default), 2 wherever it applies, 3 as 2 with every split compared against the token-by-token one
in C (a difference is an error).  Every state's entry and split must equal mode 0's and plain
walks', and the masks the pure-Python reference's; the counter proves the path ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core, ir
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, grammar, lit, rep, same_block_entries, seq, walk_agrees
from .reference import ReferenceMatcher
from .strategies import Vocab, token_walks, vocabularies
from .test_engine_differential import _vocab
from .test_repeats import PIECES, UNIT, bounded

ROOT = Path(__file__).resolve().parent.parent
NO_MEMO = {"mask_memo_min_items": 2**63, "mask_memo_min_candidates": 2**63}
Entry = tuple[np.ndarray, np.ndarray, "tuple[np.ndarray, np.ndarray] | None"]


def _entries(
    g: ir.Grammar | cfgmask.Grammar, vocab: cfgmask.Vocabulary, mode: int, **kw: object
) -> list[Entry]:
    """Every state's entry and wrap split with the split made in ``mode``."""
    limits = kw.pop("limits", None)
    with core_switch(_core.chain_wrap_ranges_mode, mode, 1):
        c = cfgmask.compile(g, vocab, limits=limits, _strategy=Strategy(**kw, **NO_MEMO))  # type: ignore[arg-type]
        h = c._handle
        return [(*h.entry(s), h.entry_wrap(s)) for s in range(c.tables.n_states)]


def _plain(g: ir.Grammar | cfgmask.Grammar, vocab: cfgmask.Vocabulary, limits: object = None) -> list[Entry]:
    """Every state's entry by a plain walk of its own (no chains, no wraps)."""
    walk = Strategy(count_chains=False, share_loop_walks=False, wrap_repeats=0, **NO_MEMO)
    c = cfgmask.compile(g, vocab, limits=limits, _strategy=walk)  # type: ignore[arg-type]
    return [(*c._handle.entry(s), None) for s in range(c.tables.n_states)]


def assert_same_splits(
    g: ir.Grammar | cfgmask.Grammar, vocab: cfgmask.Vocabulary, mode: int = 3, **kw: object
) -> int:
    """Every state's entry and split equal with the lists (``mode``) and token by token (0), the
    entries equal to plain walks'; how many positions took the lists."""
    hits = _core.chain_wrap_ranges_hits()
    on = _entries(g, vocab, mode, **dict(kw))
    taken = _core.chain_wrap_ranges_hits() - hits
    off = _entries(g, vocab, 0, **dict(kw))
    plain = _plain(g, vocab, kw.get("limits"))
    same_block_entries(on, off, plain, "token by token")
    return taken


# a vocabulary whose tokens cross a block's end in every way: inside it, closing the string after
# it, dying on a second quote, longer than a whole block, and multi-byte and escaped units
LONG = (
    b"a",
    b"c",
    b"ac",
    b"aca",
    b"acac",
    b"cacaca",
    b"a" * 9,
    b"c" * 17,
    b"ac" * 12,
    b"\\n",
    b"a\\n",
    b"\\nc",
    "\u00e9".encode(),
    "a\u00e9c".encode(),
    "\u00e9".encode()[:1],
    b'"',
    b'a"',
    b'ac"',
    b'aca",',
    b'a"a',
    b'cc"c"',
    b"aaaa\\",
    b"ab",
    b",",
)


@pytest.mark.parametrize("budget", [3, 4, 8])
@pytest.mark.parametrize("mode", [2, 3])
def test_block_splits_from_lists_equal_token_by_token(budget: int, mode: int) -> None:
    """``"x{0,40}"`` cut into blocks of a few units: every state's entry and split equal with the
    lists and token by token, and equal to plain walks'; the lists were taken."""
    v = cfgmask.Vocabulary.from_token_bytes(list(LONG), stop_token_ids=[], special_token_ids=[])
    for lo, hi in ((0, 40), (2, 33)):
        g = grammar(root=seq(lit('"'), rep(UNIT, lo, hi), lit('"')))
        limits = cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0)
        assert assert_same_splits(g, v, mode, limits=limits) > 0


@given(bounded(), vocabularies(PIECES), st.sampled_from((0, 1)))
def test_random_blocks_splits_from_lists(case: tuple[ir.Grammar, int], v: Vocab, wrap: int) -> None:
    """Blocks of random counts and vocabularies, wraps forced on every block entry (1) or by
    default: the splits from the lists (checked in C as well) equal the token-by-token ones and
    the entries plain walks'."""
    g, budget = case
    kw: dict = {"wrap_repeats": 1} if wrap else {}
    assert_same_splits(
        g, _vocab(v), 3, limits=cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0), **kw
    )


@given(bounded(), vocabularies(PIECES), st.data())
def test_random_blocks_masks_equal_reference(
    case: tuple[ir.Grammar, int], v: Vocab, data: st.DataObject
) -> None:
    """The masks along random walks through bounded strings, with the splits from the lists
    wherever they apply: the reference matcher's, and those of plain walks."""
    g, budget = case
    ref_m = ReferenceMatcher(g)
    vocab = _vocab(v)
    limits = cfgmask.CompileLimits(unroll_budget=budget, unroll_whole=0)
    walk = data.draw(token_walks(ref_m, v, max_steps=16))
    with core_switch(_core.chain_wrap_ranges_mode, 2, 1):
        ranged = cfgmask.Matcher(
            cfgmask.compile(g, vocab, limits=limits, _strategy=Strategy(wrap_repeats=1, **NO_MEMO))
        )
        plain = cfgmask.Matcher(
            cfgmask.compile(
                g, vocab, limits=limits, _strategy=Strategy(wrap_repeats=0, count_chains=False, **NO_MEMO)
            )
        )
        walk_agrees(ref_m, v.tokens, v.stop_ids, v.special_ids, walk.token_ids, ranged=ranged, plain=plain)


@pytest.mark.parametrize("max_length", [400, 2000])
def test_llama3_block_splits_from_lists(max_length: int) -> None:
    """maxLength strings with Llama-3, cut into blocks (near a block's end 10^5 tokens reach it):
    every entry and split the same with the lists where they pay (the default) and token by
    token, and equal to plain walks'; the default took the lists."""
    pytest.importorskip("quicktok")
    vocab = cfgmask.Vocabulary.llama3()
    g = cfgmask.Grammar.from_json_schema({"type": "string", "maxLength": max_length})
    assert assert_same_splits(g, vocab, 1) > 0


def test_llama3_snowplow_document_checked() -> None:
    """Snowplow sp_4's first valid document (maxLength 2000 and 8192 strings, two block ends
    crossed) replayed cold with every split from the lists compared in C with the
    token-by-token one, and its masks equal to those with the lists off."""
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    bench = ROOT / "tests" / "corpora" / "jsonschemabench" / "Snowplow.jsonl"
    case = next(json.loads(x) for x in bench.read_text().splitlines() if '"Snowplow/sp_4_Normalized"' in x)
    doc = next(json.dumps(t["data"], separators=(",", ":")) for t in case["tests"] if t["valid"])
    tokens = enc.encode_ordinary(doc)
    vocab = cfgmask.Vocabulary.llama3()
    masks = []
    for mode in (3, 0):
        hits = _core.chain_wrap_ranges_hits()
        with core_switch(_core.chain_wrap_ranges_mode, mode, 1):
            c = cfgmask.compile(cfgmask.Grammar.from_json_schema(case["schema"]), vocab)
            m = cfgmask.Matcher(c)
            got = []
            for t in [*tokens, None]:
                mask = cfgmask.allocate_bitmask(1, vocab.size)
                m.fill_bitmask(mask)
                got.append(mask)
                assert t is None or m.accept_token(t)
            masks.append(got)
        assert (_core.chain_wrap_ranges_hits() > hits) == (mode == 3)
    assert all(np.array_equal(a, b) for a, b in zip(*masks, strict=True))

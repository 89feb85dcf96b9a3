"""The upward filter's read-ahead started by one long scan (csrc/walk.c, run_ahead_now).

At each later position of a long JSON string the uncertain tokens that cross the block's end
leave a rest that is a run of one byte (Llama-3's 70-128-byte runs of spaces, `-`, `#`, `=`)
one byte longer than at the position before, and each was read through the block's upward chart
from its first byte until the (rule, byte) had had `Strategy.run_ahead` such misses.  With
`Strategy.run_ahead_steps` a run whose one scan took that many chart steps is read on to twice
its length at once.  The read-ahead only learns what the chart reads, so every entry and every
mask must be the same with it off, with the runs off altogether (every rest read through the
chart) and as a plain walk's; the counter shows the new trigger ran."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.limits import CompileLimits
from cfgmask.compile.strategy import Strategy

from .test_entries import WALKS_ONLY, entries
from .test_filter_runs import OWN_RULES, RUN_BYTES, RUN_GRAMMARS, TAILS, _run_vocab

# the read-ahead only by the steps of one scan (the count never reaches its bound)
BY_STEPS = Strategy(filter_runs=1, run_ahead=1_000_000, run_ahead_steps=4)
OFF = Strategy(run_ahead_steps=0)
NO_RUNS = Strategy(filter_runs=0)


def _entries_same(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, limits: CompileLimits | None = None) -> int:
    """Every state's entry with the read-ahead by steps equal to those with the runs off and to
    a plain walk's; how many read-aheads the steps started."""
    cfgmask.clear_caches()
    before = _core.run_aheads_by_steps()
    fast = entries(cfgmask.compile(g, vocab, limits=limits, _strategy=BY_STEPS))
    started = _core.run_aheads_by_steps() - before
    for strategy in (NO_RUNS, WALKS_ONLY):
        cfgmask.clear_caches()
        slow = entries(cfgmask.compile(g, vocab, limits=limits, _strategy=strategy))
        for s, (a, b) in enumerate(zip(fast, slow, strict=True)):
            assert np.array_equal(a[0], b[0]), f"state {s}: accepted tokens differ"
            assert np.array_equal(a[1], b[1]), f"state {s}: uncertain tokens differ"
    return started


# Snowplow's strings: several properties of one `maxLength` past the whole chain (one block
# family), string or null, the object open to more properties.
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": ["string", "null"], "maxLength": 1024},
        "tracker": {"type": ["string", "null"], "maxLength": 1024},
        "short": {"type": ["string", "null"], "maxLength": 24},
        "other": {"type": ["string", "null"], "maxLength": 300},
    },
    "required": ["name"],
}
DOC = {
    "name": "Reindeers",
    "tracker": "Network1%3A%3AChristmas%3A%3AReindeers%3A%3A320x70_en" * 3,
    "short": "abc",
    "other": "x" * 120,
}


def _masks(
    g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, ids: list[int], strategy: Strategy
) -> list[np.ndarray]:
    """The masks along ids on a fresh compile (caches cleared: the filter's runs start empty)."""
    cfgmask.clear_caches()
    m = cfgmask.Matcher(cfgmask.compile(g, vocab, _strategy=strategy))
    out = []
    for t in [*ids, None]:
        mask = cfgmask.allocate_bitmask(1, vocab.size)
        m.fill_bitmask(mask)
        out.append(mask.copy())
        if t is None:
            break
        assert m.accept_token(t)
    return out


def test_long_json_strings_llama3_same_masks_and_steps_taken() -> None:
    """Along a document whose strings cross several block ends, the masks with the read-ahead
    by steps (by default) equal those with it off and with the runs off; it ran, and only when on."""
    quicktok = pytest.importorskip("quicktok")
    ids = list(quicktok.get_encoding("llama3").encode_ordinary(json.dumps(DOC, separators=(",", ":"))))
    vocab = cfgmask.Vocabulary.llama3()
    g = cfgmask.Grammar.from_json_schema(json.dumps(SCHEMA))
    before = _core.run_aheads_by_steps()
    on = _masks(g, vocab, ids, Strategy())
    started = _core.run_aheads_by_steps() - before
    assert started > 0
    before = _core.run_aheads_by_steps()
    off = _masks(g, vocab, ids, OFF)
    assert _core.run_aheads_by_steps() == before  # off: only the count starts a read-ahead
    plain = _masks(g, vocab, ids, NO_RUNS)
    for i, (a, b, c) in enumerate(zip(on, off, plain, strict=True)):
        assert np.array_equal(a, b), f"mask {i}: read-ahead by steps against off"
        assert np.array_equal(a, c), f"mask {i}: read-ahead by steps against no runs"


def test_long_json_strings_llama3_same_entries() -> None:
    """Every state's entry of the schema (each block position's filter asks the runs)."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(SCHEMA))
    assert _entries_same(g, cfgmask.Vocabulary.llama3()) > 0


@pytest.mark.parametrize("index", range(len(RUN_GRAMMARS)))
@pytest.mark.parametrize("seed", range(3))
def test_random_run_vocab_same_entries(index: int, seed: int) -> None:
    """Grammars bounding runs of `=`, `-` and spaces, random run tokens of lengths 1-24: the
    read-ahead by steps against every rest read through the chart, and against plain walks."""
    rng = np.random.default_rng(300 + seed)
    a, b = int(rng.integers(2, 12)), int(rng.integers(1, 9))
    text = RUN_GRAMMARS[index].format(a=a, b=b, c=b + int(rng.integers(1, 12)))
    _entries_same(cfgmask.Grammar.from_gbnf(text), _run_vocab(seed), OWN_RULES)


def test_unbounded_runs_steps_taken() -> None:
    """Runs the chart reads whole at any length (`"="*` after a name): long runs read on at once."""
    text = RUN_GRAMMARS[0].format(a=3, b=2, c=5)
    toks = {bytes([x]) for x in range(256)} | {b"(a)" + b"=" * k for k in range(1, 40)}
    toks |= {b")" + b"=" * k for k in range(1, 40)}
    vocab = cfgmask.Vocabulary.from_token_bytes(sorted(toks))
    assert _entries_same(cfgmask.Grammar.from_gbnf(text), vocab, OWN_RULES) > 0


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, len(RUN_GRAMMARS) - 1),
    st.integers(1, 12),
    st.integers(1, 8),
    st.integers(1, 10),
    st.lists(
        st.tuples(
            st.sampled_from([b"", b"a", b"ab", b"'", b"(a", b"(a)", b")"]),
            st.sampled_from(RUN_BYTES),
            st.integers(1, 40),
            st.sampled_from(TAILS),
        ),
        min_size=1,
        max_size=80,
    ),
)
def test_run_ahead_steps_same_entries_hypothesis(index: int, a: int, b: int, more: int, pieces: list) -> None:
    text = RUN_GRAMMARS[index].format(a=a, b=b, c=b + more)
    toks = {bytes([x]) for x in range(256)} | {
        head + bytes([byte]) * k + tail for head, byte, k, tail in pieces
    }
    _entries_same(
        cfgmask.Grammar.from_gbnf(text), cfgmask.Vocabulary.from_token_bytes(sorted(toks)), OWN_RULES
    )

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
from .test_filter_runs import OWN_RULES, RUN_BYTES, RUN_GRAMMARS, TAILS

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


RUN_TAILS = [b"", b"", b'"', b'",', b'"}', b"\n", b"\\n", b"a"]


def _run_vocab_long(seed: int) -> cfgmask.Vocabulary:
    """Every byte, and tokens of a short head, a run of 1-128 spaces, `=`, `-` or `#`, maybe a
    tail (a quote ending the string, a raw newline it cannot hold, an escape): runs that cross
    a block's end at one position and a block and more at the next."""
    rng = np.random.default_rng(seed)
    toks = {bytes([b]) for b in range(256)}
    for _ in range(400):
        head = bytes(rng.choice([*b'ab "'], size=int(rng.integers(0, 3))).astype(np.uint8))
        run = bytes([int(rng.choice([*b" =-#"]))]) * int(rng.integers(1, 129))
        toks.add(head + run + RUN_TAILS[int(rng.integers(len(RUN_TAILS)))])
    return cfgmask.Vocabulary.from_token_bytes(sorted(toks))


@pytest.mark.parametrize("seed", range(5))
def test_random_bounds_and_runs_same_entries(seed: int) -> None:
    """A string cut into blocks (maxLength 250-500) and a short one beside it, random run tokens:
    every state's entry against the runs off and plain walks; the steps started read-aheads."""
    rng = np.random.default_rng(500 + seed)
    long, short = int(rng.integers(250, 501)), int(rng.integers(1, 80))
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": long},
            "b": {"type": ["string", "null"], "maxLength": short},
        },
        "required": ["a"],
    }
    g = cfgmask.Grammar.from_json_schema(json.dumps(schema))
    assert _entries_same(g, _run_vocab_long(seed)) > 0, (long, short)


@settings(max_examples=30, deadline=None)
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
def test_run_grammars_same_entries_hypothesis(index: int, a: int, b: int, more: int, pieces: list) -> None:
    """test_filter_runs' grammars bounding runs after a name, under the read-ahead by steps."""
    text = RUN_GRAMMARS[index].format(a=a, b=b, c=b + more)
    toks = {bytes([x]) for x in range(256)} | {
        head + bytes([byte]) * k + tail for head, byte, k, tail in pieces
    }
    _entries_same(
        cfgmask.Grammar.from_gbnf(text), cfgmask.Vocabulary.from_token_bytes(sorted(toks)), OWN_RULES
    )


@pytest.mark.parametrize(("budget", "bound"), [(16, 40), (16, 60), (16, 90), (24, 100)])
def test_bounded_string_blocks_same_entries(budget: int, bound: int) -> None:
    """A string of bounded length cut into small blocks, tokens of runs of 1-69 bytes (with a
    quote after them or not): the block rule's upward chart reads a run only so far, so what the
    read-ahead learns (where it dies too) decides rests; against the runs off and plain walks."""
    text = f'root ::= item ("," item)*\nitem ::= "\\"" [a-z= -]{{0,{bound}}} "\\""'
    toks = {bytes([x]) for x in range(256)} | {
        head + byte * k + tail
        for head in (b"", b"a", b'"')
        for byte in (b"=", b" ", b"-")
        for k in range(1, 70)
        for tail in (b"", b'"', b'",')
    }
    vocab = cfgmask.Vocabulary.from_token_bytes(sorted(toks))
    limits = CompileLimits(unroll_budget=budget, unroll_whole=0)
    assert _entries_same(cfgmask.Grammar.from_gbnf(text), vocab, limits) > 0

"""The upward filter's runs of one byte (csrc/walk.c, follow_run): a rest of an uncertain token
after its rule exits that is one byte repeated (`=====`, 40 spaces: Llama-3's long punctuation
tokens crossing a block's end) is answered by how many of the byte the rule's upward chart is known
to read and where it is known to die, learnt from the rests read before; a rest whose leading run
reaches that death dies at once.  Every state's entry must be the same as with every rest read
through the upward chart, and as a plain walk's."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.limits import CompileLimits
from cfgmask.compile.strategy import Strategy

from .test_entries import WALKS_ONLY, entries, shipped

# the runs answer every question they know, make their stops at once and read ahead at once
EVERY = Strategy(filter_runs=1, run_stops=1, run_ahead=1)


def _runs_same(
    g: cfgmask.Grammar,
    vocab: cfgmask.Vocabulary,
    limits: CompileLimits | None = None,
    every: bool = True,
    plain: bool = False,
) -> int:
    """Every state's entry with the runs on (answering every question they know, or as by
    default) equal to each rest read through the upward chart (and with `plain`, to a plain
    walk's); how many questions the runs answered."""
    before = _core.filter_run_hits()
    fast = cfgmask.compile(g, vocab, limits=limits, _strategy=EVERY if every else None)
    fast_entries = entries(fast)
    hits = _core.filter_run_hits() - before
    others = [Strategy(filter_runs=0)] + ([WALKS_ONLY] if plain else [])
    for strategy in others:
        slow = cfgmask.compile(g, vocab, limits=limits, _strategy=strategy)
        for s, (a, b) in enumerate(zip(fast_entries, entries(slow), strict=True)):
            assert np.array_equal(a[0], b[0]), f"state {s}: accepted tokens differ"
            assert np.array_equal(a[1], b[1]), f"state {s}: uncertain tokens differ"
    return hits


# Each rule its own: the name's rests after it exits go through its callers' upward chart.
OWN_RULES = CompileLimits(inline_max_states=1, inline_shared_states=1)


# A string of at most 300 characters is a chain of blocks: at each position near a block's end,
# Llama-3's long `=====`, `-----` and space tokens leave the block's rule, their rest a run a few
# bytes longer at each later position.
LONG_STRING = {
    "type": "object",
    "properties": {"a": {"type": "string", "maxLength": 300}, "b": {"type": "string", "maxLength": 40}},
    "required": ["a", "b"],
}


def test_runs_taken_and_same_entries_json_schema_llama3() -> None:
    g = cfgmask.Grammar.from_json_schema(json.dumps(LONG_STRING))
    hits = _runs_same(g, cfgmask.Vocabulary.llama3(), every=False)
    assert hits > 100, hits


def test_runs_same_entries_sql_lark_llama3() -> None:
    """sql.lark's `--` comments and unary minus read runs of dashes from every position."""
    _runs_same(shipped("sql.lark"), cfgmask.Vocabulary.llama3())


# A name whose callers each read a bounded run of a byte after it (then something else, or
# nothing), so that the upward chart of the name survives exactly so many bytes of each run; the
# bounds are filled in per test.
RUN_GRAMMARS = [
    'root ::= item ( "," item )*\n'
    'item ::= name "="{{1,{a}}} ";" | name "-"{{{b},{c}}} | "(" name ")" "="*\n'
    "name ::= [a-z]+",
    'root ::= item+\nitem ::= name " "{{0,{a}}} ( "=" | "-"{{1,{b}}} name )?\nname ::= [a-z] [a-z0-9]*',
    'root ::= item ( ";" item )*\n'
    'item ::= word ( "="{{{a}}} | "="{{{c}}} "-" | " "{{1,{b}}} word )\n'
    'word ::= [a-z]+ | "\'" [a-z=]* "\'"',
]
RUN_BYTES = [*b"=- "]
TAILS = [b"", b"", b";", b",", b"-", b"=", b" ", b"a", b"(", b")", b"'", b"\n", b"=\n"]


def _run_vocab(seed: int, n: int = 900) -> cfgmask.Vocabulary:
    """Every byte, a name byte then a run of each length 1-24 of each run byte (so that a run the
    chart reads whole is followed by one a byte longer), and tokens of a few name bytes, then a
    run of any length 1-24, then maybe a tail: their rests after the name are runs, or runs then
    a byte."""
    rng = np.random.default_rng(seed)
    toks = {bytes([b]) for b in range(256)}
    toks |= {b"a" + bytes([byte]) * k for byte in RUN_BYTES for k in range(1, 25)}
    for _ in range(n):
        head = bytes(rng.choice([*b"abz'("], size=int(rng.integers(0, 4))).astype(np.uint8))
        run = bytes([int(rng.choice(RUN_BYTES))]) * int(rng.integers(1, 25))
        toks.add(head + run + TAILS[int(rng.integers(len(TAILS)))])
    return cfgmask.Vocabulary.from_token_bytes(sorted(toks))


@pytest.mark.parametrize("index", range(len(RUN_GRAMMARS)))
@pytest.mark.parametrize("seed", range(3))
def test_runs_same_entries_random_vocab(index: int, seed: int) -> None:
    """Random run tokens of many lengths against bounds drawn per seed: the runs against every
    rest read through the upward chart, and against plain walks."""
    rng = np.random.default_rng(100 + seed)
    a, b = int(rng.integers(2, 9)), int(rng.integers(1, 6))
    text = RUN_GRAMMARS[index].format(a=a, b=b, c=b + int(rng.integers(1, 9)))
    g = cfgmask.Grammar.from_gbnf(text)
    vocab = _run_vocab(seed)
    assert _runs_same(g, vocab, OWN_RULES, plain=True) > 0, text


@given(
    st.integers(0, len(RUN_GRAMMARS) - 1),
    st.integers(1, 12),
    st.integers(1, 8),
    st.integers(1, 10),
    st.lists(
        st.tuples(
            st.sampled_from([b"", b"a", b"ab", b"'", b"(a"]),
            st.sampled_from(RUN_BYTES),
            st.integers(1, 30),
            st.sampled_from(TAILS),
        ),
        min_size=1,
        max_size=80,
    ),
)
def test_runs_same_entries_hypothesis(index: int, a: int, b: int, more: int, pieces: list) -> None:
    text = RUN_GRAMMARS[index].format(a=a, b=b, c=b + more)
    toks = {bytes([x]) for x in range(256)} | {
        head + bytes([byte]) * k + tail for head, byte, k, tail in pieces
    }
    _runs_same(cfgmask.Grammar.from_gbnf(text), cfgmask.Vocabulary.from_token_bytes(sorted(toks)), OWN_RULES)

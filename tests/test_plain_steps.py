"""Entry builds that skip a chart: flat steps of plain items, and a listed walk's unread bytes.

*Plain steps* (``Strategy.flat_plain_steps``, csrc/flat.c ``flat_step_plain`` and
``plain_closure_live``).  A flat configuration of one set of items waiting on the unknown caller,
stepping on a byte into states that neither call nor complete (a key's, a string's, a name's
bytes), is the configuration of those states: made from the automaton's transitions, with no
chart, and the proofs that every name (or plain string) entry of a first byte lives run over the
automaton's states.  An object open to keys other than its own (any string but the schema's
keys) walks the DFA of its keys' prefixes so: thousands of transitions in its first mask.

*Listed reads* (``Strategy.listed_reads``, csrc/walk.c ``cm_walk_listed_at``).  A composed entry
decides the tokens its parts leave uncertain along one chart in trie order; a set a second token
resumes from keeps the bytes its items read, and a token whose next byte none reads dies without
a scan.  An object of optional properties in order is a chain of rules, each calling the next, so
its composed entries' charts are as wide as the chain.

Both claim the very entries of the chart's way: every state's entry is compared bit for bit with
them off and with whole walks (``WALKS_ONLY``), on Llama-3 and on random vocabularies; the counters
show each path was taken.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .strategies import Vocab, vocabularies
from .test_engine_differential import _vocab
from .test_entries import WALKS_ONLY, entries

BENCH = Path(__file__).resolve().parent / "corpora" / "jsonschemabench"
CHARTS_ONLY = Strategy(flat_plain_steps=False, listed_reads=False)


def _same(fast: cfgmask.CompiledGrammar, slow: cfgmask.CompiledGrammar) -> None:
    for s, (a, b) in enumerate(zip(entries(fast), entries(slow), strict=True)):
        assert np.array_equal(a[0], b[0]), f"state {s}: accepted tokens differ"
        assert np.array_equal(a[1], b[1]), f"state {s}: uncertain tokens differ"


def _same_entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, *, walks: bool = True) -> None:
    """Every state's entry with both shortcuts equal to the charts' way (and to whole walks)."""
    cfgmask.clear_caches()
    fast = cfgmask.compile(g, vocab, _strategy=Strategy())
    _same(fast, cfgmask.compile(g, vocab, _strategy=CHARTS_ONLY))
    if walks:
        _same(fast, cfgmask.compile(g, vocab, _strategy=WALKS_ONLY))


KEYS = [
    "adgroup_name",
    "adjust_device_id",
    "adjust_tracker",
    "adjust_tracker_name",
    "app_id",
    "attribution_type",
    "campaign",
    "click_time",
    "country",
    "created_at",
    "device_name",
    "event",
]


def _open_object(keys: list[str], value: dict) -> cfgmask.Grammar:
    """An object of optional keys open to any other key (canonical=False): its key states walk
    the DFA of the keys' prefixes."""
    schema = {"type": "object", "properties": {k: value for k in keys}}
    return cfgmask.Grammar.from_json_schema(json.dumps(schema), canonical=False)


def _chain(n: int) -> cfgmask.Grammar:
    """An object of n optional properties in order, closed: a chain of rules, each calling the next."""
    props = {f"p{i:02d}": {"type": ["boolean", "null"] if i % 2 else ["string", "null"]} for i in range(n)}
    schema = {"type": "object", "properties": props, "additionalProperties": False}
    return cfgmask.Grammar.from_json_schema(json.dumps(schema))


def _steps_taken(g: cfgmask.Grammar) -> tuple[int, int]:
    cfgmask.clear_caches()
    steps, proofs = _core.flat_plain_steps(), _core.flat_plain_proofs()
    entries(cfgmask.compile(g, cfgmask.Vocabulary.llama3()))
    return _core.flat_plain_steps() - steps, _core.flat_plain_proofs() - proofs


def test_open_object_keys_same_entries_llama3() -> None:
    """Keys sharing prefixes; string values (their proofs hold) and values whose strings die on
    some name byte (a pattern: proofs that fail, with the same verdict as the chart's)."""
    vocab = cfgmask.Vocabulary.llama3()
    for value in ({"type": "string"}, {"type": "string", "pattern": "^[a-m_]*$"}, {"type": "integer"}):
        _same_entries(_open_object(KEYS, value), vocab)


def test_open_object_keys_take_plain_steps() -> None:
    steps, proofs = _steps_taken(_open_object(KEYS, {"type": "string"}))
    assert steps > 100 and proofs > 0, (steps, proofs)
    off = cfgmask.compile(
        _open_object(KEYS, {"type": "string"}), cfgmask.Vocabulary.llama3(), _strategy=CHARTS_ONLY
    )
    before = _core.flat_plain_steps(), _core.flat_plain_proofs()
    entries(off)
    assert (_core.flat_plain_steps(), _core.flat_plain_proofs()) == before


def test_chain_of_optional_properties_same_entries_llama3() -> None:
    vocab = cfgmask.Vocabulary.llama3()
    _same_entries(_chain(6), vocab)
    _same_entries(_chain(24), vocab, walks=False)


def test_chain_of_optional_properties_dies_unread() -> None:
    """The chain's composed entries let most candidates (` {`, ` [` after the blank) die unread."""
    cfgmask.clear_caches()
    before = _core.listed_unread()
    entries(cfgmask.compile(_chain(24), cfgmask.Vocabulary.llama3()))
    assert _core.listed_unread() - before > 100


@pytest.mark.parametrize("case_id", ["Snowplow/sp_0_Normalized", "Snowplow/sp_339_Normalized"])
def test_heaviest_first_masks_schemas_same_entries(case_id: str) -> None:
    """The two schemas whose first-use masks were the largest (an additional key's re-walks; a
    chain of ~130 optional properties), every state's entry against the charts' way."""
    rows = [json.loads(line) for line in (BENCH / "Snowplow.jsonl").read_text().splitlines() if line.strip()]
    (schema,) = [r["schema"] for r in rows if r["id"] == case_id]
    _same_entries(
        cfgmask.Grammar.from_json_schema(json.dumps(schema)), cfgmask.Vocabulary.llama3(), walks=False
    )


KEY_PIECES = (
    b'"',
    b"a",
    b"ad",
    b"adj",
    b"_",
    b"app",
    b"id",
    b"x",
    b" ",
    b":",
    b",",
    b"{",
    b"}",
    b'",',
    b'":',
)


@given(
    st.lists(st.text("adjp_ix", min_size=1, max_size=6), min_size=1, max_size=6, unique=True),
    vocabularies(KEY_PIECES),
)
def test_open_object_keys_random_vocabularies_same_entries(keys: list[str], v: Vocab) -> None:
    vocab = _vocab(v)
    _same_entries(_open_object(keys, {"type": "string"}), vocab)
    _same_entries(_chain(len(keys) + 1), vocab)

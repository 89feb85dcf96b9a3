"""A chain walk's bulk entries listed by need from the vocabulary's entries by length (csrc/chains.c).

A counted chain's walk takes the entries made only of its loop bytes X at once (test_chain_bulk):
each ends inside with a need that grows with its length.  Instead of copying them in trie order,
each with its need, for the sort of every id, the walk lists them after its walk by length, from
the vocabulary's entries of each first byte by length (csrc/tokclass.c's ``by_len``), merged by
need with the ids it walked.  The reference: every state's entry equal to the plain walks'
(count_chains off) with the listing on and off (``_core.chain_bulk_by_len_enable``), on Llama-3
and on small random vocabularies (the take wherever it applies); and the listing made exactly
where a bulk take is (its counter).
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager

import pytest
from hypothesis import given, settings

import cfgmask
from cfgmask import _core, ir

from .helpers import core_switch
from .strategies import Vocab, vocabularies
from .test_chain_bulk import LLAMA_STRINGS, _object, class_counts
from .test_engine_differential import _vocab
from .test_repeats import CHAIN_PIECES, assert_chain_entries
from .test_tokclass import _llama3, _mode


def _by_len(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.chain_bulk_by_len_enable, on)


def _listed(
    g: cfgmask.Grammar | ir.Grammar, vocab: cfgmask.Vocabulary, limits: cfgmask.CompileLimits | None = None
) -> tuple[dict, int, int]:
    """The chain stats of assert_chain_entries, and how many walks were taken in bulk and listed."""
    takes, listed = _core.chain_bulk_takes(), _core.chain_bulk_listed()
    stats = assert_chain_entries(g, vocab, limits)
    return stats, _core.chain_bulk_takes() - takes, _core.chain_bulk_listed() - listed


@pytest.mark.parametrize("schema", LLAMA_STRINGS, ids=range(len(LLAMA_STRINGS)))
def test_llama3_class_chains_listed_same_entries(schema: dict) -> None:
    """Llama-3's class and string chains: every entry the plain walks', listed or not; every walk
    taken in bulk listed when on, none when off."""
    vocab = _llama3()
    g = _object(schema, {"type": "string", "maxLength": 8})
    for on in (True, False):
        with _mode(1), _by_len(on):
            _, takes, listed = _listed(g, vocab)
            assert listed == (takes if on else 0), (on, takes, listed)


def test_llama3_id_pattern_listed() -> None:
    """o6193's `^[0-9a-zA-Z_-]{1,255}$` (entries of need -1 up to Llama-3's longest such token, and
    walked ids between them: `a"`, `-.`) is taken in bulk and listed."""
    vocab = _llama3()
    g = cfgmask.Grammar.from_json_schema(
        json.dumps(
            {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[0-9a-zA-Z_-]{1,255}$"}}}
        )
    )
    with _mode(1), _by_len(True):
        _, takes, listed = _listed(g, vocab)
    assert takes >= 1 and listed == takes


@settings(max_examples=60, deadline=None)
@given(class_counts(), vocabularies(CHAIN_PIECES))
def test_small_vocabularies_listed_same_entries(
    case: tuple[ir.Grammar, cfgmask.CompileLimits], v: Vocab
) -> None:
    """Small random vocabularies of class bytes, quotes, escapes and cut characters, the take
    wherever it applies (mode 2): every listed walk's entries the plain walks'."""
    g, limits = case
    with _mode(2), _by_len(True):
        _, takes, listed = _listed(g, _vocab(v), limits)
        assert listed == takes

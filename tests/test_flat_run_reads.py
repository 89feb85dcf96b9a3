"""A flat walk's run past a transition not computed whose byte no item of the configuration reads
(csrc/flat.c, flat_run_g; `_core.flat_run_reads_enable`).

Where the run met a cell not computed it stopped for flat_step, whose first test is the
configuration's reads row: most such cells (9,562 of the mid set's 12,595 steps) die there, and
the stop (a return, flat_walk_from's stop, a call) cost more than the check.  The run now marks
the cell dead itself and skips its subtree, as it skips a known dead cell's, unless an exit lies
on the path (then the subtree's entries are uncertain: flat_walk_from's stop takes them).  Here
every state's entry with it on equals it off (the stop), on small vocabularies under hypothesis
and on Llama-3, every mask along corpus documents too, and `_core.flat_run_reads_dead()` shows it
was taken.
"""

from __future__ import annotations

import functools
import json

import pytest
from hypothesis import given

import cfgmask
from cfgmask import _core

from .helpers import core_switch, masks_along, same_document_masks
from .strategies import Vocab, vocabularies
from .test_direct_loops import assert_corpus_masks_same_taken
from .test_donor_mode_bytes import llama3_document
from .test_engine_differential import _vocab
from .test_entries import ROOT, assert_switch_same_entries
from .test_loop_exit_ends import llama3  # noqa: F401  (the fixture)

# JSON's strings and keys: their configurations read few bytes, and a string's end exits (the
# entries past it that die are uncertain, not skipped).
JSON = (ROOT / "grammars" / "json.gbnf").read_text()
PIECES = (
    b'{"', b'"ab"', b'"a', b'ab', b'":', b'": ', b'",', b'"}', b'"]', b'1', b'12', b'1.', b'c"',
    b'"c', b'a"b', b'"\\', b'\\n', b'\\u', b'tr', b'true', b'nu', b' "', b'[1', b'-', b'e+',
)  # fmt: skip


_check = functools.partial(
    assert_switch_same_entries,
    _core.flat_run_reads_enable,
    _core.flat_run_reads_dead,
    what="the run's stop",
)


def test_json_taken_same_entries() -> None:
    vocab = cfgmask.Vocabulary.from_token_bytes(
        list(dict.fromkeys([bytes([c]) for c in b'{}[]",: \nabc012.-+etrunl\\'])) + list(PIECES)
    )
    assert _check(cfgmask.Grammar.from_gbnf(JSON), vocab, plain=True) > 0


@given(vocabularies(PIECES))
def test_json_same_entries(v: Vocab) -> None:
    _check(cfgmask.Grammar.from_gbnf(JSON), _vocab(v), plain=True)


def test_json_schema_llama3_same_entries(llama3: cfgmask.Vocabulary) -> None:  # noqa: F811
    """Listed keys, an enum, a patterned string and numbers: configurations that read a few bytes."""
    props = {
        "name": {"type": "string", "maxLength": 8},
        "kind": {"enum": ["alpha", "beta", "gamma"]},
        "code": {"type": "string", "pattern": "^[A-F0-9]{2,4}$"},
        "n": {"type": "integer"},
        "x": {"type": "number"},
    }
    schema = {"type": "object", "properties": props, "required": ["name", "kind"]}
    g = cfgmask.Grammar.from_json_schema(json.dumps(schema))
    assert _check(g, llama3, plain=True) > 0


def test_corpus_masks_same() -> None:
    """Llama-3 masks along corpus schemas' first documents, the same on and off; taken on only."""
    assert_corpus_masks_same_taken(_core.flat_run_reads_enable, _core.flat_run_reads_dead)


@pytest.mark.parametrize(
    ("split", "sid"),
    [("Glaiveai2K", "calculate_area_9a162d40"), ("WashingtonPost", "wp_104_Normalized")],
)
def test_llama3_first_documents_masks_same(split: str, sid: str) -> None:
    """Llama-3 along the first document of two mid-set schemas (their masks moved most): every
    mask and the build statistics equal on and off (caches cleared: each side walks cold)."""
    g, vocab, tokens = llama3_document(split, sid)
    masks, stats, moved = {}, {}, {}
    for on in (False, True):
        with core_switch(_core.flat_run_reads_enable, on):
            cfgmask.clear_caches()
            n0 = _core.flat_run_reads_dead()
            c = cfgmask.compile(g, vocab)
            masks[on], stats[on] = masks_along(c, tokens), c._handle.build_stats
            moved[on] = _core.flat_run_reads_dead() - n0
    assert moved[False] == 0 and moved[True] > 0, moved
    assert stats[True] == stats[False]
    same_document_masks([masks[False]], [masks[True]], [tokens])

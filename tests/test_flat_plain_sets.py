"""Flat walks' transitions made without a chart for configurations of several sets (csrc/flat.c,
flat_step_plain_sets; `_core.flat_plain_sets_enable`).

At a JSON object's key the flat walk's configuration holds the caller's set and the called rule's
items (a `ws` loop, a key string): older origins, which flat_step_plain does not take, so each new
transition loaded, scanned and encoded a chart.  Where the new set's closure only completes into
older sets, the step is made from the configuration itself.  Here every state's entry with it on
equals it off (the chart's step), on small vocabularies under hypothesis and on Llama-3, every
mask along real schema documents too, and `_core.flat_plain_sets_steps()` shows it was taken.
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
from .test_donor_mode_bytes import llama3_document
from .test_engine_differential import _vocab
from .test_entries import ROOT, assert_switch_same_entries
from .test_loop_exit_ends import llama3  # noqa: F401  (the fixture)

# JSON's objects: keys after a called ws loop, strings called as a rule (json.gbnf).
JSON = (ROOT / "grammars" / "json.gbnf").read_text()
PIECES = (
    b'{"', b'{ "', b'{\n "', b'"ab"', b'"a', b'ab', b'":', b'": ', b' "b', b'\n  "', b'",', b', "',
    b' :', b'"}', b'1', b'12', b'c"', b'"c', b' \n', b'  ', b'{\n', b'"b":',
)  # fmt: skip


_check = functools.partial(
    assert_switch_same_entries,
    _core.flat_plain_sets_enable,
    _core.flat_plain_sets_steps,
    what="the chart's step",
)


def test_objects_taken_same_entries() -> None:
    vocab = cfgmask.Vocabulary.from_token_bytes(
        list(dict.fromkeys([bytes([c]) for c in b'{}",: \nabc012'])) + list(PIECES)
    )
    assert _check(cfgmask.Grammar.from_gbnf(JSON), vocab, plain=True) > 0


@given(vocabularies(PIECES))
def test_objects_same_entries(v: Vocab) -> None:
    _check(cfgmask.Grammar.from_gbnf(JSON), _vocab(v), plain=True)


def test_json_schema_llama3_same_entries(llama3: cfgmask.Vocabulary) -> None:  # noqa: F811
    """Listed keys and any other key (a called string rule), after ws loops."""
    props = {"name": {"type": "string"}, "n": {"type": "integer"}, "tags": {"type": "array"}}
    schema = {"type": "object", "properties": props, "additionalProperties": {"type": "number"}}
    g = cfgmask.Grammar.from_json_schema(json.dumps(schema))
    assert _check(g, llama3, plain=True) > 0


@pytest.mark.parametrize(
    ("split", "sid"),
    [
        ("Glaiveai2K", "create_calendar_event_33766336"),
        ("WashingtonPost", "wp_121_Normalized"),
        ("Snowplow", "sp_333_Normalized"),
    ],
)
def test_llama3_first_documents_masks_same(split: str, sid: str) -> None:
    """Llama-3 along the first document of JSONSchemaBench schemas: every mask and the build
    statistics equal with the step on and off (caches cleared: each side walks cold)."""
    g, vocab, tokens = llama3_document(split, sid)
    masks, stats, moved = {}, {}, {}
    for on in (False, True):
        with core_switch(_core.flat_plain_sets_enable, on):
            cfgmask.clear_caches()
            n0 = _core.flat_plain_sets_steps()
            c = cfgmask.compile(g, vocab)
            masks[on], stats[on] = masks_along(c, tokens), c._handle.build_stats
            moved[on] = _core.flat_plain_sets_steps() - n0
    assert moved[False] == 0 and moved[True] > 0, moved
    assert stats[True] == stats[False]
    same_document_masks([masks[False]], [masks[True]], [tokens])

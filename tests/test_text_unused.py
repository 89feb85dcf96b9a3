"""A whole walk's text proof past characters no text entry holds (csrc/flat.c ``flat_text_unused_live``).

A whole flat walk takes the text entries (plain bytes and whole UTF-8 characters) in one OR
when every configuration its start reaches on text bytes steps on to a live one.  A pattern's
``.`` (ECMAScript: no U+2028, U+2029) dies inside those two characters, which no Llama-3 token
holds whole, so the proof failed and the walk read ~30 k entries one by one (Snowplow's
``"version"``, ``^(\\d+\\.\\d+\\.\\d+.*)$`` under a maxLength of 32: 3.8 M instructions a first
mask).  The proof now passes over a dead step where no text entry of the vocabulary holds a
character that begins so (``Vocabulary``'s ``text_used``), with room for a count's pairs;
``_core.flat_text_unused_enable(False)`` is the old proof, the reference.  Checked: every
state's entry with the switch on and off and by whole walks, for such schemas with Llama-3 and
with small vocabularies that hold the dead characters or their neighbours (so that a proof
passing over a character an entry holds would accept it); the masks along sp_333's and sp_339's
first documents; hypothesis vocabularies of such characters.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along, same_entries, stop_vocab
from .strategies import Vocab, vocabularies
from .test_compose_self import switch_entries, switch_same_entries
from .test_engine_differential import _vocab
from .test_entries import WALKS_ONLY, entries

ROOT = Path(__file__).resolve().parent.parent

SEMVER = {
    "type": "object",
    "properties": {"version": {"type": "string", "maxLength": 32, "pattern": "^(\\d+\\.\\d+\\.\\d+.*)$"}},
    "required": ["version"],
    "additionalProperties": False,
}
DOT = {"type": "string", "pattern": "^a.*$"}
DOT_BOUNDED = {"type": "string", "pattern": "^.{0,6}b$"}
SCHEMAS = [SEMVER, DOT, DOT_BOUNDED]

LS, PS = "\u2028", "\u2029"
# the dead characters themselves, whole and as prefixes, beside their neighbours (U+2027, U+202A)
# and other characters of the same lead byte and of other lengths
PIECES = tuple(
    s.encode()
    for s in (
        "1", "0", ".", "1.2.3", "1.", "a", "ab", "b", '"', '",', "é", "aé", "\u2027", "\u202a",
        "\u2026x", "x\u2027", "€", "中文", "😀", " ", "\\n", "\\u2028", "ac", "bb",
    )
)  # fmt: skip
DEAD = tuple(s.encode() for s in (LS, "x" + LS, PS + "y", "a" + LS, LS + '"'))


def _dead_vocab(with_dead: bool) -> cfgmask.Vocabulary:
    return stop_vocab(PIECES + (DEAD if with_dead else ()))[0]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_llama3_same_entries(schema: dict) -> None:
    """Every state's entry with Llama-3 the same with the switch on and off and by whole walks;
    the proof passes over U+2028 at the semver's counted characters (the `.` strings' states
    are loops, walked by their own proofs)."""
    vocab = cfgmask.Vocabulary.llama3()
    counted = switch_same_entries(
        cfgmask.Grammar.from_json_schema(schema),
        vocab,
        _core.flat_text_unused_enable,
        _core.flat_text_unused_proofs,
    )
    assert counted > 0 or schema is not SEMVER


@pytest.mark.parametrize("with_dead", [True, False])
@pytest.mark.parametrize("schema", SCHEMAS)
def test_small_vocab_dead_characters_same_entries(schema: dict, with_dead: bool) -> None:
    """A vocabulary holding U+2028 and U+2029 (whole, after and before other bytes): the proof may
    not pass over them, and their tokens are walked; without them it passes over (U+2027 and
    U+202A, their neighbours, stay in)."""
    vocab = _dead_vocab(with_dead)
    g = cfgmask.Grammar.from_json_schema(schema)
    counted = switch_same_entries(g, vocab, _core.flat_text_unused_enable, _core.flat_text_unused_proofs)
    assert (counted > 0) == (schema is SEMVER and not with_dead)


def _first_document(sid: str) -> tuple[dict, list[int]]:
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    bench = ROOT / "tests" / "corpora" / "jsonschemabench" / "Snowplow.jsonl"
    case = next(json.loads(x) for x in bench.read_text().splitlines() if f'"Snowplow/{sid}_Normalized"' in x)
    data = next(t["data"] for t in case["tests"] if t["valid"])
    return case["schema"], enc.encode_ordinary(json.dumps(data, separators=(",", ":")))


@pytest.mark.parametrize("sid", ["sp_333", "sp_339"])
def test_snowplow_document_masks(sid: str) -> None:
    """The masks along sp_333's and sp_339's first valid documents (their `"version"` strings
    among them) the same with the switch on and off."""
    schema, tokens = _first_document(sid)
    vocab = cfgmask.Vocabulary.llama3()
    g = cfgmask.Grammar.from_json_schema(schema)
    out = {}
    for on in (True, False):
        before = _core.flat_text_unused_proofs()
        with core_switch(_core.flat_text_unused_enable, on):
            out[on] = masks_along(cfgmask.compile(g, vocab), tokens, final=True)
        assert (_core.flat_text_unused_proofs() > before) == on
    for i, (a, b) in enumerate(zip(out[True], out[False], strict=True)):
        assert np.array_equal(a, b), f"{sid}: mask {i} differs"


HINT = tuple(s.encode() for s in ("1", ".", "a", "b", "é", LS, PS, "\u2027", '"', "x" + LS))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(SCHEMAS), vocabularies(HINT))
def test_random_vocabularies_same_entries(schema: dict, v: Vocab) -> None:
    """Random vocabularies of those characters and their neighbours: every entry the same with the
    switch on and off and by whole walks."""
    g = cfgmask.Grammar.from_json_schema(schema)
    vocab = _vocab(v)
    on = switch_entries(g, vocab, _core.flat_text_unused_enable, True, Strategy())
    same_entries(on, switch_entries(g, vocab, _core.flat_text_unused_enable, False, Strategy()), "off")
    same_entries(on, entries(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY)), "whole walks")

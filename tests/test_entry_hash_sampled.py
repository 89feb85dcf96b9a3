"""A bitset entry hashed to be interned over one 64-bit word of every four
(``_core.entry_hash_sampled_enable``, csrc/entry.c ``hash_bits_sampled``).

The hash only picks the interning table's slot; ``cm_entry_equal`` compares the whole content there.
So equal entries hash alike and meet whatever the hash reads, and two entries the sampled words do
not tell apart cost one compare more.  The references: the cache interns the same entries (its
bytes, which count each entry kept once) and every entry is the same with the sampling on and off,
over JSON Schemas whose first documents build several equal bitset entries (the numbers of
calculate_area's optional properties) and hypothesis small vocabularies; Llama-3's masks along
median JSONSchemaBench documents equal too."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .helpers import core_switch, masks_along, same_document_masks
from .test_donor_mode_bytes import llama3_document
from .test_entries import entries
from .test_listed_reuse import _same


def _sampled(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.entry_hash_sampled_enable, on)


def _build(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool) -> tuple[list, int]:
    with _sampled(on):
        c = cfgmask.compile(g, vocab)
        got = entries(c)
        return got, c._handle.cache_bytes


def _numbers(n: int, extra: bool) -> cfgmask.Grammar:
    props = {f"k{i}": {"type": "number"} for i in range(n)}
    schema = {"type": "object", "properties": props, "additionalProperties": extra}
    return cfgmask.Grammar.from_json_schema(json.dumps(schema))


# enough tokens that the digits' and a string's entries are bitsets (past an eighth of the words)
DIGITS = [str(i).encode() for i in range(1000)]
PIECES = [b'{"', b'"', b'":', b",", b',"', b"}", b"-", b".", b"e", b"k", b"0", b"1", b"k1", b"a", b" "]


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 5),
    extra=st.booleans(),
    picks=st.lists(st.sampled_from(PIECES), min_size=3, max_size=15),
    words=st.lists(st.text('ak01e.-"{},: ', min_size=1, max_size=5), max_size=40),
)
def test_entries_and_interning_same(n: int, extra: bool, picks: list[bytes], words: list[str]) -> None:
    """Hypothesis: objects of optional numbers over vocabularies of the thousand digit runs and
    small pieces: every entry and the cache's bytes (the entries interned) equal with the sampling
    on and off."""
    toks = list(dict.fromkeys([*DIGITS, *picks, *(w.encode() for w in words)]))
    vocab = cfgmask.Vocabulary.from_token_bytes([*toks, b""], stop_token_ids=[len(toks)])
    g = _numbers(n, extra)
    on, bytes_on = _build(g, vocab, True)
    off, bytes_off = _build(g, vocab, False)
    _same(on, off, "the whole hash")
    assert bytes_on == bytes_off


@pytest.mark.parametrize(
    ("split", "sid"),
    [("Glaiveai2K", "calculate_area_2540405e"), ("Snowplow", "sp_272_Normalized")],
)
def test_llama3_first_documents_same(split: str, sid: str) -> None:
    """Llama-3 along the first document of median JSONSchemaBench schemas: every mask, the cache's
    entries and bytes equal with the sampling on and off."""
    g, vocab, tokens = llama3_document(split, sid)
    masks, kept = {}, {}
    for on in (False, True):
        with _sampled(on):
            c = cfgmask.compile(g, vocab)
            masks[on] = masks_along(c, tokens)
            kept[on] = (c._handle.cache_entries, c._handle.cache_bytes)
    assert kept[True] == kept[False]
    same_document_masks([masks[False]], [masks[True]], [tokens])

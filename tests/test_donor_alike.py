"""A donor entry's subtree of a first byte where the state and its donor part, taken whole where
every token of it reads alike from both (csrc/donor.c ``alike_subtree``;
``_core.donor_alike_enable``).

A state's donor is the state most of its bytes lead to; the subtrees of the first bytes where the
two part were walked again.  An unanchored counted class (a key matching ``[0-9a-f]{32}``
somewhere) has a state per count, and a byte outside the class goes back to the first: every
count's donor is the first count's, and the class's bytes part them.  Read from both in step, a
token's two paths differ only along its run of the class, between states alike (one rule, accepting
alike, live on the same bytes), and meet after it -- unless the run reaches the end of the count.
The references: every state's entry with the take on equals it off and plain walks', under
hypothesis over classes, counts and small vocabularies, and the JSON Schema test's key; Llama-3
masks along o78129's document equal too."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core

from .helpers import core_switch
from .test_entries import WALKS_ONLY, entries
from .test_listed_reuse import _same


def _alike(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.donor_alike_enable, on)


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, **kw: object) -> tuple[list, int]:
    """Every state's entry, caches cleared, the take on or off; how many subtrees it took."""
    with _alike(on):
        n0 = _core.donor_alike_hits()
        got = entries(cfgmask.compile(g, vocab, **kw))
        return got, _core.donor_alike_hits() - n0


def _keyed(pattern: str, value: object = None) -> cfgmask.Grammar:
    schema = {"type": "object", "patternProperties": {pattern: {"type": "null"} if value is None else value}}
    return cfgmask.Grammar.from_json_schema(json.dumps(schema))


# tokens of no class byte (most of a real vocabulary): a donor walks at most a quarter of the trie
# again, so the class's first bytes must be a small part of it
FILLER = [bytes([a, b]) for a in b"ghkmpqrstuvwyz" for b in b"glnoz_ "]


def _check(g: cfgmask.Grammar, toks: list[bytes]) -> int:
    toks = list(dict.fromkeys(t for t in [*toks, *FILLER] if t))
    vocab = cfgmask.Vocabulary.from_token_bytes([*toks, b""], stop_token_ids=[len(toks)])
    on, hits = _entries(g, vocab, True)
    off, none = _entries(g, vocab, False)
    assert none == 0
    _same(on, off, "the take off")
    _same(on, _entries(g, vocab, True, _strategy=WALKS_ONLY)[0], "plain walks")
    return hits


HEX = [b"0", b"a", b"f", b"01", b"ab", b"fed", b"0123", b"abcde", b"9", b"dead", b"beef1", b"c0ffee"]
OTHER = [b"x", b"g", b"-", b"A", b"\\", b"\\u0030", b"\\u0061", b"\\u0041", b"\\n", b"\xc3\xa9", b" ", b"z0"]
CLOSE = [b'"', b'":', b'":null', b'":null}', b'":null,"', b'a"', b'ff":', b'0"', b'x"', b"}", b'{"', b","]


def test_hex_key_entries_same() -> None:
    """o78129's key, ``[0-9a-f]{12}`` unanchored: every state's entry equal with the take on, off
    and plain walks'; on, first bytes' subtrees were taken (the counts far from the end)."""
    hits = _check(_keyed("[0-9a-f]{12}"), [*HEX, *OTHER, *CLOSE, b"0a1b2c3d4e5f", b"abc-", b"ab\\u0030"])
    assert hits > 0


@given(
    cls=st.sampled_from(["[0-9a-f]", "[a-c]", "[0-9]", "x", "[^a]"]),
    n=st.integers(2, 9),
    anchored=st.booleans(),
    picks=st.lists(
        st.sampled_from([*HEX, *OTHER, *CLOSE, b"xx", b"ccc", b"aaaa", b"12345"]), min_size=4, max_size=24
    ),
    runs=st.lists(st.text('0123abcx-"', min_size=1, max_size=8), max_size=8),
)
def test_counted_class_entries_same(
    cls: str, n: int, anchored: bool, picks: list[bytes], runs: list[str]
) -> None:
    """Hypothesis: a key with a counted class somewhere (or the whole key), small vocabularies of
    class runs, other bytes and closing pieces: every entry equal with the take on, off and plain
    walks'."""
    pattern = f"{cls}{{{n}}}"
    _check(_keyed(f"^{pattern}$" if anchored else pattern), [*picks, *(r.encode() for r in runs)])


def test_llama3_o78129_masks_same() -> None:
    """Llama-3 along o78129's document: every mask equal with the take on and off, and subtrees
    taken."""
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    doc = {"checksums": {"0123456789abcdef0123456789abcdef": None, "fedcba9876543210fedcba9876543210": None}}
    tokens = enc.encode(json.dumps(doc, separators=(",", ":")))
    vocab = cfgmask.Vocabulary.llama3()
    schema = {"properties": {"checksums": {"patternProperties": {"[0-9a-f]{32}": {"type": "null"}}}}}
    g = cfgmask.Grammar.from_json_schema(json.dumps(schema))
    masks = {}
    for on in (False, True):
        with _alike(on):
            n0 = _core.donor_alike_hits()
            m = cfgmask.Matcher(cfgmask.compile(g, vocab))
            row = cfgmask.allocate_bitmask(1, vocab.size)
            got = []
            for t in tokens:
                m.fill_bitmask(row, 0)
                got.append(np.array(row).copy())
                assert m.accept_token(t)
            masks[on] = got
            if on:
                assert _core.donor_alike_hits() - n0 > 100
    for i, (x, y) in enumerate(zip(masks[False], masks[True], strict=True)):
        assert np.array_equal(x, y), f"mask {i} differs"

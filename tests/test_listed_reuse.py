"""A composed entry's listed walk takes the upward filter's item chart (csrc/walk.c,
``listed_chart``; ``_core.listed_reuse_enable``).

``cm_compose`` walks its candidates through the chart of its state's item; that chart is the one
the filter resets for the same item, so the walk takes it, reset to the item's closure, instead of
opening and freeing a chart of its own (its closure memo and waiter index kept from walk to walk,
checked against the sets' versions).  After a value in an object of many optional properties
(Snowplow's sp_339 after ``"br_cookies":true``) one mask composes ~160 entries, a walk each.  The
references: every state's entry with the reuse on equals it off and plain walks'; masks along a
document equal too; the walks take the chart on and never off."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager

import numpy as np
import pytest

import cfgmask
from cfgmask import _core

from .helpers import core_switch, masks_along
from .test_entries import WALKS_ONLY, entries


def _reuse(on: bool) -> AbstractContextManager[None]:
    return core_switch(_core.listed_reuse_enable, on)


def _optional_object(n: int) -> dict:
    """n optional properties of mixed types, in order: each property's rest a rule calling the next."""
    kinds = [
        {"type": "boolean"},
        {"type": "number"},
        {"type": "string", "maxLength": 20},
        {"type": ["integer", "null"]},
        {"type": "object", "properties": {"x": {"type": "boolean"}}},
    ]
    props = {f"p{i:02d}_{'abcde'[i % 5]}": kinds[i % len(kinds)] for i in range(n)}
    return {"type": "object", "properties": props, "additionalProperties": False}


def _entries(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, on: bool, **kw: object) -> tuple[list, int]:
    """Every state's entry, caches cleared, the reuse on or off; the walks that took the chart."""
    with _reuse(on):
        n0 = _core.listed_reused()
        got = entries(cfgmask.compile(g, vocab, **kw))
        return got, _core.listed_reused() - n0


def _same(a: list, b: list, what: str) -> None:
    differ = [
        s
        for s, (x, y) in enumerate(zip(a, b, strict=True))
        if not (np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1]))
    ]
    assert not differ, f"states {differ[:8]}: entries differ from {what}"


VOCAB = [
    b"{",
    b"}",
    b'{"',
    b'"',
    b'",',
    b'","',
    b",",
    b',"',
    b":",
    b'":',
    b"true",
    b"false",
    b"null",
    b"true,",
    b'true,"',
    b'1,"',
    b"12",
    b"1",
    b"0",
    b".5",
    b"e",
    b"}}",
    b'},"',
    b"p",
    b"p0",
    b"p01",
    b"_a",
    b"_b",
    b"_c",
    b"a",
    b"b",
    b"x",
    b" ",
    b'"p',
    b'"p0',
    b',"p1',
    b',"p0',
    b"1_b",
    b"2_c",
    b"3_d",
    b"4_e",
    b"0_a",
    b'0_a":',
]


@pytest.mark.parametrize("n", [6, 17])
def test_optional_chain_entries_same(n: int) -> None:
    """A small vocabulary of the object's pieces: every state's entry with the reuse on equals it
    off and plain walks'; on, listed walks took the chart, off none."""
    g = cfgmask.Grammar.from_json_schema(json.dumps(_optional_object(n)))
    vocab = cfgmask.Vocabulary.from_token_bytes([*VOCAB, b""], stop_token_ids=[len(VOCAB)])
    on, taken = _entries(g, vocab, True)
    off, none = _entries(g, vocab, False)
    assert taken > 0 and none == 0, (taken, none)
    _same(on, off, "the reuse off")
    _same(on, _entries(g, vocab, True, _strategy=WALKS_ONLY)[0], "plain walks")


def test_llama3_optional_chain_masks_same() -> None:
    """Llama-3 along an instance of 40 optional properties (values of every kind, then the same
    object again nested): every mask, and every state's entry, equal with the reuse on and off,
    and the masks equal plain walks'."""
    llama3_chain_masks_same(_reuse, _core.listed_reused, 20)


def llama3_chain_masks_same(
    switch: Callable[[bool], AbstractContextManager[None]], counter: Callable[[], int], least: int
) -> None:
    """Llama-3's masks along an instance of 40 optional properties equal with ``switch`` on, off
    and plain walks'; with it on, ``counter`` moves by more than ``least``."""
    quicktok = pytest.importorskip("quicktok")
    enc = quicktok.get_encoding("llama3")
    doc = {"p00_a": True, "p01_b": 12.5, "p02_c": 'Re,"x', "p08_d": None, "p09_e": {"x": False}}
    doc |= {"p11_b": -3, "p17_c": "", "p18_d": 7, "p36_b": 0.25, "p39_e": {}}
    tokens = enc.encode(json.dumps(doc, separators=(",", ":")))
    vocab = cfgmask.Vocabulary.llama3()
    g = cfgmask.Grammar.from_json_schema(json.dumps(_optional_object(40)))
    masks = {}
    for mode in ("plain", "off", "on"):
        with switch(mode != "off"):
            n0 = counter()
            kw = {"_strategy": WALKS_ONLY} if mode == "plain" else {}
            masks[mode] = masks_along(cfgmask.compile(g, vocab, **kw), tokens, final=True)
            if mode == "on":
                assert counter() - n0 > least
    for mode in ("off", "on"):
        assert len(masks[mode]) == len(masks["plain"])
        for i, (x, y) in enumerate(zip(masks["plain"], masks[mode], strict=True)):
            assert np.array_equal(x, y), f"{mode}: mask {i} differs"

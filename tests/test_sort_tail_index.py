"""Lists sorted by radix (csrc/fsm.c ``cm_sort_unique_u32``); tail parts found by an index.

The composed entries gather their candidates (the tail parts' and the parts' uncertain trie
entries, a few hundred each) and sort them with repeats dropped; qsort called its comparator
per pair.  A list of 64 or more now goes through an LSD radix sort, 8 bits a pass, as many
passes as its largest value needs.  ``_core.radix_sort_enable`` switches it (on by default,
off: qsort, the reference); ``radix_sorts()`` counts the lists so sorted.  Checked: the sort
itself on hypothesis lists (repeats, sorted runs, values up to 2^32 - 1, lengths about the
threshold) against Python's; every state's entry of sql.lark with Llama-3 on, off and by whole
walks; bench_gbnf's documents of sql.lark, sql and c cold, in order, on and off.

The tail parts (csrc/compose.c) a grammar's cache keeps were found by a scan of them all per
ask; an index by (callee start, byte) finds them now.  ``_core.tail_index_enable`` switches it
(off: the scan, the reference); the same entries and masks are checked with it on and off.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .helpers import core_switch, masks_along, same_document_masks, same_entries
from .test_compose_self import switch_entries
from .test_entries import WALKS_ONLY, _longest_tokens, shipped


def _sorted(values: list[int], on: bool) -> tuple[list[int], int]:
    a = np.array(values, dtype=np.uint32)
    before = _core.radix_sorts()
    with core_switch(_core.radix_sort_enable, on):
        n = _core.sort_unique_u32(a)
    return a[:n].tolist(), _core.radix_sorts() - before


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.integers(0, 300),
            st.integers(0, 1 << 17),
            st.integers(0, (1 << 32) - 1),
            st.sampled_from([0, 255, 256]),
        ),
        max_size=400,
    )
)
def test_sort_unique_equals_pythons(values: list[int]) -> None:
    want = sorted(set(values))
    for on in (True, False):
        got, radix = _sorted(values, on)
        assert got == want, on
        unsorted = any(a > b for a, b in zip(values, values[1:], strict=False))
        assert radix == (on and unsorted and len(values) >= 64), (on, len(values))


def test_sort_edges() -> None:
    """The threshold, a single pass's values, the top byte, all equal, descending."""
    cases = [
        list(range(63, -1, -1)),
        list(range(64, -1, -1)),
        [5] * 100 + [4],
        [(1 << 32) - 1 - i for i in range(100)],
        [i * 256 for i in range(100, 0, -1)],
        [(i % 7) << 24 for i in range(200)],
    ]
    for values in cases:
        got, radix = _sorted(values, True)
        assert got == sorted(set(values))
        assert radix == (len(values) >= 64)


SWITCHES = {
    "radix": (_core.radix_sort_enable, _core.radix_sorts),
    "tail_index": (_core.tail_index_enable, None),
}


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_sql_lark_same_entries(switch: str) -> None:
    """Every state of sql.lark with Llama-3, on and off, and equal to whole walks; lists sorted
    by radix with it on (none while off)."""
    enable, counter = SWITCHES[switch]
    vocab = cfgmask.Vocabulary.llama3()
    g = shipped("sql.lark")
    before = counter() if counter else 0
    on = switch_entries(g, vocab, enable, True, Strategy())
    if counter:
        assert counter() > before
        before = counter()
    same_entries(on, switch_entries(g, vocab, enable, False, Strategy()), "switch off")
    if counter:
        assert counter() == before, "sorted by radix while off"
    same_entries(on, switch_entries(g, vocab, enable, True, WALKS_ONLY), "whole walks")


@pytest.mark.parametrize("switch", sorted(SWITCHES))
@pytest.mark.parametrize("name", ["sql.lark", "sql", "c"])
def test_documents_cold_pass_same_masks(name: str, switch: str) -> None:
    """bench_gbnf's cold pass: the grammar compiled once, its documents in order from cold caches;
    every mask the same with the switch on and off."""
    from benchmarks.documents import DOCUMENTS

    enable, counter = SWITCHES[switch]
    vocab = cfgmask.Vocabulary.llama3()
    g = shipped(name if name.endswith(".lark") else f"{name}.gbnf")
    docs = [_longest_tokens(vocab, d.encode()) for d in DOCUMENTS[name.removesuffix(".lark")]()]
    out = {}
    for on in (True, False):
        before = counter() if counter else 0
        with core_switch(enable, on):
            compiled = cfgmask.compile(g, vocab)
            out[on] = [masks_along(compiled, doc) for doc in docs]
        if counter:
            assert (counter() > before) == on, (name, on)
    same_document_masks(out[True], out[False], docs)

"""The fixed costs of an entry build (csrc/cache.c build_entry, csrc/walk.c): a walk's bitset.

Most entries accept fewer tokens than the bitset has words and are kept as sorted ids; taking
the ids out leaves the bitset zero (``cm_bits_take``), and the next build of the grammar walks
into it instead of a fresh 16 KB calloc.  A bit left behind would surface in a later entry, so
here entries are built in shuffled order (each state's walk inherits another state's bitset)
and compared, bit for bit, with the whole walks of ``WALKS_ONLY``, and the counter shows the
spare bitsets were taken.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import cfgmask
from cfgmask import _core
from cfgmask.compile.strategy import Strategy

from .test_entries import WALKS_ONLY, entries, shipped

BENCH = Path(__file__).resolve().parent / "corpora" / "jsonschemabench"


def _schemas(split: str, n: int) -> list[str]:
    rows = [json.loads(line) for line in (BENCH / f"{split}.jsonl").read_text().splitlines() if line.strip()]
    return [json.dumps(r["schema"]) for r in rows[:n]]


def _same_entries_shuffled(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, seed: int) -> int:
    """Every state's entry, built in a shuffled order, equal to the whole walk's: the spare
    bitsets taken meanwhile."""
    cfgmask.clear_caches()
    fast = cfgmask.compile(g, vocab, _strategy=Strategy())
    slow = cfgmask.compile(g, vocab, _strategy=WALKS_ONLY)
    states = list(range(fast.tables.n_states))
    np.random.default_rng(seed).shuffle(states)
    before = _core.entry_spare_takes()
    got = {s: fast._handle.entry(s) for s in states}
    taken = _core.entry_spare_takes() - before
    for s, want in enumerate(entries(slow)):
        assert np.array_equal(got[s][0], want[0]), f"state {s}: accepted tokens differ"
        assert np.array_equal(got[s][1], want[1]), f"state {s}: uncertain tokens differ"
    return taken


@pytest.mark.parametrize("split", ["Glaiveai2K", "WashingtonPost", "Github_easy"])
def test_json_schemas_spare_bitsets_same_entries(split: str) -> None:
    vocab = cfgmask.Vocabulary.llama3()
    taken = 0
    for k, text in enumerate(_schemas(split, 3)):
        taken += _same_entries_shuffled(cfgmask.Grammar.from_json_schema(text), vocab, k)
    assert taken > 0


@pytest.mark.parametrize("name", ["json.gbnf", "arithmetic.gbnf"])
def test_shipped_grammars_spare_bitsets_same_entries(name: str) -> None:
    assert _same_entries_shuffled(shipped(name), cfgmask.Vocabulary.llama3(), 3) > 0


def test_first_document_takes_spare_bitsets() -> None:
    """MaskBench's path: a cold compile, then masks along a document; every mask equal to the
    mask of a compile whose entries are all whole walks."""
    vocab = cfgmask.Vocabulary.llama3()
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array"}},
        "required": ["name", "age"],
    }
    g = cfgmask.Grammar.from_json_schema(json.dumps(schema))
    doc = b'{"name":"Ada Lovelace","age":36,"tags":["math",1,{"a":null}]}'
    cfgmask.clear_caches()
    before = _core.entry_spare_takes()
    fast = cfgmask.Matcher(cfgmask.compile(g, vocab))
    slow = cfgmask.Matcher(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY))
    a, b = cfgmask.allocate_bitmask(1, vocab.size), cfgmask.allocate_bitmask(1, vocab.size)
    for i in range(len(doc) + 1):
        fast.fill_bitmask(a, 0)
        slow.fill_bitmask(b, 0)
        assert np.array_equal(a, b), f"mask {i} differs"
        if i < len(doc):
            assert fast.accept_bytes(doc[i : i + 1]) and slow.accept_bytes(doc[i : i + 1])
    assert _core.entry_spare_takes() > before


# ---- the row zeroed lazily (csrc/mask.c): the first bitset entry copied over it ----


def _rows_along(g: cfgmask.Grammar, vocab: cfgmask.Vocabulary, doc: bytes) -> tuple[int, int]:
    """Every mask along ``doc`` into a row full of stale bits (-1, and a wider row's tail)
    equals the mask of a compile whose entries are whole walks, filled into zeros; how many
    masks copied their first entry and how many did not."""
    cfgmask.clear_caches()
    fast = cfgmask.Matcher(cfgmask.compile(g, vocab))
    slow = cfgmask.Matcher(cfgmask.compile(g, vocab, _strategy=WALKS_ONLY))
    width = (vocab.size + 31) // 32
    copied = plain = 0
    for i in range(len(doc) + 1):
        stale = np.full((2, width + 3), -1, dtype=np.int32)
        fast.fill_bitmask(stale, 1)
        want = np.zeros((1, width), dtype=np.int32)
        slow.fill_bitmask(want, 0)
        assert np.array_equal(stale[1, :width], want[0]), f"mask {i} differs"
        assert not stale[1, width:].any() and (stale[0] == -1).all()
        if fast._h.mask_stats()["copied"]:
            copied += 1
        else:
            plain += 1
        if i < len(doc):
            assert fast.accept_bytes(doc[i : i + 1]) and slow.accept_bytes(doc[i : i + 1])
    return copied, plain


def test_json_schema_rows_zeroed_lazily() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "n": {"type": "number"},
            "kind": {"enum": ["a", "b", 3]},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["name", "n"],
    }
    doc = b'{"name":"Ada \\"L\\"","n":-1.5e3,"kind":3,"tags":["x","yz"]}'
    g = cfgmask.Grammar.from_json_schema(json.dumps(schema))
    copied, plain = _rows_along(g, cfgmask.Vocabulary.llama3(), doc)
    assert copied > 0 and plain > 0


@pytest.mark.parametrize(
    ("name", "doc"),
    [("arithmetic.gbnf", b"(1 + 23) * 4 - 5"), ("json.gbnf", b'{"a": [1, true, "x"], "b": null}')],
)
def test_shipped_grammars_rows_zeroed_lazily(name: str, doc: bytes) -> None:
    copied, plain = _rows_along(shipped(name), cfgmask.Vocabulary.llama3(), doc)
    assert copied + plain == len(doc) + 1


def test_number_entries_kept_as_bitsets() -> None:
    """Inside an integer the state accepts Llama-3's ~1,130 digit tokens: past an eighth of the
    bitset's words (csrc/walk.c CM_IDS_FRACTION) that entry is a bitset, so the mask copies it
    (one pass) instead of setting 1,130 scattered bits; and the masks along the number equal the
    whole walks'."""
    vocab = cfgmask.Vocabulary.llama3()
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    g = cfgmask.Grammar.from_json_schema(json.dumps(schema))
    copied, _ = _rows_along(g, vocab, b'{"a":-1234567}')
    assert copied > 0
    cfgmask.clear_caches()
    m = cfgmask.Matcher(cfgmask.compile(g, vocab))
    assert m.accept_bytes(b'{"a":12')
    m.fill_bitmask(cfgmask.allocate_bitmask(1, vocab.size), 0)
    assert m._h.mask_stats()["copied"]

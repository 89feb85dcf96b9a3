"""``MatcherHandle.fill_row`` reading an exact numpy array's fields in place (no buffer request):
the same words, the same rows and the same errors as the buffer request and the checked row
view, with the counter ``_core.fill_row_fast_fills()`` showing which arrays took it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import cfgmask
from cfgmask import _core
from cfgmask.matcher import _row

ROOT = Path(__file__).parent.parent

DOCS = [b"", b'{"a": [1, 2, {"b": "x', b"[tru", b'"hello w\xc3', b'{"k": 12.5e', b"-0."]


@pytest.fixture(scope="module")
def json_llama3():
    pytest.importorskip("quicktok")
    vocab = cfgmask.Vocabulary.llama3()
    return cfgmask.compile(cfgmask.Grammar.from_gbnf((ROOT / "grammars" / "json.gbnf").read_text()), vocab)


@pytest.fixture(autouse=True)
def fields_back_on():
    yield
    assert _core.fill_row_fields(True)


def _matcher(compiled, doc):
    m = cfgmask.Matcher(compiled)
    assert m.accept_bytes(doc), doc
    return m


def _reference(m):
    """The mask through the typed-memoryview path (no fill_row at all), into a zeroed 1-D row."""
    row = np.zeros((m.compiled.vocab_size + 31) // 32, dtype=np.int32)
    m._h.fill_mask(row)
    return row


class _Sub(np.ndarray):
    pass


def _arrays(words):
    """(name, array, row, takes the in-place way): every array starts as -1 (stale bits)."""

    def full(shape, dtype=np.int32, order="C"):
        return np.full(shape, -1, dtype=np.int64, order=order).astype(dtype, order=order)

    read_only = full((1, words))
    read_only.flags.writeable = False
    return [
        ("allocated", full((1, words)), 0, True),
        ("last row", full((4, words)), 3, True),
        ("middle row", full((4, words)), 1, True),
        ("wider", full((3, words + 7)), 2, True),
        ("fortran one row", full((1, words), order="F"), 0, True),  # C-contiguous too
        ("strided rows", full((5, words))[::2], 1, False),
        ("columns cut", full((2, words + 3))[:, 3:], 1, False),
        ("fortran", full((3, words), order="F"), 1, False),
        ("subclass", full((2, words)).view(_Sub), 1, False),
        ("big-endian", full((2, words), dtype=">i4"), 1, False),
        ("int64", full((1, words), dtype=np.int64), 0, False),
        ("uint32", full((1, words), dtype=np.uint32), 0, False),
        ("one-d", full(words), 0, False),
        ("three-d", full((1, 1, words)), 0, False),
        ("narrow", full((1, words - 1)), 0, False),
        ("row past the end", full((2, words)), 2, False),
        ("negative row", full((2, words)), -1, False),
        ("huge row", full((2, words)), 1 << 70, False),
        ("numpy row", full((2, words)), np.int64(1), False),
        ("bool row", full((2, words)), True, False),
        ("read-only", read_only, 0, False),
    ]


def _fill(m, array, row):
    """The array after m.fill_bitmask(array, row), or the error it raised (type, message)."""
    try:
        m.fill_bitmask(array, row)
    except Exception as e:  # noqa: BLE001 - the error itself is what is compared
        return (type(e), str(e))
    return np.array(array, copy=True)


def test_layout_checked_and_trusted():
    """numpy's object layout passes the check on this platform (else nothing here is tested)."""
    assert _core.fill_row_fields(True)


@pytest.mark.parametrize("doc", DOCS)
def test_fields_in_place_equal_buffer_request(json_llama3, doc):
    m = _matcher(json_llama3, doc)
    want = _reference(m)
    words = want.shape[0]
    for (name, on_array, row, fast), (_, off_array, _, _) in zip(_arrays(words), _arrays(words), strict=True):
        assert _core.fill_row_fields(True)
        before = _core.fill_row_fast_fills()
        on = _fill(m, on_array, row)
        took = _core.fill_row_fast_fills() - before
        assert took == (1 if fast else 0), name
        assert not _core.fill_row_fields(False)
        before = _core.fill_row_fast_fills()
        off = _fill(m, off_array, row)
        assert _core.fill_row_fast_fills() == before, name
        if isinstance(off, tuple):
            assert on == off, name
            continue
        assert isinstance(on, np.ndarray), (name, on)
        assert np.array_equal(on, off), name
        if fast:
            # the row written whole (stale bits of the wider words cleared), the others untouched
            r = int(row)
            assert np.array_equal(on[r, :words], want), name
            assert not on[r, words:].any(), name
            assert (np.delete(on, r, axis=0) == -1).all(), name


def test_matcher_steps_take_fields_in_place(json_llama3):
    """A document replayed with the allocated bitmask: every mask through the in-place way,
    each equal to the typed-memoryview path's."""
    m = cfgmask.Matcher(json_llama3)
    mask = cfgmask.allocate_bitmask(2, json_llama3.vocab_size)
    text = b'{"k": [1, 2.5, "x y", true, null]}'
    before = _core.fill_row_fast_fills()
    steps = 0
    for b in text:
        mask[:] = -1
        m.fill_bitmask(mask, 1)
        assert np.array_equal(mask[1], _reference(m))
        assert (mask[0] == -1).all()
        assert m.accept_bytes(bytes([b]))
        steps += 1
    assert _core.fill_row_fast_fills() - before == steps


def test_row_view_path_unchanged(json_llama3):
    """The checked row view (``_row``) of an allocated array still fills the same row."""
    m = _matcher(json_llama3, DOCS[1])
    a = cfgmask.allocate_bitmask(3, json_llama3.vocab_size)
    m._h.fill_mask(_row(a, 2, json_llama3.vocab_size))
    b = cfgmask.allocate_bitmask(3, json_llama3.vocab_size)
    m.fill_bitmask(b, 2)
    assert np.array_equal(a, b)

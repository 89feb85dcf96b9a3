"""apply_bitmask_inplace against a naive loop; fill_bitmasks on threads against serial fills."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import cfgmask
from cfgmask.bitmask import apply_bitmask_inplace, fill_bitmasks, unpack_bitmask
from cfgmask.matcher import _row

ROOT = Path(__file__).parent.parent


def naive(logits: np.ndarray, bitmask: np.ndarray, indices=None) -> np.ndarray:
    """The spec, one token at a time: token t of a masked row stays iff bit t%32 of word t//32
    is set (a token past the bitmask's 32 * words bits is blocked)."""
    out = np.array(logits, dtype=np.float64, copy=True)
    rows = range(out.shape[0]) if indices is None else indices
    words = bitmask.shape[1]
    for r in rows:
        for t in range(out.shape[1]):
            allowed = t < 32 * words and (int(bitmask[r, t // 32]) >> (t % 32)) & 1
            if not allowed:
                out[r, t] = -np.inf
    return out


def random_case(rng, batch: int, width: int, words: int, density: float):
    logits = rng.standard_normal((batch, width)).astype(np.float32)
    bits = rng.random((batch, words * 32)) < density
    bitmask = np.packbits(bits, axis=1, bitorder="little").view("<i4").astype(np.int32)
    return logits, bitmask


SHAPES = [
    (1, 1, 1),
    (1, 32, 1),
    (2, 33, 2),  # one bit of the last word used
    (3, 100, 4),  # logits narrower than the mask
    (2, 70, 2),  # logits wider than the mask: padded vocabulary
    (4, 257, 5),
    (5, 1000, 32),
]


@pytest.mark.parametrize("batch,width,words", SHAPES)
@pytest.mark.parametrize("density", [0.0, 0.3, 1.0])
def test_numpy_equals_naive(batch, width, words, density):
    rng = np.random.default_rng(batch * 1000 + width + int(10 * density))
    logits, bitmask = random_case(rng, batch, width, words, density)
    want = naive(logits, bitmask)
    for dtype in (np.float16, np.float32, np.float64):
        got = logits.astype(dtype)
        apply_bitmask_inplace(got, bitmask)
        assert np.array_equal(got, want.astype(dtype)), dtype


@pytest.mark.parametrize("batch,width,words", SHAPES)
def test_numpy_indices(batch, width, words):
    rng = np.random.default_rng(width)
    logits, bitmask = random_case(rng, batch, width, words, 0.5)
    for indices in ([], [0], list(range(batch))[::2], [batch - 1]):
        got = logits.copy()
        apply_bitmask_inplace(got, bitmask, indices=indices)
        assert np.array_equal(got, naive(logits, bitmask, indices).astype(np.float32)), indices


def test_one_dimensional_and_views():
    rng = np.random.default_rng(3)
    logits, bitmask = random_case(rng, 1, 90, 3, 0.5)
    row = logits[0].copy()
    apply_bitmask_inplace(row, bitmask[0])
    assert np.array_equal(row, naive(logits, bitmask)[0].astype(np.float32))
    big = np.zeros((2, 180), dtype=np.float32)
    big[:, ::2] = np.repeat(logits, 2, axis=0)
    view = big[:, ::2]  # strided rows: written in place through the view
    apply_bitmask_inplace(view, np.repeat(bitmask, 2, axis=0))
    assert np.array_equal(big[0, ::2], naive(logits, bitmask)[0].astype(np.float32))
    assert (big[:, 1::2] == 0).all()


def test_errors():
    logits = np.zeros((2, 64), dtype=np.float32)
    with pytest.raises(TypeError, match="int32"):
        apply_bitmask_inplace(logits, np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="rows"):
        apply_bitmask_inplace(logits, np.zeros((3, 2), dtype=np.int32))
    with pytest.raises(IndexError):
        apply_bitmask_inplace(logits, np.zeros((2, 2), dtype=np.int32), indices=[2])
    with pytest.raises(TypeError, match="float"):
        apply_bitmask_inplace(np.zeros((2, 64), dtype=np.int32), np.zeros((2, 2), dtype=np.int32))
    with pytest.raises(TypeError):
        apply_bitmask_inplace([[0.0] * 64], np.zeros((1, 2), dtype=np.int32))


def test_unpack_bitmask():
    mask = np.array([[1 | (1 << 31), 0b100]], dtype=np.uint32).view(np.int32)
    bits = unpack_bitmask(mask, 70)
    assert np.flatnonzero(bits[0]).tolist() == [0, 31, 34]
    assert bits.shape == (1, 70)


# ---- torch ----------------------------------------------------------------------------------


@pytest.mark.parametrize("batch,width,words", SHAPES)
def test_torch_cpu_equals_naive(batch, width, words):
    torch = pytest.importorskip("torch")
    from cfgmask.torch_ops import apply_bitmask_inplace_torch

    rng = np.random.default_rng(7 * width + batch)
    logits, bitmask = random_case(rng, batch, width, words, 0.4)
    want = naive(logits, bitmask)
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        expected = torch.from_numpy(want).to(dtype)
        # the public entry point (numpy view for numpy dtypes, torch ops for bfloat16) ...
        got = torch.from_numpy(logits).to(dtype)
        apply_bitmask_inplace(got, torch.from_numpy(bitmask))
        assert torch.equal(got, expected), dtype
        # ... and the torch kernel itself, as it runs on CUDA
        got = torch.from_numpy(logits).to(dtype)
        apply_bitmask_inplace_torch(got, bitmask)
        assert torch.equal(got, expected), dtype
        for indices in ([], [0], list(range(batch))[1::2]):
            expected_rows = torch.from_numpy(naive(logits, bitmask, indices)).to(dtype)
            got = torch.from_numpy(logits).to(dtype)
            apply_bitmask_inplace_torch(got, bitmask, indices=indices)
            assert torch.equal(got, expected_rows), (dtype, indices)
            got = torch.from_numpy(logits).to(dtype)
            apply_bitmask_inplace(got, bitmask, indices=torch.tensor(indices, dtype=torch.long))
            assert torch.equal(got, expected_rows), (dtype, indices)


def test_torch_non_contiguous_and_1d():
    torch = pytest.importorskip("torch")
    from cfgmask.torch_ops import apply_bitmask_inplace_torch

    rng = np.random.default_rng(11)
    logits, bitmask = random_case(rng, 2, 77, 3, 0.5)
    want = torch.from_numpy(naive(logits, bitmask).astype(np.float32))
    big = torch.zeros(2, 154)
    big[:, ::2] = torch.from_numpy(logits)
    apply_bitmask_inplace_torch(big[:, ::2], bitmask)
    assert torch.equal(big[:, ::2], want) and (big[:, 1::2] == 0).all()
    row = torch.from_numpy(logits[1].copy())
    apply_bitmask_inplace_torch(row, torch.from_numpy(bitmask[1]))
    assert torch.equal(row, want[1])
    with pytest.raises(TypeError):
        apply_bitmask_inplace_torch(torch.zeros(2, 77, dtype=torch.int64), bitmask)


def test_import_cfgmask_does_not_import_torch():
    import subprocess
    import sys

    code = (
        "import sys, cfgmask, cfgmask.bitmask, numpy as np\n"
        "cfgmask.apply_bitmask_inplace(np.zeros((1, 40), np.float32), np.zeros((1, 2), np.int32))\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- fill_bitmasks --------------------------------------------------------------------------

DOCS = [
    b"",
    b'{"a": [1, 2, {"b": "x',
    b"[tru",
    b'"hello w\xc3',
    b'{"k": 12.5e',
    b"[[[[",
    b'{"x": {"y": [null, ',
    b"-0.",
]


@pytest.fixture(scope="module")
def json_llama3():
    pytest.importorskip("quicktok")
    vocab = cfgmask.Vocabulary.llama3()
    return cfgmask.compile(cfgmask.Grammar.from_gbnf((ROOT / "grammars" / "json.gbnf").read_text()), vocab)


def _matchers(compiled, docs):
    out = []
    for d in docs:
        m = cfgmask.Matcher(compiled)
        assert m.accept_bytes(d), d
        out.append(m)
    return out


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_fill_bitmasks_equals_serial(json_llama3, threads):
    matchers = _matchers(json_llama3, DOCS * 3)
    serial = cfgmask.allocate_bitmask(len(matchers), json_llama3.vocab_size)
    for i, m in enumerate(matchers):
        m.fill_bitmask(serial, i)
    parallel = cfgmask.allocate_bitmask(len(matchers), json_llama3.vocab_size)
    parallel[:] = -1  # every word must be written
    fill_bitmasks(matchers, parallel, threads=threads)
    assert np.array_equal(parallel, serial)


def test_fill_bitmasks_rows_and_checks(json_llama3):
    matchers = _matchers(json_llama3, DOCS[:3])
    mask = cfgmask.allocate_bitmask(10, json_llama3.vocab_size)
    fill_bitmasks(matchers, mask, rows=[9, 0, 4], threads=2)
    for m, r in zip(matchers, [9, 0, 4], strict=True):
        one = cfgmask.allocate_bitmask(1, json_llama3.vocab_size)
        m.fill_bitmask(one)
        assert np.array_equal(mask[r], one[0])
    assert not mask[[1, 2, 3, 5, 6, 7, 8]].any()
    with pytest.raises(ValueError, match="distinct"):
        fill_bitmasks(matchers[:2], mask, rows=[1, 1])
    with pytest.raises(ValueError, match="twice"):
        fill_bitmasks([matchers[0], matchers[0]], mask)
    with pytest.raises(IndexError, match="out of range"):
        fill_bitmasks(matchers[:1], mask, rows=[10])
    with pytest.raises(ValueError, match="words"):
        fill_bitmasks(matchers[:1], np.zeros((1, 10), dtype=np.int32))
    with pytest.raises(TypeError, match="int32"):
        fill_bitmasks(matchers[:1], np.zeros((1, 5000), dtype=np.int64))
    with pytest.raises(ValueError, match="shape"):
        fill_bitmasks(matchers[:1], np.zeros((1, 1, 5000), dtype=np.int32))
    with pytest.raises(TypeError, match="numpy array"):
        fill_bitmasks(matchers[:1], [[0] * 5000])
    fill_bitmasks([], mask)  # nothing to do


def _slow_fill(m, bitmask, row=0):
    """What Matcher.fill_bitmask did before its one-call path: check, take the row, fill it."""
    m._h.fill_mask(_row(bitmask, row, m.compiled.vocab_size))


def test_fill_bitmask_one_call_path_equals_row_path(json_llama3):
    """A 2-D int32 numpy row is filled by one Cython call (``MatcherHandle.fill_row``): the
    same words as the checked row view, every word written, wider rows included."""
    for m in _matchers(json_llama3, DOCS):
        for width in (json_llama3.vocab_size, json_llama3.vocab_size + 100):
            fast = cfgmask.allocate_bitmask(3, width)
            fast[:] = -1
            m.fill_bitmask(fast, 2)
            slow = cfgmask.allocate_bitmask(3, width)
            slow[:] = -1
            _slow_fill(m, slow, 2)
            assert np.array_equal(fast, slow)
            assert (fast[:2] == -1).all()


def test_fill_bitmask_other_buffers_take_the_checked_path(json_llama3):
    """What the one-call path does not take (read-only, strided, 1-D, other dtypes, a row out of
    range, too narrow, a numpy integer row) goes through the checks as before: converted or the
    same error."""
    m = _matchers(json_llama3, DOCS[1:2])[0]
    want = cfgmask.allocate_bitmask(1, json_llama3.vocab_size)
    _slow_fill(m, want)
    one_d = np.full(want.shape[1], -1, dtype=np.int32)
    m.fill_bitmask(one_d)
    assert np.array_equal(one_d, want[0])
    strided = np.full((3, want.shape[1]), -1, dtype=np.int32)[::2]  # rows contiguous, apart
    m.fill_bitmask(strided, 1)
    assert np.array_equal(strided[1], want[0])
    wide = cfgmask.allocate_bitmask(2, json_llama3.vocab_size)
    m.fill_bitmask(wide, np.int64(1))
    assert np.array_equal(wide[1], want[0])
    read_only = cfgmask.allocate_bitmask(1, json_llama3.vocab_size)
    read_only.flags.writeable = False
    for bad, row in (
        (np.zeros((1, want.shape[1]), dtype=np.int64), 0),
        (np.zeros((1, 10), dtype=np.int32), 0),
        (np.zeros((2, want.shape[1]), dtype=np.int32), 2),
        (np.zeros((2, want.shape[1]), dtype=np.int32), -1),
        (np.zeros((2, want.shape[1]), dtype=np.int32), 1 << 70),
        (np.zeros((1, 1, want.shape[1]), dtype=np.int32), 0),
        (read_only, 0),
    ):
        errors = []
        for fill in (_slow_fill, lambda m, a, r: m.fill_bitmask(a, r)):
            with pytest.raises(Exception) as e:
                fill(m, bad, row)
            errors.append((type(e.value), str(e.value)))
        assert errors[0] == errors[1]


def test_fill_bitmasks_torch_cpu_buffer(json_llama3):
    torch = pytest.importorskip("torch")
    matchers = _matchers(json_llama3, DOCS[:4])
    mask = torch.zeros((4, (json_llama3.vocab_size + 31) // 32), dtype=torch.int32)
    fill_bitmasks(matchers, mask, threads=2)
    ref = cfgmask.allocate_bitmask(4, json_llama3.vocab_size)
    fill_bitmasks(matchers, ref, threads=1)
    assert np.array_equal(mask.numpy(), ref)

"""apply_bitmask_inplace (the C kernel of csrc/apply.c, and the torch-ops path that runs on CUDA)
against a plain numpy reference, bit for bit, for every logits dtype and layout; and hostile
input, which must raise a clear exception before anything is written.

The reference works on the logits' bit patterns (so bfloat16, NaN and -0.0 need nothing
special): a token t of a masked row is allowed iff t < 32 * words and bit t % 32 of word t // 32
is set; a blocked logit becomes the dtype's -inf pattern, every other element keeps its bits.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfgmask import _core, apply_bitmask_inplace

torch = pytest.importorskip("torch")
from cfgmask.torch_ops import apply_bitmask_inplace_torch  # noqa: E402

# name -> (bit-pattern integer dtype, -inf pattern, how to make a logits array of those bits)
NEG = {2: {"float16": 0xFC00, "bfloat16": 0xFF80}, 4: {"float32": 0xFF800000}, 8: {"float64": 0xFFF0 << 48}}
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
SIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
SINT = {2: torch.int16, 4: torch.int32, 8: torch.int64}

# what the kernel may be asked to run as: numpy arrays and torch CPU tensors
KINDS = [
    ("numpy", "float16"),
    ("numpy", "float32"),
    ("numpy", "float64"),
    ("torch", "float16"),
    ("torch", "bfloat16"),
    ("torch", "float32"),
    ("torch", "float64"),
]
SIMD = [1, 2, 3]  # every instruction set the CPU has (a cap above the CPU's best runs its best)


def reference(bits: np.ndarray, bitmask: np.ndarray, dtype: str, indices=None) -> np.ndarray:
    """bits: [rows, width] unsigned ints (the logits' bit patterns); bitmask: [rows', words]."""
    out = bits.copy()
    width, words = bits.shape[1], bitmask.shape[1]
    t = np.arange(width)
    neg = NEG[SIZE[dtype]][dtype]
    for r in range(bits.shape[0]) if indices is None else indices:
        word = np.zeros(width, dtype=np.int64)
        inside = t < 32 * words
        word[inside] = bitmask[r, t[inside] // 32].astype(np.int64) & 0xFFFFFFFF
        allowed = inside & (((word >> (t % 32)) & 1) == 1)
        out[r, ~allowed] = neg
    return out


def make_logits(kind: str, dtype: str, bits: np.ndarray):
    """A fresh logits array of ``kind`` holding the bit patterns ``bits``."""
    if kind == "numpy":
        return bits.copy().view(dtype)
    size = SIZE[dtype]
    return torch.from_numpy(bits.copy().view(f"i{size}")).view(getattr(torch, dtype))


def bits_of(logits) -> np.ndarray:
    if isinstance(logits, np.ndarray):
        return logits.view(UINT[logits.itemsize])
    size = logits.element_size()
    return logits.view(SINT[size]).numpy().view(UINT[size])


def random_bits(rng: np.random.Generator, shape, size: int) -> np.ndarray:
    """Random bit patterns: NaNs, infinities, -0.0 and denormals come along."""
    raw = rng.integers(0, 256, size=(*shape, size), dtype=np.uint8)
    return raw.view(UINT[size]).reshape(shape)


def random_mask(rng: np.random.Generator, rows: int, words: int, density: float) -> np.ndarray:
    if words == 0:
        return np.zeros((rows, 0), dtype=np.int32)
    bits = rng.random((rows, 32 * words)) < density
    return np.packbits(bits, axis=1, bitorder="little").view("<i4").astype(np.int32).reshape(rows, words)


# ---- exactness ------------------------------------------------------------------------------


@st.composite
def cases(draw):
    kind, dtype = draw(st.sampled_from(KINDS))
    rows = draw(st.integers(1, 4))
    width = draw(st.integers(0, 200))
    words = draw(st.sampled_from([0, 1, (width + 31) // 32, (width + 31) // 32 + 1, max(0, width // 32 - 1)]))
    mask_rows = draw(st.integers(1, 4)) if draw(st.booleans()) else rows
    limit = min(rows, mask_rows)
    if mask_rows == rows and draw(st.booleans()):
        indices = None
    else:  # duplicates and any order allowed; empty too
        indices = draw(st.lists(st.integers(0, limit - 1), max_size=5))
    density = draw(st.sampled_from([0.0, 0.05, 0.5, 0.95, 1.0]))
    layout = draw(st.sampled_from(["contiguous", "row_gap", "col_stride", "one_d"]))
    if layout == "one_d":
        rows = mask_rows = 1
        indices = None if indices is None else [0] * len(indices)
    seed = draw(st.integers(0, 2**32 - 1))
    return kind, dtype, rows, width, words, mask_rows, indices, density, layout, seed


def build(kind, dtype, rows, width, words, mask_rows, density, layout, seed):
    """(logits as the call sees them, the buffer that holds them, its bits before, bitmask)."""
    rng = np.random.default_rng(seed)
    size = SIZE[dtype]
    mask = random_mask(rng, mask_rows, words, density)
    if layout == "row_gap":  # rows inside a wider buffer: a strided first dimension
        buf = make_logits(kind, dtype, random_bits(rng, (rows, width + 7), size))
        logits = buf[:, 3 : 3 + width]
    elif layout == "col_stride":  # every other column: a strided last dimension
        buf = make_logits(kind, dtype, random_bits(rng, (rows, 2 * width), size))
        logits = buf[:, ::2]
    else:
        buf = make_logits(kind, dtype, random_bits(rng, (rows, width), size))
        logits = buf[0] if layout == "one_d" else buf
    return logits, buf, bits_of(buf).copy(), mask


def expected_buffer(before, logits_view_bits_before, mask, dtype, indices, layout, width):
    """What the whole buffer must hold afterwards: the view masked, the rest untouched."""
    after = before.copy()
    masked = reference(logits_view_bits_before, mask, dtype, indices)
    if layout == "row_gap":
        after[:, 3 : 3 + width] = masked
    elif layout == "col_stride":
        after[:, ::2] = masked
    elif layout == "one_d":
        after[0] = masked[0]
    else:
        after[:] = masked
    return after


def view_bits(before, layout, width):
    if layout == "row_gap":
        return before[:, 3 : 3 + width]
    if layout == "col_stride":
        return before[:, ::2]
    return before


@given(cases(), st.sampled_from([0, *SIMD]), st.sampled_from(["list", "numpy", "torch"]), st.booleans())
def test_kernel_equals_reference(case, simd, index_form, torch_mask):
    """simd 0: the public entry point (the CPU's best path); 1-3: the C core capped there."""
    kind, dtype, rows, width, words, mask_rows, indices, density, layout, seed = case
    logits, buf, before, mask = build(kind, dtype, rows, width, words, mask_rows, density, layout, seed)
    want = expected_buffer(before, view_bits(before, layout, width), mask, dtype, indices, layout, width)
    bitmask = mask[0] if layout == "one_d" else mask
    if simd == 0:
        if torch_mask:
            bitmask = torch.from_numpy(bitmask)
        if indices is not None and index_form == "numpy":
            indices = np.array(indices, dtype=np.int32)
        elif indices is not None and index_form == "torch":
            indices = torch.tensor(indices, dtype=torch.long)
        apply_bitmask_inplace(logits, bitmask, indices=indices)
    else:
        rows_arg = None if indices is None else np.array(indices, dtype=np.int64)
        _core.apply_mask(logits, bitmask, NEG[SIZE[dtype]][dtype], rows_arg, max_simd=simd)
    assert np.array_equal(bits_of(buf), want)


@given(cases(), st.integers(0, 2**32 - 1))
def test_strided_bitmask(case, seed):
    """A bitmask whose words are not adjacent (every other column of a wider array)."""
    kind, dtype, rows, width, words, mask_rows, indices, density, layout, _ = case
    logits, buf, before, _ = build(kind, dtype, rows, width, words, mask_rows, density, layout, seed)
    wide = random_mask(np.random.default_rng(seed), mask_rows, 2 * words, density)
    mask = wide[:, ::2]
    want = expected_buffer(before, view_bits(before, layout, width), mask, dtype, indices, layout, width)
    apply_bitmask_inplace(logits, mask[0] if layout == "one_d" else mask, indices=indices)
    assert np.array_equal(bits_of(buf), want)


@given(cases())
def test_torch_ops_path_equals_kernel(case):
    """The torch-ops path (what runs on CUDA) and the C kernel agree bit for bit, NaN too."""
    kind, dtype, rows, width, words, mask_rows, indices, density, layout, seed = case
    kernel, kbuf, before, mask = build("torch", dtype, rows, width, words, mask_rows, density, layout, seed)
    ops, obuf, _, _ = build("torch", dtype, rows, width, words, mask_rows, density, layout, seed)
    bitmask = mask[0] if layout == "one_d" else mask
    apply_bitmask_inplace(kernel, bitmask, indices=indices)
    apply_bitmask_inplace_torch(ops, bitmask, indices=indices)
    assert np.array_equal(bits_of(kbuf), bits_of(obuf))


@pytest.mark.parametrize("kind,dtype", KINDS)
@pytest.mark.parametrize("simd", SIMD)
def test_llama3_width(kind, dtype, simd):
    """V = 128,256 with a padded logit width and a short one; sparse, half and dense masks
    and the all-blocked / all-allowed extremes, several rows, a subset of rows."""
    rng = np.random.default_rng(simd)
    size, neg = SIZE[dtype], NEG[SIZE[dtype]][dtype]
    words = (128_256 + 31) // 32
    for width in (128_256, 128_256 + 64, 128_000):
        for density in (0.0, 0.01, 0.5, 0.999, 1.0):
            bits = random_bits(rng, (3, width), size)
            mask = random_mask(rng, 3, words, density)
            for indices in (None, [2, 0]):
                logits = make_logits(kind, dtype, bits)
                rows_arg = None if indices is None else np.array(indices, dtype=np.int64)
                _core.apply_mask(logits, mask, neg, rows_arg, max_simd=simd)
                want = reference(bits, mask, dtype, indices)
                assert np.array_equal(bits_of(logits), want), (width, density)


def test_simd_levels_named():
    assert _core.apply_mask_simd() in (1, 2, 3)


def test_rows_outside_indices_untouched_and_batches_may_differ():
    """As XGrammar documents: with indices, logits and bitmask batch sizes need not match."""
    rng = np.random.default_rng(5)
    bits = random_bits(rng, (6, 100), 4)
    mask = random_mask(rng, 3, 4, 0.3)
    logits = bits.copy().view(np.float32)
    apply_bitmask_inplace(logits, mask, indices=[2, 0, 2])
    want = reference(bits, mask, "float32", [2, 0])
    assert np.array_equal(logits.view(np.uint32), want)
    assert np.array_equal(logits.view(np.uint32)[[1, 3, 4, 5]], bits[[1, 3, 4, 5]])
    t = torch.from_numpy(bits.copy().view(np.float32))
    apply_bitmask_inplace_torch(t, mask, indices=torch.tensor([0, 2]))
    assert np.array_equal(t.numpy().view(np.uint32), want)


def test_blocked_nan_becomes_minus_inf_allowed_nan_stays():
    logits = np.array([[np.nan, np.nan, -0.0, -0.0, np.inf]], dtype=np.float32)
    mask = np.array([[0b10100]], dtype=np.int32)  # allows tokens 2 and 4
    apply_bitmask_inplace(logits, mask)
    assert np.isneginf(logits[0, :2]).all() and np.isneginf(logits[0, 3])
    assert np.signbit(logits[0, 2]) and logits[0, 2] == 0 and logits[0, 4] == np.inf


def test_buffers_released_on_every_path():
    """Each buffer taken from numpy is given back, errors included (a view kept would hold a
    reference to its array)."""
    import sys

    logits = np.zeros((2, 64), dtype=np.float32)
    mask = np.zeros((2, 2), dtype=np.int32)
    refs = sys.getrefcount(logits), sys.getrefcount(mask)
    apply_bitmask_inplace(logits, mask)
    with pytest.raises(IndexError):  # after both buffers were taken
        _core.apply_mask(logits, mask[:1], 0xFF800000, np.array([1], dtype=np.int64))
    with pytest.raises(TypeError):  # the bitmask's words are not 4 bytes
        _core.apply_mask(logits, np.zeros((2, 2), np.int16), 0xFF800000)
    with pytest.raises(ValueError):  # the bitmask has 3 dimensions
        _core.apply_mask(logits, np.zeros((2, 2, 2), np.int32), 0xFF800000)
    assert (sys.getrefcount(logits), sys.getrefcount(mask)) == refs


# ---- hostile input --------------------------------------------------------------------------


def _misaligned() -> np.ndarray:
    raw = np.zeros(4 * 64 + 1, dtype=np.uint8)
    return np.frombuffer(raw.data, dtype=np.float32, count=64, offset=1).reshape(1, 64)


def _writable_broadcast() -> np.ndarray:
    base = np.zeros(64, dtype=np.float32)
    return np.lib.stride_tricks.as_strided(base, shape=(3, 64), strides=(0, 4))


M2 = np.zeros((2, 2), dtype=np.int32)


@pytest.mark.parametrize(
    "logits, bitmask, indices, error, match",
    [
        (np.zeros((2, 64), np.int32), M2, None, TypeError, "float"),
        (np.zeros((2, 64), np.complex64), M2, None, TypeError, "float"),
        (np.zeros((2, 64), bool), M2, None, TypeError, "float"),
        (np.zeros((2, 64), ">f4"), M2, None, TypeError, "native byte order"),
        ([[0.0] * 64] * 2, M2, None, TypeError, "numpy array or a torch tensor"),
        (np.zeros((2, 64), np.float32), np.zeros((2, 2), np.int64), None, TypeError, "int32"),
        (np.zeros((2, 64), np.float32), np.zeros((2, 2), np.uint32), None, TypeError, "int32"),
        (np.zeros((2, 64), np.float32), np.zeros((2, 2), ">i4"), None, TypeError, "int32"),
        (np.zeros((2, 64), np.float32), [[0, 0]] * 2, None, TypeError, "bitmask must be"),
        (np.zeros((2, 64), np.float32), np.zeros((3, 2), np.int32), None, ValueError, "rows"),
        (np.zeros((2, 2, 64), np.float32), M2, None, ValueError, "1-D or 2-D"),
        (np.zeros((2, 64), np.float32), np.zeros((2, 2, 2), np.int32), None, ValueError, "1-D or 2-D"),
        (np.zeros((), np.float32), M2, None, ValueError, "1-D or 2-D"),
        (np.zeros((2, 64), np.float32), M2, [2], IndexError, "out of range"),
        (np.zeros((5, 64), np.float32), M2, [0, 3], IndexError, "bitmask of 2 rows"),
        (np.zeros((2, 64), np.float32), M2, [-1], IndexError, "negative"),
        (np.zeros((2, 64), np.float32), M2, [0.0], TypeError, "integers"),
        (np.zeros((2, 64), np.float32), M2, [True], TypeError, "integers"),
        (np.zeros((2, 64), np.float32), M2, [[0]], ValueError, "1-D"),
        (np.zeros((2, 64), np.float32), M2, 0, ValueError, "1-D"),
        (np.zeros((2, 64), np.float32), M2, [2**70], IndexError, "out of range"),
        (np.zeros((2, 64), np.float32), M2, [np.int64(0), 2**70], TypeError, "integers"),
        (np.zeros((2, 64), np.float32), M2, np.array([2**63], np.uint64), IndexError, "out of range"),
        (_misaligned(), M2[:1], None, ValueError, "misaligned"),
        (_writable_broadcast(), np.zeros((3, 2), np.int32), None, ValueError, "overlap"),
    ],
)
def test_hostile_numpy(logits, bitmask, indices, error, match):
    before = np.array(logits, copy=True) if isinstance(logits, np.ndarray) else None
    with pytest.raises(error, match=match):
        apply_bitmask_inplace(logits, bitmask, indices=indices)
    if before is not None:  # nothing written before the error
        assert np.array_equal(np.asarray(logits), before, equal_nan=before.dtype.kind == "f")


def test_misaligned_really_is():
    assert not _misaligned().flags.aligned


def test_read_only_logits():
    logits = np.zeros((1, 64), np.float32)
    logits.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        apply_bitmask_inplace(logits, M2[:1])
    with pytest.raises((ValueError, BufferError), match="read-only|writable"):
        _core.apply_mask(logits, M2[:1], 0xFF800000)


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: (torch.zeros(2, 64, dtype=torch.int32), M2, None), TypeError, "float16, bfloat16"),
        (lambda: (torch.zeros(2, 64, dtype=torch.complex64), M2, None), TypeError, "float16, bfloat16"),
        (lambda: (torch.zeros(2, 64), torch.zeros(2, 2, dtype=torch.int64), None), TypeError, "int32"),
        (
            lambda: (torch.zeros(2, 64), torch.zeros(2, 2, dtype=torch.int32, device="meta"), None),
            TypeError,
            "host bitmask",
        ),
        (lambda: (torch.zeros(2, 64), M2, torch.tensor([0.0])), TypeError, "integers"),
        (lambda: (torch.zeros(2, 64), M2, torch.tensor([True])), TypeError, "integers"),
        (lambda: (torch.zeros(2, 64), M2, torch.tensor([2])), IndexError, "out of range"),
        (lambda: (torch.zeros(2, 64), M2, torch.tensor([[0]])), ValueError, "1-D"),
        (lambda: (torch.zeros(1, 64).expand(3, 64), np.zeros((3, 2), np.int32), None), ValueError, "overlap"),
        (lambda: (torch.zeros(2, 2, 64), M2, None), ValueError, "1-D or 2-D"),
    ],
)
def test_hostile_torch(make, error, match):
    logits, bitmask, indices = make()
    with pytest.raises(error, match=match):
        apply_bitmask_inplace(logits, bitmask, indices=indices)


@pytest.mark.parametrize("via", ["public", "torch_ops"])
def test_torch_ops_path_checks_the_same(via):
    """The path CUDA takes validates as the host path does (run here on CPU tensors)."""
    fn = apply_bitmask_inplace if via == "public" else apply_bitmask_inplace_torch
    logits = torch.zeros(2, 64)
    with pytest.raises(IndexError, match="out of range"):
        fn(logits, M2, indices=[-1])
    with pytest.raises(ValueError, match="rows"):
        fn(logits, np.zeros((3, 2), np.int32))
    with pytest.raises(TypeError, match="int32"):
        fn(logits, np.zeros((2, 2), np.int64))
    assert not logits.isinf().any()


def test_core_checks_rows_itself():
    """Below the Python checks, _core refuses rows out of range of either array, and rows
    that do not correspond, before writing anything (and cm_apply_mask checks them again)."""
    logits = np.zeros((2, 64), np.float32)
    neg = 0xFF800000
    for rows in ([2], [-1], [0, 1]):
        with pytest.raises(IndexError, match="out of range"):
            _core.apply_mask(logits, M2[:1], neg, np.array(rows, dtype=np.int64))
    with pytest.raises(ValueError, match="correspond"):
        _core.apply_mask(logits, M2[:1], neg)
    with pytest.raises(TypeError, match="2, 4 or 8"):
        _core.apply_mask(np.zeros((2, 64), np.uint8), M2, neg)
    with pytest.raises(TypeError, match="numpy array or a CPU torch tensor"):
        _core.apply_mask(object(), M2, neg)
    with pytest.raises(IndexError, match="out of range"):
        _core.check_rows(np.array([0, 3], dtype=np.int64), 4, 3)
    _core.check_rows(np.array([0, 2], dtype=np.int64), 4, 3)
    assert not logits.any()


def test_empty_shapes():
    for width, words in ((0, 0), (0, 3), (40, 0)):
        logits = np.ones((2, width), np.float32)
        apply_bitmask_inplace(logits, np.zeros((2, words), np.int32))
        assert np.isneginf(logits).all()  # no mask bits: every column blocked
        apply_bitmask_inplace(logits, np.zeros((2, words), np.int32), indices=[])
    apply_bitmask_inplace(np.ones((0, 5), np.float32), np.zeros((0, 1), np.int32))
    logits = torch.ones(2, 40)
    for empty in ([], np.array([]), torch.tensor([]), torch.tensor([], dtype=torch.bfloat16)):
        apply_bitmask_inplace(logits, np.zeros((2, 2), np.int32), indices=empty)
        apply_bitmask_inplace_torch(logits, np.zeros((2, 2), np.int32), indices=empty)
    assert (logits == 1).all()


# ---- the peer ------------------------------------------------------------------------------


@pytest.mark.slow  # importing xgrammar takes seconds
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_same_as_xgrammar_cpu(dtype):
    """XGrammar's CPU apply_token_bitmask_inplace and ours agree on what both define: logits
    as wide as the mask's bits or narrower (XGrammar leaves padded columns unmasked), rows
    chosen by distinct indices, finite logits."""
    xgr = pytest.importorskip("xgrammar")
    rng = np.random.default_rng(17)
    for width, words in ((1000, 32), (999, 32), (128_256, 4008)):
        mask = torch.from_numpy(random_mask(rng, 5, words, 0.4))
        base = torch.from_numpy(rng.standard_normal((5, width), dtype=np.float32)).to(getattr(torch, dtype))
        for indices in (None, [4, 1], []):
            ours, theirs = base.clone(), base.clone()
            apply_bitmask_inplace(ours, mask, indices=indices)
            xgr.apply_token_bitmask_inplace(theirs, mask, indices=indices)
            assert torch.equal(bits_of_t(ours), bits_of_t(theirs)), (width, indices)


def bits_of_t(t):
    return t.view(SINT[t.element_size()])

"""Bitmask helpers: apply a ``[batch, ceil(V/32)]`` int32 bitmask to logits, and fill a batch
of bitmask rows on a thread pool.

The layout is the one XGrammar, llguidance, vLLM and SGLang share: bit ``t % 32`` of word
``t // 32`` set means token ``t`` is allowed.  ``apply_bitmask_inplace`` runs the C kernel of
``csrc/apply.c`` on host memory (numpy arrays, CPU torch tensors) and torch ops on the logits'
own device otherwise (:mod:`cfgmask.torch_ops`, imported only when a torch tensor is passed, so
``import cfgmask`` never imports torch).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _core
from .buffers import check_rows, host_bitmask

if TYPE_CHECKING:
    from .matcher import Matcher

__all__ = ["apply_bitmask_inplace", "fill_bitmasks", "unpack_bitmask"]

# The -inf bit pattern of each logits dtype the C kernel writes (numpy dtypes compare with
# their byte order: a non-native '>f4' is not float32 here and is refused).
_NEG_INF = {
    np.dtype(np.float16): 0xFC00,
    np.dtype(np.float32): 0xFF800000,
    np.dtype(np.float64): 0xFFF0000000000000,
}


def unpack_bitmask(bitmask: np.ndarray, width: int) -> np.ndarray:
    """The allowed-token booleans ``[..., width]`` of an int32 bitmask ``[..., words]``.

    Columns at or beyond ``32 * words`` are False (not allowed); bits beyond ``width`` are
    ignored.
    """
    bm = np.ascontiguousarray(bitmask, dtype="<i4")
    bits = np.unpackbits(bm.view(np.uint8), axis=-1, bitorder="little").view(bool)
    have = bits.shape[-1]
    if have >= width:
        return bits[..., :width]
    out = np.zeros((*bits.shape[:-1], width), dtype=bool)
    out[..., :have] = bits
    return out


def apply_bitmask_inplace(logits: Any, bitmask: Any, indices: Any = None) -> None:
    """Set the logits of blocked tokens to ``-inf``, in place; allowed logits keep their bits.

    ``logits``: ``[V']`` or ``[batch, V']``, float16/bfloat16/float32/float64: a numpy array
    (native byte order, not bfloat16) or a torch tensor on any device.  ``bitmask``: int32
    ``[words]`` or ``[batch, words]``, numpy or torch.  Token ``t`` of a row is allowed iff bit
    ``t % 32`` of word ``t // 32`` is set.  Widths may differ: when ``V' > 32 * words`` (a
    padded logit width) the extra columns become ``-inf``; when ``V' < 32 * words`` only the
    first ``V'`` bits apply.  A blocked logit becomes ``-inf`` whatever it held (NaN too).

    ``indices``: None (every row; ``bitmask`` has one row per logits row), or the rows that
    have a grammar, as a list, a numpy integer array or a torch integer tensor: only
    ``logits[i]`` for ``i`` in ``indices`` is masked, by ``bitmask[i]`` (as in XGrammar's
    ``apply_token_bitmask_inplace``, an index names a row of both, so the two may have
    different batch sizes).  Every index must be in ``0 <= i < min(rows of logits, rows of
    bitmask)`` (no negative indexing); a repeated index masks its row again, which changes
    nothing; an empty ``indices`` masks nothing.

    Host memory (numpy, CPU tensors) goes through the C kernel of ``csrc/apply.c`` on the
    calling thread with the GIL released: rows may be strided, and the logits' last dimension
    may be too (slower).  The kernel skips a word whose 32 bits are all set and otherwise
    writes the -inf bit pattern at its zero bits, with vector selects (masked stores under
    AVX-512).  On another device (CUDA) the mask is applied there with torch ops
    (:mod:`cfgmask.torch_ops`): a host bitmask is copied to ``logits.device`` (only the rows
    ``indices`` names), the logits never leave it.

    Raises TypeError for a wrong kind of array, dtype or device, ValueError for wrong shapes,
    read-only, misaligned or broadcast (zero-stride) logits, IndexError for an index out of
    range.
    """
    if isinstance(logits, np.ndarray):
        neg = _NEG_INF.get(logits.dtype)
        if neg is None:
            raise TypeError(
                f"logits must be float16, float32 or float64 in native byte order, got {logits.dtype}"
            )
        if not logits.flags.writeable:
            raise ValueError("logits are read-only")
    elif _is_torch_tensor(logits):
        neg = _torch_neg_inf().get(logits.dtype)
        if neg is None:
            raise TypeError(f"logits must be float16, bfloat16, float32 or float64, got {logits.dtype}")
        if not logits.is_cpu:
            from .torch_ops import apply_bitmask_inplace_torch

            apply_bitmask_inplace_torch(logits, bitmask, indices)
            return
    else:
        raise TypeError(f"logits must be a numpy array or a torch tensor, not {type(logits).__name__}")
    _check_host_bitmask(bitmask)
    # shapes, row correspondence and the index range are checked by _core, which reads the views
    _core.apply_mask(logits, bitmask, neg, None if indices is None else row_indices(indices))


def _check_host_bitmask(bitmask: Any) -> None:
    """The bitmask as the C kernel takes it: a native int32 numpy array or CPU torch tensor."""
    if isinstance(bitmask, np.ndarray):
        if bitmask.dtype != np.int32:  # also refuses a non-native '>i4'
            raise TypeError(f"bitmask must be int32, got {bitmask.dtype}")
    elif _is_torch_tensor(bitmask):
        if not bitmask.is_cpu:
            raise TypeError(f"host logits need a host bitmask, got one on {bitmask.device}")
        if bitmask.dtype is not _torch_int32():
            raise TypeError(f"bitmask must be int32, got {bitmask.dtype}")
    else:
        raise TypeError(f"bitmask must be a numpy array or a torch tensor, not {type(bitmask).__name__}")


def row_indices(indices: Any) -> np.ndarray:
    """``indices`` (a sequence of ints, a numpy integer array or a torch integer tensor) as a
    1-D contiguous int64 array; the range is checked where the batch sizes are known
    (``_core.apply_mask``, ``_core.check_rows``)."""
    if type(indices) in (list, tuple) and all(type(i) is int for i in indices):
        for extreme in (min(indices), max(indices)) if indices else ():
            if not _I64_MIN <= extreme <= _I64_MAX:
                raise IndexError(f"row index {extreme} is out of range")
        return np.array(indices, dtype=np.int64)  # the common case, fast
    if _is_torch_tensor(indices):
        if not indices.is_floating_point():
            indices = indices.cpu().numpy()
        elif indices.numel():
            raise TypeError(f"indices must be integers, got a tensor of {indices.dtype}")
        else:  # empty: no row (bfloat16 has no numpy dtype)
            indices = np.zeros(tuple(indices.shape), dtype=np.int64)
    arr = np.asarray(indices)
    if arr.size == 0:  # names no row, whatever its dtype (np.asarray([]) is float64)
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"indices must be integers, got {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"indices must be 1-D, got shape {arr.shape}")
    if arr.dtype == np.uint64 and arr.size and arr.max() > _I64_MAX:
        raise IndexError(f"row index {int(arr.max())} is out of range")
    return np.array(arr, dtype=np.int64)  # a copy: the caller's array may change while C reads it


_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_TORCH: dict[str, Any] = {}


def _torch_neg_inf() -> dict[Any, int]:
    """The -inf bit pattern of each torch dtype (torch is loaded: a tensor was passed)."""
    table = _TORCH.get("neg")
    if table is None:
        import torch

        table = {
            torch.float16: 0xFC00,
            torch.bfloat16: 0xFF80,
            torch.float32: 0xFF800000,
            torch.float64: 0xFFF0000000000000,
        }
        _TORCH["neg"] = table
    return table


def _torch_int32() -> Any:
    import torch

    return torch.int32


def _is_torch_tensor(x: Any) -> bool:
    # Never import torch here: if a tensor exists, torch is already in sys.modules.
    tensor = _TORCH.get("Tensor")
    if tensor is None:
        if not type(x).__module__.startswith("torch"):
            return False
        import torch

        tensor = _TORCH["Tensor"] = torch.Tensor
    return isinstance(x, tensor)


# ---- filling a batch ---------------------------------------------------------------------

_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(threads: int) -> ThreadPoolExecutor:
    with _POOLS_LOCK:
        pool = _POOLS.get(threads)
        if pool is None:
            pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="cfgmask-fill")
            _POOLS[threads] = pool
        return pool


def fill_bitmasks(
    matchers: Sequence[Matcher],
    bitmask: Any,
    *,
    threads: int | None = None,
    rows: Sequence[int] | None = None,
) -> None:
    """Fill ``bitmask[rows[i]]`` from ``matchers[i]`` for every i, in parallel.

    The C core runs without the GIL, so ``threads`` workers fill rows at the same time
    (default: ``min(len(matchers), os.cpu_count())``; 1 fills serially on the calling thread).
    Results equal filling each row in turn.  ``rows`` defaults to ``0 .. len(matchers) - 1``
    and must be distinct; each matcher appears once (a matcher is not safe to use from two
    threads at once).  ``bitmask`` is a numpy int32 ``[batch, words]`` array (or a torch CPU
    int32 tensor) with C-contiguous rows wide enough for every matcher's vocabulary.
    """
    from ._core import fill_masks

    arr = host_bitmask(bitmask, "fill_bitmasks")
    rows = list(range(len(matchers))) if rows is None else [int(r) for r in rows]
    if len(rows) != len(matchers):
        raise ValueError(f"{len(matchers)} matchers but {len(rows)} rows")
    if len(set(rows)) != len(rows):
        raise ValueError("rows must be distinct")
    check_rows(arr, rows, max((m.compiled.vocab.size for m in matchers), default=0))
    handles = [m._h for m in matchers]
    if len({id(h) for h in handles}) != len(handles):
        raise ValueError("the same matcher appears twice: fork it for a second row")
    # A prefetch owns its matcher until it ends: copy the rows of those that started (waiting
    # for them); the ones still queued are cancelled and filled here with the rest.
    ahead = [i for i, m in enumerate(matchers) if m._prefetch_started()]
    if ahead:
        for i in ahead:
            matchers[i].fill_bitmask(arr, rows[i])
        rest = sorted(set(range(len(matchers))) - set(ahead))
        if rest:
            fill_bitmasks([matchers[i] for i in rest], arr, threads=threads, rows=[rows[i] for i in rest])
        return
    n = len(handles)
    if n == 0:
        return
    threads = min(n, os.cpu_count() or 1) if threads is None else int(threads)
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    threads = min(threads, n)
    if threads == 1:
        fill_masks(handles, arr, rows)
        return
    # Contiguous chunks, a few per thread so that uneven rows balance out.
    n_chunks = min(n, threads * 4)
    bounds = [n * k // n_chunks for k in range(n_chunks + 1)]
    pool = _pool(threads)
    futures = [
        pool.submit(fill_masks, handles[a:b], arr, rows[a:b])
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        if a < b
    ]
    errors = [f.exception() for f in futures]
    for e in errors:
        if e is not None:
            raise e

"""Bitmask helpers: apply a ``[batch, ceil(V/32)]`` int32 bitmask to logits, and fill a batch
of bitmask rows on a thread pool.

The layout is the one XGrammar, llguidance, vLLM and SGLang share: bit ``t % 32`` of word
``t // 32`` set means token ``t`` is allowed.  ``apply_bitmask_inplace`` works on numpy arrays
here and on torch tensors (CPU or CUDA) in :mod:`cfgmask.torch_ops`, which is imported only
when a torch tensor is passed, so ``import cfgmask`` never imports torch.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from .buffers import check_rows, host_bitmask

if TYPE_CHECKING:
    from .matcher import Matcher

__all__ = ["apply_bitmask_inplace", "fill_bitmasks", "unpack_bitmask"]

_FLOATS = (np.float16, np.float32, np.float64)
_NUMPY_FLOATS = ("torch.float16", "torch.float32", "torch.float64")


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


def apply_bitmask_inplace(logits: Any, bitmask: Any, indices: Sequence[int] | None = None) -> None:
    """Set the logits of disallowed tokens to ``-inf``, in place.

    ``logits``: ``[V']`` or ``[batch, V']``, a numpy float16/32/64 array or a torch tensor of any
    floating dtype on any device.  ``bitmask``: int32 ``[words]`` or ``[batch, words]`` (numpy or
    torch; for a torch ``logits`` the small bitmask is moved to ``logits.device``, the logits are
    never copied to the host).  Rows correspond: ``bitmask[i]`` masks ``logits[i]``.

    ``indices``: the rows that have a grammar; only those rows are touched (as in XGrammar's
    ``apply_token_bitmask_inplace``, ``indices`` index both ``logits`` and ``bitmask``).

    Vocabulary sizes may differ: when ``V' > 32 * words`` (a padded logit width) the extra
    columns are set to ``-inf``; when ``V' < 32 * words`` only the first ``V'`` bits apply.
    """
    if not isinstance(logits, np.ndarray):
        if not _is_torch_tensor(logits):
            raise TypeError(f"logits must be a numpy array or a torch tensor, not {type(logits).__name__}")
        if logits.device.type != "cpu" or str(logits.dtype) not in _NUMPY_FLOATS:
            from .torch_ops import apply_bitmask_inplace_torch

            apply_bitmask_inplace_torch(logits, bitmask, indices)
            return
        # A CPU tensor numpy can view: mask it through the view.  Single-threaded numpy is
        # faster here than torch's intra-op threads, which crawl on a busy machine.
        logits = logits.detach().numpy()
    if _is_torch_tensor(bitmask):
        if bitmask.device.type != "cpu":
            raise TypeError("numpy logits need a host bitmask, got one on " + str(bitmask.device))
        bitmask = bitmask.numpy()
    if logits.dtype.type not in _FLOATS:
        raise TypeError(f"logits must be float16, float32 or float64, got {logits.dtype}")
    if not logits.flags.writeable:
        raise ValueError("logits are read-only")
    logits2, mask2 = _as_batch(logits, np.asarray(bitmask))
    rows = _check_indices(indices, logits2.shape[0])
    width = logits2.shape[1]
    if rows is None:
        np.minimum(logits2, _upper_bounds(mask2, width, logits2.dtype), out=logits2)
        return
    if len(rows) == 0:
        return
    bounds = _upper_bounds(mask2[rows], width, logits2.dtype)
    for k, r in enumerate(rows):
        np.minimum(logits2[r], bounds[k], out=logits2[r])


def _upper_bounds(bitmask: np.ndarray, width: int, dtype: np.dtype) -> np.ndarray:
    """+inf where allowed, -inf where blocked; ``np.minimum(logits, bounds)`` applies the mask
    (several times faster than ``np.copyto(..., where=blocked)``; a NaN logit stays NaN)."""
    bounds = unpack_bitmask(bitmask, width).astype(dtype)
    bounds -= 0.5
    bounds *= np.inf
    return bounds


def _is_torch_tensor(x: Any) -> bool:
    # Never import torch here: if a tensor exists, torch is already in sys.modules.
    mod = type(x).__module__
    if not mod.startswith("torch"):
        return False
    import torch

    return isinstance(x, torch.Tensor)


def _as_batch(logits: np.ndarray, bitmask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if bitmask.dtype != np.int32:
        raise TypeError(f"bitmask must be int32, got {bitmask.dtype}")
    if logits.ndim not in (1, 2) or bitmask.ndim not in (1, 2):
        raise ValueError(f"logits {logits.shape} and bitmask {bitmask.shape} must be 1-D or 2-D")
    logits2 = logits[None, :] if logits.ndim == 1 else logits  # a view: writes reach the caller
    mask2 = bitmask[None, :] if bitmask.ndim == 1 else bitmask
    if mask2.shape[0] != logits2.shape[0]:
        raise ValueError(
            f"bitmask has {mask2.shape[0]} rows but logits have {logits2.shape[0]}: "
            "rows correspond one to one (use indices= to skip rows without a grammar)"
        )
    return logits2, mask2


def _check_indices(indices: Sequence[int] | None, n_rows: int) -> list[int] | None:
    if indices is None:
        return None
    rows = [int(i) for i in indices]
    for r in rows:
        if not 0 <= r < n_rows:
            raise IndexError(f"row index {r} is out of range for a batch of {n_rows}")
    return rows


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

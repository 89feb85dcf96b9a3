"""Torch side of the bitmask helpers (imported only when a torch tensor is passed).

The mask is applied on the logits' own device: the int32 bitmask (16 KB a row at V = 128k) is
moved to ``logits.device``; the logits never leave it.  Unpacking is one table gather: the
bitmask is viewed as bytes and each byte looks up its 8 bounds (+inf allowed, -inf blocked) in
a ``[256, 8]`` table of the logits' dtype; ``clamp_max_`` then applies them in one pass.  (On
CPU this is several times faster than a boolean ``masked_fill_``.)  Plain vectorized torch
ops, so it runs on any device torch supports without a custom kernel.  A NaN logit stays NaN.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

_TABLES: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}


def _bound_table(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """``table[b, j]`` is +inf when bit j of byte b is set (allowed), else -inf."""
    key = (device, dtype)
    t = _TABLES.get(key)
    if t is None:
        b = torch.arange(256, dtype=torch.int32)
        bits = (b[:, None] >> torch.arange(8, dtype=torch.int32)) & 1
        t = torch.where(bits == 1, float("inf"), float("-inf")).to(device=device, dtype=dtype)
        _TABLES[key] = t
    return t


def upper_bounds(bitmask: torch.Tensor, width: int, dtype: torch.dtype) -> torch.Tensor:
    """``[rows, min(width, 32 * words)]`` of ``dtype``: +inf where the token is allowed, -inf
    where it is not, on ``bitmask.device``.  ``logits.clamp_max_(bounds)`` applies the mask."""
    n = min(width, bitmask.shape[-1] * 32)
    words = (n + 31) // 32
    bm = bitmask[:, :words].contiguous()
    if sys.byteorder == "little":
        as_bytes = bm.view(torch.uint8).to(torch.int64)  # [rows, 4 * words]
        bounds = torch.nn.functional.embedding(as_bytes, _bound_table(bm.device, dtype))  # [rows, 4w, 8]
    else:  # pragma: no cover - no big-endian torch device in practice
        shifts = torch.arange(32, dtype=torch.int32, device=bm.device)
        allowed = ((bm.unsqueeze(-1) >> shifts) & 1) == 1
        bounds = torch.where(allowed, float("inf"), float("-inf")).to(dtype)
    return bounds.reshape(bm.shape[0], -1)[:, :n]


def _to_device(bitmask: torch.Tensor, device: torch.device) -> torch.Tensor:
    """The bitmask on ``device``; the caller may refill its buffer as soon as we return.

    From pageable host memory a non-blocking copy is staged before it returns, so it is safe
    and does not wait for the GPU.  From pinned memory it would return at once and a refill
    could race the copy, so that copy blocks.
    """
    if bitmask.device == device:
        return bitmask
    if bitmask.device.type == "cpu":
        return bitmask.to(device, non_blocking=not bitmask.is_pinned())
    return bitmask.to(device)


def apply_bitmask_inplace_torch(
    logits: torch.Tensor, bitmask: Any, indices: Sequence[int] | torch.Tensor | None = None
) -> None:
    """See :func:`cfgmask.apply_bitmask_inplace`."""
    if not logits.is_floating_point():
        raise TypeError(f"logits must be a floating-point tensor, got {logits.dtype}")
    if isinstance(bitmask, np.ndarray):
        if bitmask.dtype != np.int32:
            raise TypeError(f"bitmask must be int32, got {bitmask.dtype}")
        bitmask = torch.from_numpy(np.ascontiguousarray(bitmask))
    if not isinstance(bitmask, torch.Tensor):
        raise TypeError(f"bitmask must be a numpy array or a torch tensor, not {type(bitmask).__name__}")
    if bitmask.dtype != torch.int32:
        raise TypeError(f"bitmask must be int32, got {bitmask.dtype}")
    if logits.dim() not in (1, 2) or bitmask.dim() not in (1, 2):
        raise ValueError(
            f"logits {tuple(logits.shape)} and bitmask {tuple(bitmask.shape)} must be 1-D or 2-D"
        )
    logits2 = logits.unsqueeze(0) if logits.dim() == 1 else logits  # a view: writes reach the caller
    mask2 = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    if mask2.shape[0] != logits2.shape[0]:
        raise ValueError(
            f"bitmask has {mask2.shape[0]} rows but logits have {logits2.shape[0]}: "
            "rows correspond one to one (use indices= to skip rows without a grammar)"
        )
    device = logits2.device
    width = logits2.shape[1]
    n = min(width, mask2.shape[1] * 32)
    if indices is None:
        bounds = upper_bounds(_to_device(mask2, device), width, logits2.dtype)
        logits2[:, :n].clamp_max_(bounds)
        if width > n:
            logits2[:, n:] = float("-inf")
        return
    idx = torch.as_tensor(indices, dtype=torch.int64)
    if idx.dim() != 1:
        raise ValueError("indices must be a 1-D sequence of row numbers")
    if idx.numel() == 0:
        return
    rows = logits2.shape[0]
    if bool(((idx < 0) | (idx >= rows)).any()):
        raise IndexError(f"row indices {idx.tolist()} out of range for a batch of {rows}")
    picked = _to_device(mask2.index_select(0, idx.to(mask2.device)), device)
    bounds = upper_bounds(picked, width, logits2.dtype)
    idx = idx.to(device)
    sub = logits2.index_select(0, idx)
    sub[:, :n].clamp_max_(bounds)
    if width > n:
        sub[:, n:] = float("-inf")
    logits2.index_copy_(0, idx, sub)

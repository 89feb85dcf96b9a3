"""Torch side of the bitmask helpers: the mask applied on the logits' own device (CUDA or any
other device torch supports), with plain torch ops, so no compiler is needed at run time.
Imported only when a torch tensor is passed; host tensors go to the C kernel instead (see
:func:`cfgmask.apply_bitmask_inplace`, whose semantics this follows exactly).

The int32 bitmask (16 KB a row at V = 128k; only the rows ``indices`` names) is moved to
``logits.device``; the logits never leave it.  Unpacking is one table gather: the bitmask is
viewed as bytes and each byte looks up its 8 "blocked" booleans in a ``[256, 8]`` table;
``masked_fill_`` then writes ``-inf`` at the blocked logits in one pass, leaving the others
bit for bit (as the C kernel does).  With ``indices``, the named rows are gathered, masked
and scattered back (a repeated index writes the same row twice, with the same values).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import torch

from . import _core
from .bitmask import row_indices

_TABLES: dict[torch.device, torch.Tensor] = {}


def _blocked_table(device: torch.device) -> torch.Tensor:
    """``table[b, j]`` is True when bit j of byte b is clear (token blocked)."""
    t = _TABLES.get(device)
    if t is None:
        b = torch.arange(256, dtype=torch.int32)
        t = (((b[:, None] >> torch.arange(8, dtype=torch.int32)) & 1) == 0).to(device)
        _TABLES[device] = t
    return t


def blocked_bits(bitmask: torch.Tensor, n: int) -> torch.Tensor:
    """``[rows, n]`` bool on ``bitmask.device``: True where token t < n is blocked
    (``n <= 32 * words``)."""
    if n == 0:
        return torch.zeros((bitmask.shape[0], 0), dtype=torch.bool, device=bitmask.device)
    words = (n + 31) // 32
    bm = bitmask[:, :words].contiguous()
    if sys.byteorder == "little":
        as_bytes = bm.view(torch.uint8).to(torch.int64)  # [rows, 4 * words]
        blocked = _blocked_table(bm.device)[as_bytes]  # [rows, 4 * words, 8]
    else:  # pragma: no cover - no big-endian torch device in practice
        shifts = torch.arange(32, dtype=torch.int32, device=bm.device)
        blocked = ((bm.unsqueeze(-1) >> shifts) & 1) == 0
    return blocked.reshape(bm.shape[0], -1)[:, :n]


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


def _as_tensor(bitmask: Any) -> torch.Tensor:
    if isinstance(bitmask, np.ndarray):
        if bitmask.dtype != np.int32:  # also refuses a non-native '>i4'
            raise TypeError(f"bitmask must be int32, got {bitmask.dtype}")
        bitmask = torch.from_numpy(np.ascontiguousarray(bitmask))
    if not isinstance(bitmask, torch.Tensor):
        raise TypeError(f"bitmask must be a numpy array or a torch tensor, not {type(bitmask).__name__}")
    if bitmask.dtype != torch.int32:
        raise TypeError(f"bitmask must be int32, got {bitmask.dtype}")
    return bitmask


def apply_bitmask_inplace_torch(logits: torch.Tensor, bitmask: Any, indices: Any = None) -> None:
    """See :func:`cfgmask.apply_bitmask_inplace`; any device, torch ops only."""
    if not logits.is_floating_point():
        raise TypeError(f"logits must be a floating-point tensor, got {logits.dtype}")
    bitmask = _as_tensor(bitmask)
    if logits.dim() not in (1, 2) or bitmask.dim() not in (1, 2):
        raise ValueError(
            f"logits {tuple(logits.shape)} and bitmask {tuple(bitmask.shape)} must be 1-D or 2-D"
        )
    logits2 = logits.unsqueeze(0) if logits.dim() == 1 else logits  # a view: writes reach the caller
    mask2 = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    device, width = logits2.device, logits2.shape[1]
    n = min(width, mask2.shape[1] * 32)
    if indices is None:
        if mask2.shape[0] != logits2.shape[0]:
            raise ValueError(
                f"bitmask has {mask2.shape[0]} rows but logits have {logits2.shape[0]}: "
                "rows correspond one to one (use indices= to mask some rows only)"
            )
        logits2[:, :n].masked_fill_(blocked_bits(_to_device(mask2, device), n), float("-inf"))
        if width > n:
            logits2[:, n:] = float("-inf")
        return
    picked_rows = row_indices(indices)
    _core.check_rows(picked_rows, logits2.shape[0], mask2.shape[0])
    if picked_rows.size == 0:
        return
    rows = torch.from_numpy(picked_rows)
    picked = _to_device(mask2.index_select(0, rows.to(mask2.device)), device)
    idx = rows.to(device)
    sub = logits2.index_select(0, idx)
    sub[:, :n].masked_fill_(blocked_bits(picked, n), float("-inf"))
    if width > n:
        sub[:, n:] = float("-inf")
    logits2.index_copy_(0, idx, sub)

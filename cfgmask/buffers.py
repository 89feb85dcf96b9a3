"""Checks of the bitmask buffers callers hand in, shared by ``Matcher.fill_bitmask``,
``fill_bitmasks`` and ``apply_bitmask_inplace`` so that each mistake gets one exception:

* not an array the call can write, or on the wrong device, or not int32: ``TypeError``;
* the wrong number of dimensions, rows too narrow for the vocabulary, not C-contiguous,
  read-only: ``ValueError``;
* a row index outside the batch: ``IndexError``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def words(vocab_size: int) -> int:
    """int32 words a bitmask row needs for ``vocab_size`` tokens."""
    return (vocab_size + 31) // 32


def host_bitmask(bitmask: Any, what: str) -> np.ndarray:
    """``bitmask`` (numpy, or a torch CPU tensor viewed without a copy) as a 2-D int32
    array whose rows ``what`` may write."""
    if not isinstance(bitmask, np.ndarray):
        device = getattr(bitmask, "device", None)
        if device is not None and getattr(device, "type", "cpu") != "cpu":
            raise TypeError(
                f"{what} writes a host buffer, got one on {device}: allocate the bitmask on the CPU "
                "(allocate_bitmask) and copy it to the device with one transfer"
            )
        if not hasattr(bitmask, "numpy"):
            raise TypeError(
                f"bitmask must be a numpy array or a torch CPU tensor, not {type(bitmask).__name__}"
            )
        bitmask = bitmask.numpy()
    if bitmask.dtype != np.int32:
        raise TypeError(f"bitmask must be int32, got {bitmask.dtype}")
    if bitmask.ndim == 1:
        bitmask = bitmask.reshape(1, -1)
    if bitmask.ndim != 2:
        raise ValueError(f"bitmask must have shape [batch, words] or [words], got {bitmask.shape}")
    if not bitmask.flags.writeable:
        raise ValueError("bitmask is read-only")
    return bitmask


def check_rows(bitmask: np.ndarray, rows: list[int], vocab_size: int) -> None:
    """Every row index inside the batch, each such row wide enough and contiguous."""
    for r in rows:
        if not 0 <= r < bitmask.shape[0]:
            raise IndexError(f"row {r} is out of range for a bitmask of {bitmask.shape[0]} rows")
    need = words(vocab_size)
    if bitmask.shape[1] < need:
        raise ValueError(
            f"bitmask rows have {bitmask.shape[1]} words; a vocabulary of {vocab_size} needs {need}"
        )
    if rows and not bitmask[rows[0]].flags.c_contiguous:
        raise ValueError("bitmask rows must be C-contiguous")

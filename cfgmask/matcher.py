"""``Matcher``: the parser state of one sequence."""

from __future__ import annotations

from typing import Any

import numpy as np

from .buffers import check_rows, host_bitmask
from .compile import CompiledGrammar
from .errors import MatcherError


def bitmask_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


def allocate_bitmask(batch_size: int, vocab_size: int) -> np.ndarray:
    """A zeroed int32 bitmask of shape ``[batch_size, ceil(vocab_size / 32)]``
    (the XGrammar / llguidance / vLLM layout)."""
    if batch_size < 1 or vocab_size < 1:
        raise ValueError(f"batch_size and vocab_size must be positive, got {batch_size}, {vocab_size}")
    return np.zeros((batch_size, bitmask_words(vocab_size)), dtype=np.int32)


class Matcher:
    """Tracks one sequence under a compiled grammar.

    ``fill_bitmask`` writes the allowed next tokens; ``accept_token`` advances
    (returning False, state unchanged, for a token the grammar forbids).
    """

    def __init__(self, compiled: CompiledGrammar, *, _handle: Any = None) -> None:
        from ._core import MatcherHandle

        if not isinstance(compiled, CompiledGrammar):
            raise TypeError(f"Matcher needs a CompiledGrammar, not {type(compiled).__name__}")
        self.compiled = compiled
        self._h = _handle if _handle is not None else MatcherHandle(compiled._handle)

    # ---- masks ----------------------------------------------------------------

    def fill_bitmask(self, bitmask: Any, row: int = 0) -> None:
        """Write this matcher's mask into ``bitmask[row]`` (numpy int32, C-contiguous rows
        of at least ``ceil(V/32)`` words; a torch CPU int32 tensor works too)."""
        self._h.fill_mask(_row(bitmask, int(row), self.compiled.vocab.size))

    def allowed_tokens(self) -> np.ndarray:
        """The allowed token ids, ascending (convenience; slower than a bitmask)."""
        mask = allocate_bitmask(1, self.compiled.vocab.size)
        self.fill_bitmask(mask)
        bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[: self.compiled.vocab.size]
        return np.flatnonzero(bits)

    # ---- advancing ------------------------------------------------------------

    def accept_token(self, token_id: int) -> bool:
        return bool(self._h.accept_token(int(token_id)))

    def accept_tokens(self, token_ids: Any) -> bool:
        """Accept tokens in order; on the first rejection roll back to where we started."""
        n = 0
        for t in token_ids:
            if not self.accept_token(t):
                self.rollback(n)
                return False
            n += 1
        return True

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (counts as one step for rollback)."""
        return bool(self._h.accept_bytes(bytes(data)))

    def can_accept_bytes(self, data: bytes) -> bool:
        """Would ``data`` be accepted here?  The state is left unchanged."""
        return bool(self._h.accept_bytes(bytes(data), True))

    def is_accepting(self) -> bool:
        """The text so far is a complete string of the language (or a stop token was accepted)."""
        return bool(self._h.is_accepting())

    def is_terminated(self) -> bool:
        """A stop token was accepted."""
        return bool(self._h.is_terminated())

    @property
    def num_tokens(self) -> int:
        """Steps that ``rollback`` can undo."""
        return int(self._h.num_tokens())

    def rollback(self, k: int = 1) -> None:
        """Undo the last ``k`` accepted tokens (or ``accept_bytes`` calls)."""
        if k < 0:
            raise MatcherError(f"rollback count must be >= 0, got {k}")
        self._h.rollback(k)

    def reset(self) -> None:
        self._h.reset()

    def fork(self) -> Matcher:
        """An independent copy (for beams and parallel samples)."""
        return Matcher(self.compiled, _handle=self._h.fork())

    def jump_forward_bytes(self, max_bytes: int = 4096) -> bytes:
        """Bytes every continuation must start with (empty if there is a choice or the
        text may end here)."""
        return bytes(self._h.jump_forward(max_bytes))

    def __repr__(self) -> str:
        return f"Matcher(tokens={self.num_tokens}, accepting={self.is_accepting()})"


def _row(bitmask: Any, row: int, vocab_size: int) -> np.ndarray:
    # the common case without a call: a 2-D int32 numpy array, the row inside, wide enough
    if (
        type(bitmask) is np.ndarray
        and bitmask.dtype == np.int32
        and bitmask.ndim == 2
        and 0 <= row < bitmask.shape[0]
        and bitmask.shape[1] * 32 >= vocab_size
    ):
        out = bitmask[row]
        if out.flags.c_contiguous and out.flags.writeable:
            return out
    arr = host_bitmask(bitmask, "fill_bitmask")  # raises what is wrong, or converts
    check_rows(arr, [row], vocab_size)
    return arr[row]

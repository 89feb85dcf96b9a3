"""``Matcher``: the parser state of one sequence, and the prefetch of its next mask.

Prefetch (``accept_token(t, prefetch=True)`` or ``prefetch()``) computes the mask of the
current state on a worker of one small shared thread pool while the caller runs the model's
forward pass; the C fill runs without the GIL.  The next ``fill_bitmask`` copies the result
(waiting for it if it is not done).  Every other call waits for an in-flight prefetch first,
so the C matcher is never used by two threads at once; a call that changes the state
(accept, rollback, reset) then drops the result.  The worker holds a reference to the C
matcher, so a matcher dropped mid-prefetch is freed only after the worker is done with it.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

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


# ---- the prefetch pool ------------------------------------------------------------------

_POOL_LOCK = threading.Lock()
_POOL: ThreadPoolExecutor | None = None
_POOL_PID = 0
_POOL_THREADS = max(1, min(4, os.cpu_count() or 1))


def set_prefetch_threads(n: int) -> None:
    """Size of the one thread pool every matcher's prefetch runs on (default: up to 4, at
    most the cores).  Prefetches already queued finish on the old pool."""
    global _POOL, _POOL_THREADS
    if n < 1:
        raise ValueError(f"prefetch threads must be >= 1, got {n}")
    with _POOL_LOCK:
        old, _POOL, _POOL_THREADS = _POOL, None, int(n)
    if old is not None:
        old.shutdown(wait=False)


def _pool() -> ThreadPoolExecutor:
    global _POOL, _POOL_PID
    with _POOL_LOCK:
        # a forked child inherits the pool object but not its threads: make a new one
        if _POOL is None or _POOL_PID != os.getpid():
            _POOL = ThreadPoolExecutor(
                max_workers=_POOL_THREADS, thread_name_prefix="cfgmask-prefetch", initializer=_batch_policy
            )
            _POOL_PID = os.getpid()
        return _POOL


def _batch_policy() -> None:
    """Run this worker under Linux's SCHED_BATCH: same share of the CPU, but waking it never
    preempts the thread that woke it.  Without it, on a machine with no idle core, starting a
    prefetch could cost the decoding thread a whole scheduler time slice (milliseconds)."""
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))  # 0: this thread
    except (AttributeError, OSError):  # not Linux, or not allowed: the default policy
        pass


# MatcherHandle, imported on the first matcher's construction (importing cfgmask loads no
# extension) and kept: an import statement in __init__ was ~10 K instructions a matcher
_HANDLE: Any = None


def _handle_class() -> Any:
    global _HANDLE
    from ._core import MatcherHandle

    _HANDLE = MatcherHandle
    return MatcherHandle


class PrefetchTiming(NamedTuple):
    """How a mask served from a prefetch was made: ``compute_seconds`` the C fill took on
    the worker; ``wait_seconds`` the ``fill_bitmask`` call waited for it (the part of the
    mask's cost the overlap did not hide; 0 when it was ready)."""

    compute_seconds: float
    wait_seconds: float


class _Ahead:
    """One prefetch: the future of the worker's fill and the row it writes."""

    __slots__ = ("future", "row")

    def __init__(self, future: Future[tuple[float, float]], row: np.ndarray) -> None:
        self.future = future
        self.row = row

    def finish(self) -> BaseException | None:
        """Wait for the fill to end; its error, if any."""
        return self.future.exception()

    def cancel_or_finish(self) -> bool:
        """Cancel the fill if no worker has started it (True), else wait for it to end."""
        if self.future.cancel():
            return True
        self.future.exception()
        return False


class Matcher:
    """Tracks one sequence under a compiled grammar.

    ``fill_bitmask`` writes the allowed next tokens; ``accept_token`` advances
    (returning False, state unchanged, for a token the grammar forbids).

    ``accept_token(t, prefetch=True)`` (or ``prefetch()``) starts the next mask on a worker
    thread, to overlap it with the model's forward pass; ``fill_bitmask`` then returns it.
    A matcher is used by one thread at a time; the prefetch worker is its only companion.
    """

    def __init__(self, compiled: CompiledGrammar, *, _handle: Any = None) -> None:
        self._ahead: _Ahead | None = None
        self._timing: PrefetchTiming | None = None
        if not isinstance(compiled, CompiledGrammar):
            raise TypeError(f"Matcher needs a CompiledGrammar, not {type(compiled).__name__}")
        self.compiled = compiled
        self._h = _handle if _handle is not None else (_HANDLE or _handle_class())(compiled._handle)

    def __del__(self) -> None:
        # A queued prefetch is cancelled; a running one keeps the C matcher alive (the
        # worker holds the handle) and frees it when done.
        ahead = getattr(self, "_ahead", None)
        if ahead is not None:
            ahead.future.cancel()

    # ---- masks ----------------------------------------------------------------

    def fill_bitmask(self, bitmask: Any, row: int = 0) -> None:
        """Write this matcher's mask into ``bitmask[row]`` (numpy int32, C-contiguous rows
        of at least ``ceil(V/32)`` words; a torch CPU int32 tensor works too).

        After a prefetch of this state it copies the prefetched mask, waiting for it if the
        worker is not done; an error the worker hit (``LimitError``) is raised here, with the
        row zeroed as a direct fill would leave it."""
        ahead = self._ahead
        if ahead is None:
            # the common case in one call: a 2-D int32 numpy array, an int row inside it, wide
            # enough (fill_row checks the types itself)
            self._timing = None
            if self._h.fill_row(bitmask, row):
                return
            self._h.fill_mask(_row(bitmask, int(row), self.compiled.vocab.size))
            return
        out = _row(bitmask, int(row), self.compiled.vocab.size)
        future = ahead.future
        t0 = time.perf_counter()
        if not future.done() and future.cancel():  # still queued behind other prefetches
            self._ahead = self._timing = None
            self._h.fill_mask(out)
            return
        error = future.exception()  # waits for a running fill
        waited = time.perf_counter() - t0
        n = ahead.row.shape[0]
        out[:n] = ahead.row
        if out.shape[0] > n:
            out[n:] = 0
        if error is not None:
            self._ahead = self._timing = None
            raise error
        start, end = future.result()
        self._timing = PrefetchTiming(end - start, waited)

    def prefetch(self) -> None:
        """Start computing this state's mask on the shared prefetch pool and return at once.

        Call it after the last ``accept_token`` of a step, before the model's forward pass;
        the next ``fill_bitmask`` returns the result.  A second call for the same state
        does nothing.  Off unless asked for: in a server that pins its threads (vLLM),
        masks are filled in the server's own batch step."""
        if self._ahead is not None:
            return
        row = np.empty(bitmask_words(self.compiled.vocab.size), dtype=np.int32)
        try:
            future = _pool().submit(self._h.fill_mask_timed, row)
        except RuntimeError:  # the interpreter is shutting down: fill_bitmask computes it
            return
        self._ahead = _Ahead(future, row)

    @property
    def prefetch_pending(self) -> bool:
        """A prefetched mask of the current state exists (done or in flight)."""
        return self._ahead is not None

    def _prefetch_started(self) -> bool:
        """Cancel a prefetch no worker has started; True if one remains (running or done)."""
        ahead = self._ahead
        if ahead is not None and ahead.future.cancel():
            self._ahead = ahead = None
        return ahead is not None

    @property
    def prefetch_timing(self) -> PrefetchTiming | None:
        """How the last ``fill_bitmask``'s mask was made, if a prefetch served it."""
        return self._timing

    def _settle(self, *, cancel: bool = False) -> None:
        """Wait for an in-flight prefetch, keeping its mask; raise its error (once: the
        first call to read the state reports the limit, as a direct fill would have).
        ``cancel``: a prefetch no worker has started is cancelled instead (the call will
        most likely change the state)."""
        ahead = self._ahead
        if ahead is None:
            return
        if cancel and ahead.future.cancel():
            self._ahead = None
            return
        error = ahead.finish()
        if error is not None:
            self._ahead = None
            raise error

    def _wait(self) -> None:
        """For the calls that only read and never raise: wait, keep the mask (or error)."""
        if self._ahead is not None:
            self._ahead.finish()

    def _drop(self) -> None:
        """The state is about to change: cancel or wait for a prefetch, and forget it."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.cancel_or_finish()

    def allowed_tokens(self) -> np.ndarray:
        """The allowed token ids, ascending (convenience; slower than a bitmask)."""
        mask = allocate_bitmask(1, self.compiled.vocab.size)
        self.fill_bitmask(mask)
        bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[: self.compiled.vocab.size]
        return np.flatnonzero(bits)

    # ---- advancing ------------------------------------------------------------

    def accept_token(self, token_id: int, *, prefetch: bool = False) -> bool:
        """Advance by one token; False (state unchanged) if the grammar forbids it.

        ``prefetch``: once accepted, start the next mask on a worker (see ``prefetch``)."""
        if self._ahead is not None:
            self._settle(cancel=True)
        try:
            # the handle returns a bool; an int goes in as is (the per-token path: int() and
            # bool() calls cost a fifth of this method)
            ok: bool = self._h.accept_token(token_id if type(token_id) is int else int(token_id))
        except BaseException:
            self._ahead = None  # the matcher is in its error state: no stale mask
            raise
        if ok:
            self._ahead = None
            if prefetch and not self._h.is_terminated():
                self.prefetch()
        return ok

    def accept_tokens(self, token_ids: Any, *, prefetch: bool = False) -> bool:
        """Accept tokens in order; on the first rejection roll back to where we started.
        ``prefetch``: once all are accepted, start the next mask on a worker."""
        n = 0
        for t in token_ids:
            if not self.accept_token(t):
                self.rollback(n)
                return False
            n += 1
        if prefetch and not self._h.is_terminated():
            self.prefetch()
        return True

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (counts as one step for rollback)."""
        self._settle(cancel=True)
        try:
            ok = bool(self._h.accept_bytes(bytes(data)))
        except BaseException:
            self._ahead = None
            raise
        if ok:
            self._ahead = None
        return ok

    def can_accept_bytes(self, data: bytes) -> bool:
        """Would ``data`` be accepted here?  The state is left unchanged."""
        self._settle()
        try:
            return bool(self._h.accept_bytes(bytes(data), True))
        except BaseException:
            self._ahead = None
            raise

    def is_accepting(self) -> bool:
        """The text so far is a complete string of the language (or a stop token was accepted)."""
        self._wait()
        return bool(self._h.is_accepting())

    # These two read what a fill never writes (the flag and the token history: csrc/mask.c
    # only reads them), so they answer during a prefetch without waiting for it.

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
        self._drop()
        self._h.rollback(k)

    def reset(self) -> None:
        self._drop()
        self._h.reset()

    def fork(self) -> Matcher:
        """An independent copy (for beams and parallel samples); a finished prefetch of the
        state is shared with it."""
        self._settle()
        f = Matcher(self.compiled, _handle=self._h.fork())
        f._ahead = self._ahead  # done (settled), read-only from now on
        return f

    def jump_forward_bytes(self, max_bytes: int = 4096) -> bytes:
        """Bytes every continuation must start with (empty if there is a choice or the
        text may end here)."""
        self._settle()
        try:
            return bytes(self._h.jump_forward(max_bytes))
        except BaseException:
            self._ahead = None
            raise

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

"""Run a recursive front end on inputs nested deeper than Python's default recursion allows.

The JSON Schema walk recurses once per level of schema nesting (a few frames a level).  A
schema nested 512 deep is real (generated schemas, recursive data flattened by tools) and
peers compile it, so :func:`call_deep` retries such a walk on a thread of its own with a large
stack and a raised recursion limit, instead of failing with "nested too deeply".  The walk
first runs on the caller's thread: only inputs that hit the limit pay for the thread.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TypeVar

from . import deadline

T = TypeVar("T")

DEEP_STACK_BYTES = 512 << 20  # reserved, committed as used
DEEP_RECURSION_LIMIT = 100_000  # Python frames on the deep thread

_lock = threading.Lock()
_deep_walks = 0  # walks running with the raised limit (the limit is per interpreter)
_saved_limit = 0


def call_deep(fn: Callable[[], T], what: str) -> T:
    """``fn()``; when it raises RecursionError, ``fn()`` again on a thread with a large stack
    and a recursion limit of ``DEEP_RECURSION_LIMIT``, under the caller's deadline.  A
    RecursionError there too propagates."""
    try:
        return fn()
    except RecursionError:
        pass
    return retry_deep(fn, what)


def retry_deep(fn: Callable[[], T], what: str) -> T:
    """``fn()`` on a thread with a large stack and a recursion limit of
    ``DEEP_RECURSION_LIMIT``, under the caller's deadline: :func:`call_deep` after its first
    try on the caller's thread raised RecursionError."""
    ms = deadline.remaining() * 1000
    out: dict[str, object] = {}

    def target() -> None:
        _raise_limit()
        try:
            with deadline.Deadline(None if ms == float("inf") else max(ms, 1.0), what):
                out["value"] = fn()
        except BaseException as e:  # handed to the caller's thread
            out["error"] = e
        finally:
            _restore_limit()

    with _lock:
        old = threading.stack_size(DEEP_STACK_BYTES)
        try:
            worker = threading.Thread(target=target, name="cfgmask-deep-walk")
            worker.start()
        finally:
            threading.stack_size(old)
    worker.join()
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out["value"]  # type: ignore[return-value]


def _raise_limit() -> None:
    global _deep_walks, _saved_limit
    with _lock:
        if _deep_walks == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, DEEP_RECURSION_LIMIT))
        _deep_walks += 1


def _restore_limit() -> None:
    global _deep_walks
    with _lock:
        _deep_walks -= 1
        if _deep_walks == 0:
            sys.setrecursionlimit(_saved_limit)

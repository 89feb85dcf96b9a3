"""Compile deadlines: a wall-clock budget that the compiler's long loops poll.

``with Deadline(ms, "compile"):`` makes every :func:`check` in this thread (subset
construction, minimization, the rule loop, fixpoints, front-end walks) raise
:class:`~cfgmask.errors.LimitError` with ``limit="deadline_ms"`` once ``ms``
milliseconds have passed.  A thread-local keeps signatures free of a
parameter that only the slow paths need, and lets concurrent compiles in other
threads keep their own budgets.  A check costs about 0.1 µs; the loops that
poll do microseconds of work per iteration, so a compile stops well within
twice its deadline.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType

from .errors import LimitError

_local = threading.local()
_monotonic = time.monotonic  # check's clock, without the module attribute's lookup per call


class Deadline:
    """``ms`` milliseconds from entry; ``ms <= 0`` or ``None`` means no deadline.
    Nested deadlines keep the earliest end."""

    def __init__(self, ms: float | None, what: str = "compile") -> None:
        self.ms = ms
        self.what = what
        self.end = float("inf")
        self._outer: Deadline | None = None

    def __enter__(self) -> Deadline:
        self._outer = getattr(_local, "current", None)
        end = time.monotonic() + self.ms / 1000 if self.ms and self.ms > 0 else float("inf")
        if self._outer is not None and self._outer.end < end:
            end, self.ms, self.what = self._outer.end, self._outer.ms, self._outer.what
        self.end = end
        _local.current = self
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        _local.current = self._outer


def remaining() -> float:
    """Seconds left on this thread's innermost deadline (inf if none); for C loops that
    cannot poll :func:`check`."""
    d = getattr(_local, "current", None)
    return float("inf") if d is None else max(0.0, d.end - time.monotonic())


def check(where: str = "") -> None:
    """Raise LimitError if the innermost active deadline of this thread has passed."""
    d = getattr(_local, "current", None)
    if d is not None and _monotonic() > d.end:
        at = f" (in {where})" if where else ""
        raise LimitError(
            f"{d.what} took longer than deadline_ms={d.ms}{at}; raise CompileLimits.deadline_ms "
            "or simplify the grammar",
            limit="deadline_ms",
            value=d.ms,
        )

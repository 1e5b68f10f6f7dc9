"""How long one request may still wait when its server's progress keeps it alive.

A :class:`RequestClock` belongs to one request that asked for progress. It starts with the request's
timeout; each progress notification of that request (:meth:`touch`, from the session's reader,
O(1)) starts the timeout again, and ``max_total`` seconds after the request was sent no
progress extends it any more. :meth:`left` is what the waiter asks when the timeout it armed runs
out (:mod:`kxen_core.protocol.waiters`): more time, or 0 -- the request has timed out and is
cancelled on the wire as any other.
"""

from __future__ import annotations

import time
from typing import Any


class RequestClock:
    __slots__ = ("start", "seconds", "max_total", "last", "touches", "timer")

    def __init__(self, seconds: float, max_total: float) -> None:
        self.start = self.last = time.monotonic()
        #: the request's timeout, started again by each progress notification
        self.seconds = seconds
        #: no progress extends the wait past this many seconds after the start (never below ``seconds``)
        self.max_total = max(max_total, seconds)
        #: progress notifications seen
        self.touches = 0
        #: the waiter's re-armed timer, if any (cancelled when the wait ends)
        self.timer: Any = None

    def touch(self) -> None:
        self.last = time.monotonic()
        self.touches += 1

    def left(self) -> float:
        """Seconds the request may still wait (0 or less: it has timed out)."""
        return min(self.last + self.seconds, self.start + self.max_total) - time.monotonic()

    def why(self) -> str:
        """Why it timed out, for :class:`kxen_core.errors.RequestTimeout`."""
        if self.touches == 0:
            return ""
        if self.last + self.seconds >= self.start + self.max_total:
            return f"{self.max_total:g} s in all, its most with progress (timeouts.maxTotalSeconds)"
        return f"{self.seconds:g} s since its last progress"


__all__ = ["RequestClock"]

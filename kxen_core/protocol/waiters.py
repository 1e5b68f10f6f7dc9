"""How a session waits for the answer to one request: the only backend-specific code of the session.

A :class:`Waiters` is chosen once per session by :func:`for_current_backend`. It makes one waiter
per request (``create``), completes it with the first answer (``resolve``: later ones are dropped),
and waits for it with a timeout (``wait``: the answer, or ``None`` when the time ran out). The
caller's cancellation propagates out of ``wait`` as usual. A wait with a
:class:`~kxen_core.protocol.clock.RequestClock` asks it, when the timeout runs out, whether progress
gave the request more time; only when it says no is the waiter completed with ``None`` -- in the
timer callback itself, so no reply can fall between the expiry and the next wait.

* :class:`AsyncioWaiters` (the fast path, see docs/performance.md): a waiter is a bare
  ``asyncio.Future``, so a request enters no cancel scope and creates no Event. Waits with the
  session's default timeout share one loop timer: their deadlines come in the order they are armed,
  so a deque holds them and the timer is re-armed for the oldest live one. Other timeouts get a
  ``call_later`` each.
* :class:`AnyioWaiters` (every other backend): an ``anyio.Event`` and a slot, with
  ``anyio.move_on_after`` for the timeout.

Both use public APIs only.
"""

from __future__ import annotations

import sys
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

import anyio

if TYPE_CHECKING:
    import asyncio

    from kxen_core.protocol.clock import RequestClock


class Waiters(Protocol):
    def create(self) -> Any:
        """A new waiter, not completed."""

    def resolve(self, waiter: Any, value: Any) -> None:
        """Complete ``waiter`` with ``value`` (never ``None``) unless it is complete already."""

    async def wait(self, waiter: Any, timeout: float, clock: RequestClock | None = None) -> Any:
        """Its value, or ``None`` once ``timeout`` seconds passed without one (and ``clock``, if
        given, has no more time for it)."""

    def close(self) -> None:
        """Drop every timer (the session resolved all its waiters)."""


def for_current_backend(default_timeout: float) -> Waiters:
    """The fast path inside an asyncio task, the generic one anywhere else (trio, a guest run)."""
    asyncio = sys.modules.get("asyncio")  # not imported here: no asyncio loop runs without it loaded
    if asyncio is None:
        return AnyioWaiters()
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no asyncio loop running in this thread
        task = None
    if task is None:
        return AnyioWaiters()
    return AsyncioWaiters(asyncio.get_running_loop(), default_timeout)


def _expire(future: asyncio.Future, clock: RequestClock | None = None) -> None:
    if future.done():
        return
    if clock is not None:
        left = clock.left()
        if left > 0:  # progress gave it more time: the same future waits on
            clock.timer = future.get_loop().call_later(left, _expire, future, clock)
            return
    future.set_result(None)


class AsyncioWaiters:
    __slots__ = ("_loop", "_default", "_deadlines", "_sweeper")

    def __init__(self, loop: asyncio.AbstractEventLoop, default_timeout: float) -> None:
        self._loop = loop
        self._default = default_timeout
        #: (deadline, future, clock) of waits with the default timeout, oldest first
        self._deadlines: deque[tuple[float, asyncio.Future, RequestClock | None]] = deque()
        self._sweeper: asyncio.TimerHandle | None = None

    def create(self) -> asyncio.Future:
        return self._loop.create_future()

    @staticmethod
    def resolve(waiter: asyncio.Future, value: Any) -> None:
        if not waiter.done():  # a cancelled wait has cancelled it
            waiter.set_result(value)

    async def wait(self, waiter: asyncio.Future, timeout: float, clock: RequestClock | None = None) -> Any:
        if waiter.done():
            return waiter.result()
        if timeout != self._default:
            timer = self._loop.call_later(timeout, _expire, waiter, clock)
            try:
                return await waiter
            finally:
                timer.cancel()
                if clock is not None and clock.timer is not None:
                    clock.timer.cancel()
        # the common case: a deque append, and a timer only when none is armed
        dq = self._deadlines
        while dq and dq[0][1].done():
            dq.popleft()
        deadline = self._loop.time() + timeout
        dq.append((deadline, waiter, clock))
        if self._sweeper is None:
            self._sweeper = self._loop.call_at(deadline, self._sweep)
        if clock is None:
            return await waiter
        try:
            return await waiter
        finally:
            if clock.timer is not None:  # re-armed by progress (_expire)
                clock.timer.cancel()

    def _sweep(self) -> None:
        self._sweeper = None
        dq = self._deadlines
        now = self._loop.time()
        while dq:
            deadline, future, clock = dq[0]
            if not future.done():
                if deadline > now:
                    self._sweeper = self._loop.call_at(deadline, self._sweep)
                    return
                _expire(future, clock)  # None, unless progress gave it more time (its own timer then)
            dq.popleft()

    def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        self._deadlines.clear()


class _Slot:
    __slots__ = ("event", "value")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.value: Any = None


class AnyioWaiters:
    __slots__ = ()

    def create(self) -> _Slot:
        return _Slot()

    @staticmethod
    def resolve(waiter: _Slot, value: Any) -> None:
        if waiter.value is None:
            waiter.value = value
            waiter.event.set()

    async def wait(self, waiter: _Slot, timeout: float, clock: RequestClock | None = None) -> Any:
        with anyio.move_on_after(timeout):
            await waiter.event.wait()
        while waiter.value is None and clock is not None:
            left = clock.left()
            if left <= 0:
                break
            with anyio.move_on_after(left):
                await waiter.event.wait()
        return waiter.value

    def close(self) -> None:
        pass


__all__ = ["AnyioWaiters", "AsyncioWaiters", "Waiters", "for_current_backend"]

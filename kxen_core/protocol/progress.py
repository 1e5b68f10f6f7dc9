"""``notifications/progress``: from the server to the host callback of the call that asked for it.

A call that wants progress gets a token (``progressToken`` in its request ``_meta``) and a route
for the time it runs. The session's reader hands each notification to :meth:`ProgressRoutes.notify`,
which costs O(1) and never waits: it keeps only the latest update of that call (one slot per call,
so a flood neither grows memory nor blocks the reader) and wakes the call's delivery task, which
hands the update to the host callback (a plain function or a coroutine function). An update that
came in before the result is delivered before :meth:`ProgressRoutes.route` returns; updates for
unknown tokens (late, or made up) are dropped and counted.

A route may also carry the call's :class:`~kxen_core.protocol.clock.RequestClock`: each update
starts its timeout again. A call with a clock and no callback (:meth:`ProgressRoutes.ticking`) has
no delivery task at all: an update only touches the clock.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from itertools import count
from typing import Any

import anyio
import attrs

from kxen_core.protocol.clock import RequestClock

#: the longest progress message kept (characters)
MAX_MESSAGE_CHARS = 1000


@attrs.frozen(kw_only=True)
class Progress:
    """One progress update of a call: ``progress`` (increasing), ``total`` if known, a ``message``."""

    progress: float
    total: float | None = None
    message: str | None = None


ProgressCallback = Callable[[Progress], None | Awaitable[None]]


def parse(params: Any) -> tuple[Any, Progress] | None:
    """``(token, update)`` from the params of a progress notification, or None when malformed."""
    if type(params) is not dict:
        return None
    token = params.get("progressToken")
    value, total, message = params.get("progress"), params.get("total"), params.get("message")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    if total is not None and (not isinstance(total, (int, float)) or isinstance(total, bool)):
        return None
    if message is not None and type(message) is not str:
        message = None
    if message is not None and len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + "..."
    return token, Progress(progress=float(value), total=None if total is None else float(total), message=message)


class _Route:
    __slots__ = ("callback", "latest", "wake", "clock")

    def __init__(self, callback: ProgressCallback | None, clock: RequestClock | None = None) -> None:
        self.callback = callback
        self.latest: Progress | None = None
        self.wake = anyio.Event() if callback is not None else None
        self.clock = clock


class ProgressRoutes:
    """The progress routes of one server (tokens are unique among its calls)."""

    def __init__(self, prefix: str, diag: Callable[[str], None]) -> None:
        self._prefix = prefix
        self._diag = diag
        #: the open routes by token: a call's route, or the bare clock of a call that only ticks
        self._routes: dict[str, _Route | RequestClock] = {}
        self._ids = count(1)
        #: notifications for no active call (late, or tokens the server made up)
        self.unmatched = 0
        #: updates replaced by a newer one before the callback got them
        self.coalesced = 0

    def notify(self, params: Any) -> None:
        """The reader's side: O(1), never waits."""
        parsed = parse(params)
        route = self._routes.get(parsed[0]) if parsed is not None and type(parsed[0]) is str else None
        if route is None or parsed is None:
            self.unmatched += 1
            n = self.unmatched
            if n & (n - 1) == 0:  # 1, 2, 4...: visible, and few
                self._diag(f"{n} progress notification(s) for no active call (or malformed) dropped")
            return
        if isinstance(route, RequestClock):  # a clock only (ticking): nobody to deliver to
            route.touch()
            return
        if route.clock is not None:
            route.clock.touch()
        if route.wake is None:
            return
        if route.latest is not None:
            self.coalesced += 1
        route.latest = parsed[1]
        route.wake.set()

    def ticking(self, clock: RequestClock) -> str:
        """Open a route for one call whose updates only touch ``clock``; returns its progress token,
        for :meth:`close` when the call is over (every call of a server that restarts its timeouts
        on progress takes this path: no context manager, no task)."""
        token = f"{self._prefix}-{next(self._ids)}"
        self._routes[token] = clock
        return token

    def close(self, token: str) -> None:
        self._routes.pop(token, None)

    @asynccontextmanager
    async def route(self, callback: ProgressCallback, clock: RequestClock | None = None) -> AsyncIterator[str]:
        """Open a route for one call; yields its progress token. On exit the last update that came
        in is delivered, then the route is closed. Each update touches ``clock``, if given."""
        token = f"{self._prefix}-{next(self._ids)}"
        route = self._routes[token] = _Route(callback, clock)
        error: Exception | None = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._deliver_all, route)
                try:
                    yield token
                except Exception as exc:  # the call's own error, raised as itself (not in an ExceptionGroup)
                    error = exc
                finally:
                    tg.cancel_scope.cancel()
        finally:
            self._routes.pop(token, None)
        if error is not None:
            raise error
        await self._deliver(route)  # what came in before the answer and was not delivered yet

    async def _deliver_all(self, route: _Route) -> None:
        while True:
            await route.wake.wait()  # type: ignore[union-attr]  # a route with a callback has one
            route.wake = anyio.Event()
            await self._deliver(route)

    async def _deliver(self, route: _Route) -> None:
        update, route.latest = route.latest, None
        if update is None:
            return
        try:
            answer = route.callback(update)  # type: ignore[misc]  # only a route with a callback has updates
            if inspect.isawaitable(answer):
                await answer
        except Exception as exc:  # the host's callback must not fail the call
            self._diag(f"a progress callback failed: {type(exc).__name__}: {exc}")


__all__ = ["MAX_MESSAGE_CHARS", "Progress", "ProgressCallback", "ProgressRoutes", "parse"]

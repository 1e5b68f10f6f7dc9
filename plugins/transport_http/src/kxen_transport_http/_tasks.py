"""Where each request's POST runs: the only module of the transport that knows the event loop.

A request is POSTed from a task of its own, so ``send_nowait`` returns at once. On asyncio that is a
plain asyncio task (the W6 hot path: no task-group wrapper and no cancel scope per request), kept
here, cancelled on close and waited for (bounded). On any other anyio backend (trio) it runs in the
transport's task group under a cancel scope of its own. Both use public APIs only, and the
transport's tests run on both backends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.abc

from .plumbing import CLOSE_STEP_SECONDS

RequestBody = Callable[..., Coroutine[Any, Any, None]]


class AsyncioRequests:
    """Requests as asyncio tasks, each cancellable by its request id."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._running: dict[asyncio.Task, Any] = {}  # every unfinished task -> its request id
        self._by_id: dict[Any, asyncio.Task] = {}  # those not cancelled yet

    def start(self, rid: Any, body: RequestBody, *args: Any) -> None:
        task = self._loop.create_task(body(*args), name=f"kxen-http-{rid}")
        self._running[task] = rid
        self._by_id[rid] = task
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task) -> None:
        rid = self._running.pop(task)
        if self._by_id.get(rid) is task:
            del self._by_id[rid]

    def cancel(self, rid: Any) -> None:
        """Stop request ``rid`` (once: its own shielded cleanup is not interrupted again on close)."""
        task = self._by_id.pop(rid, None)
        if task is not None:
            task.cancel()

    def cancel_all(self) -> None:
        """What cancelling a task group does to its tasks."""
        for task in self._by_id.values():
            task.cancel()
        self._by_id.clear()

    async def join(self) -> None:
        """Wait, at most ``CLOSE_STEP_SECONDS``, for every task to finish. Call shielded."""
        tasks = [task for task in self._running if not task.done()]
        if tasks:
            with anyio.move_on_after(CLOSE_STEP_SECONDS):
                await asyncio.wait(tasks)


class GroupRequests:
    """Requests in the transport's task group (any anyio backend), each under its own cancel scope."""

    def __init__(self, tg: anyio.abc.TaskGroup) -> None:
        self._tg = tg
        self._by_id: dict[Any, anyio.CancelScope] = {}

    def start(self, rid: Any, body: RequestBody, *args: Any) -> None:
        scope = anyio.CancelScope()
        self._by_id[rid] = scope
        self._tg.start_soon(self._run, rid, scope, body, args, name=f"kxen-http-{rid}")

    async def _run(self, rid: Any, scope: anyio.CancelScope, body: RequestBody, args: tuple) -> None:
        try:
            with scope:
                await body(*args)
        finally:
            if self._by_id.get(rid) is scope:
                del self._by_id[rid]

    def cancel(self, rid: Any) -> None:
        scope = self._by_id.pop(rid, None)
        if scope is not None:
            scope.cancel()

    def cancel_all(self) -> None:
        for scope in self._by_id.values():
            scope.cancel()
        self._by_id.clear()

    async def join(self) -> None:
        """Nothing to do: leaving the task group waits for its tasks."""


RequestTasks = AsyncioRequests | GroupRequests


def request_tasks(tg: anyio.abc.TaskGroup) -> RequestTasks:
    """The runner for the event loop this is called in."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio
        return GroupRequests(tg)
    return AsyncioRequests(loop)

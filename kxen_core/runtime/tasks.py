"""A tool call that runs as a task (2025-11-25 tasks, :mod:`kxen_core.protocol.tasks`), and the tasks
each server has that this runtime knows.

A call of a tool whose ``execution.taskSupport`` is ``required`` -- or ``optional`` when the host asks
(``as_task=True``, or ``wait=False``) -- carries ``task: {ttl}``. A waiting call asks for a ttl of its
budget (the host's ``timeout``, else ``timeouts.maxTotalSeconds``) and follows the task to its end
within that budget or the ttl the server gave, whichever is smaller; its result is returned as if
the call had returned it. ``wait=False`` asks for :data:`HANDLE_TTL_SECONDS` and returns a *handle*
at once (:func:`make_handle`: a plain JSON-able dict a host can store, and resume with
``Runtime.task_result`` after a reconnect or a restart, within the ttl).

:class:`TaskBook` holds a server's known tasks: at most :data:`MAX_TASKS_PER_SERVER` (a call past it
is refused before anything is sent; finished ones make room first), each with its latest status.
``notifications/tasks/status`` updates it in O(1) and never waits, so a flood costs nothing but a
counter for tasks it does not know.
"""

from __future__ import annotations

import inspect
import math
import time
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from kxen_core.errors import InvalidArguments
from kxen_core.protocol.progress import Progress
from kxen_core.protocol.tasks import TERMINAL, cancel, follow, is_created, parse_task

if TYPE_CHECKING:
    from kxen_core.protocol.progress import ProgressCallback
    from kxen_core.protocol.session import Session
    from kxen_core.runtime.server import Server

#: the tasks one server may have that this runtime knows (running or not yet collected)
MAX_TASKS_PER_SERVER = 16
#: the ttl asked for a task whose handle a host keeps (``wait=False``); the server may give less
HANDLE_TTL_SECONDS = 3600.0
#: what ``Runtime.server_tasks`` reads of a server's ``tasks/list``
MAX_LIST_PAGES = 10
MAX_LISTED = 200
#: the keys of a handle
HANDLE_KEYS = ("server", "taskId", "tool", "ttl", "created", "pollInterval")


@attrs.define
class Known:
    handle: dict[str, Any]
    status: str
    message: str | None = None
    waiting: bool = False  # a call follows it now (cancelled on the wire when the runtime stops)
    updated: float = attrs.field(factory=time.time)

    def view(self) -> dict[str, Any]:
        return {**self.handle, "status": self.status, "statusMessage": self.message, "waiting": self.waiting}

    def line(self) -> str:
        text = f"{self.handle['taskId']} {self.handle['tool']}: {self.status}"
        return text + (f" -- {self.message}" if self.message else "")


class TaskBook:
    """The tasks of one server that this runtime knows, by ``taskId``."""

    def __init__(self, server: str) -> None:
        self.server = server
        self._known: dict[str, Known] = {}
        #: status notifications for tasks it does not know (late, or made up), and for those it knows
        self.unmatched = 0
        self.notified = 0

    def __len__(self) -> int:
        return len(self._known)

    def get(self, task_id: str) -> Known | None:
        return self._known.get(task_id)

    def room(self) -> None:
        """Make room for one more task (dropping the oldest finished one), or refuse, before anything is sent."""
        if len(self._known) < MAX_TASKS_PER_SERVER:
            return
        done = [k for k in self._known.values() if k.status in TERMINAL and not k.waiting]
        if done:
            del self._known[min(done, key=lambda k: k.updated).handle["taskId"]]
            return
        raise InvalidArguments(
            f"server {self.server!r} has {MAX_TASKS_PER_SERVER} tasks this runtime knows, the most it keeps; "
            f"collect or cancel one first (kxen mcp tasks {self.server} --cancel TASK_ID); nothing was sent"
        )

    def add(self, handle: dict[str, Any], status: str, message: str | None, *, waiting: bool) -> Known:
        known = self._known.get(handle["taskId"])
        if known is None:
            self.room()
            known = self._known[handle["taskId"]] = Known(handle=handle, status=status, message=message)
        known.waiting = waiting
        return known

    def update(self, task: dict[str, Any]) -> None:
        known = self._known.get(task["taskId"])
        if known is not None:
            known.status, known.message, known.updated = task["status"], task.get("statusMessage"), time.time()

    def forget(self, task_id: str) -> None:
        self._known.pop(task_id, None)

    def notify(self, params: Any) -> None:
        """``notifications/tasks/status``: the reader's side, O(1), never waits."""
        task_id = params.get("taskId") if type(params) is dict else None
        known = self._known.get(task_id) if type(task_id) is str else None
        if known is None:
            self.unmatched += 1
            return
        self.notified += 1
        try:
            self.update({**parse_task(params, self.server), "taskId": task_id})
        except Exception:  # a malformed status: the next poll tells
            self.unmatched += 1

    def waiting(self) -> list[str]:
        return [task_id for task_id, k in self._known.items() if k.waiting and k.status not in TERMINAL]

    def views(self) -> list[dict[str, Any]]:
        return [k.view() for k in self._known.values()]

    def status_view(self) -> dict[str, Any]:
        """For the server's status: how many tasks run, and each known task's status line."""
        running = sum(1 for k in self._known.values() if k.status not in TERMINAL)
        return {"running": running, "lines": [k.line() for k in self._known.values()]}

    async def cancel_waiting(self, session: Session) -> None:
        """``tasks/cancel`` for each task a call follows (the runtime or the server stops), at once, bounded."""
        ids = self.waiting()
        if not ids or session.closed:
            return
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for task_id in ids:
                    tg.start_soon(cancel, session, task_id)


def make_handle(server: str, tool: str, task: dict[str, Any]) -> dict[str, Any]:
    """The handle of a task: ``server``, ``taskId``, ``tool``, ``ttl`` (ms, None: the server keeps it
    without a limit), ``created`` (seconds since the epoch, this host's clock), ``pollInterval`` (ms or None)."""
    return {
        "server": server,
        "taskId": task["taskId"],
        "tool": tool,
        "ttl": task["ttl"],
        "created": time.time(),
        "pollInterval": task["pollInterval"],
    }


def check_handle(handle: Any) -> dict[str, Any]:
    """A handle a host gives back, checked: a clear error naming the key and the rule."""
    if not isinstance(handle, dict):
        raise InvalidArguments("a task handle is a dict (what call_tool(..., wait=False) returned)")
    for key, kinds in (("server", str), ("taskId", str), ("tool", str)):
        if not isinstance(handle.get(key), kinds) or not handle[key]:
            raise InvalidArguments(f"task handle: {key!r} must be a non-empty string")
    for key in ("ttl", "pollInterval"):
        value = handle.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise InvalidArguments(f"task handle: {key!r} must be milliseconds (an integer >= 0) or null")
    created = handle.get("created")
    if isinstance(created, bool) or not isinstance(created, (int, float)) or not math.isfinite(created):
        raise InvalidArguments("task handle: 'created' must be seconds since the epoch (a number)")
    return {key: handle.get(key) for key in HANDLE_KEYS}


def seconds_left(handle: dict[str, Any]) -> float:
    """How long the server keeps the task by its ttl (``inf`` without one)."""
    ttl = handle.get("ttl")
    return math.inf if ttl is None else handle["created"] + ttl / 1000 - time.time()


def task_progress(on_progress: ProgressCallback | None, book: TaskBook) -> Any:
    """The ``on_status`` of :func:`~kxen_core.protocol.tasks.follow`: the book learns each status, and
    the host's ``on_progress`` gets it as a progress message (``task working: ...``), once per change."""
    seen: list[tuple[str, str | None]] = []

    async def on_status(task: dict[str, Any]) -> None:
        book.update(task)
        now = (task["status"], task.get("statusMessage"))
        if on_progress is None or (seen and seen[-1] == now):
            return
        seen[:] = [now]
        text = f"task {now[0]}" + (f": {now[1]}" if now[1] else "")
        answer = on_progress(Progress(progress=float(len(seen)), message=text))
        if inspect.isawaitable(answer):
            await answer

    return on_status


async def call_as_task(
    target: Server,
    session: Session,
    params: dict[str, Any],
    *,
    wait: bool,
    timeout: float | None,
    on_progress: ProgressCallback | None,
) -> dict[str, Any]:
    """``tools/call`` with ``task``; the tool's result (``wait``), or the task's handle."""
    budget = target.config.timeouts
    tool = params["name"]
    total = timeout if timeout is not None else budget.maxTotalSeconds
    book = target.tasks
    book.room()
    asked = {**params, "task": {"ttl": int((total if wait else HANDLE_TTL_SECONDS) * 1000)}}
    created = await session.request("tools/call", asked, timeout=budget.for_tool(tool))
    if not is_created(created):  # the server ran it at once: that is the result
        return created
    task = parse_task(created["task"], target.name)
    handle = make_handle(target.name, tool, task)
    book.add(handle, task["status"], task["statusMessage"], waiting=wait)
    if not wait:
        return handle
    named = "timeouts.maxTotalSeconds" if timeout is None else "the call's timeout"
    return await follow_handle(target, session, handle, task, total, on_progress, named)


async def follow_handle(
    target: Server,
    session: Session,
    handle: dict[str, Any],
    task: dict[str, Any],
    total: float,
    on_progress: ProgressCallback | None,
    named: str = "timeouts.maxTotalSeconds",
) -> dict[str, Any]:
    """Follow a known task to its result within ``total`` seconds and its ttl; the book forgets it
    once it ended (a result, or an error)."""
    follower: Any = follow
    parsed = task
    if session.modern is not None:  # the tasks extension: a DetailedTask, its result inline
        from kxen_core.protocol import tasks_modern

        follower, parsed = tasks_modern.follow, {**tasks_modern.parse(task, target.name), "taskId": handle["taskId"]}
    book = target.tasks
    known = book.add(handle, parsed["status"], parsed.get("statusMessage"), waiting=True)
    on_status = task_progress(on_progress, book)
    await on_status(parsed)
    seconds = min(total, max(0.0, seconds_left(handle)))
    deadline = time.monotonic() + seconds
    budget = f"{seconds:g} s ({named if total <= seconds_left(handle) else 'the task ttl'})"
    try:
        result = await follower(
            session,
            task,
            deadline=deadline,
            request_timeout=target.config.timeouts.requestSeconds,
            on_status=on_status,
            budget=budget,
        )
    except BaseException:
        known.waiting = False
        if known.status in TERMINAL or not session.closed:
            book.forget(handle["taskId"])  # ended, cancelled on the wire, or lost: nothing to resume
        raise
    book.forget(handle["taskId"])
    return result


async def follow_modern_call(
    target: Server,
    session: Session,
    created: dict[str, Any],
    *,
    tool: str,
    timeout: float | None,
    on_progress: ProgressCallback | None,
    wait: bool = True,
) -> dict[str, Any]:
    """A 2026-07-28 ``tools/call`` the server answered with a task (the tasks extension): its handle
    (``wait=False``), or its result within the call's budget and the task's ttl, as
    :func:`call_as_task` does."""
    from kxen_core.protocol import tasks_modern

    task = tasks_modern.parse(created, target.name)
    handle = make_handle(target.name, tool, task)
    target.tasks.room()
    target.tasks.add(handle, task["status"], task["statusMessage"], waiting=wait)
    if not wait:
        return handle
    total = timeout if timeout is not None else target.config.timeouts.maxTotalSeconds
    named = "timeouts.maxTotalSeconds" if timeout is None else "the call's timeout"
    return await follow_handle(target, session, handle, created, total, on_progress, named)


def modern_tasks(session: Session | None) -> bool:
    """Whether a 2026-07-28 session declared the tasks extension (its server offered it)."""
    from kxen_core.protocol.tasks_modern import EXTENSION

    modern = session.modern if session is not None else None
    extensions = modern.capabilities.get("extensions") if modern is not None else None
    return isinstance(extensions, dict) and EXTENSION in extensions


__all__ = [
    "HANDLE_KEYS",
    "HANDLE_TTL_SECONDS",
    "MAX_LISTED",
    "MAX_LIST_PAGES",
    "MAX_TASKS_PER_SERVER",
    "TaskBook",
    "call_as_task",
    "check_handle",
    "follow_handle",
    "follow_modern_call",
    "modern_tasks",
    "make_handle",
    "seconds_left",
]

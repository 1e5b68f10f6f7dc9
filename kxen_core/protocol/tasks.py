"""Tasks of the 2025-11-25 revision (experimental), the requester's side: a ``tools/call`` carrying
``task: {ttl}`` is answered with a ``CreateTaskResult`` (``{"task": {...}}``) instead of the tool's
result, and the client follows the task until it ends.

Following a task (:func:`follow`): ``tasks/get`` at the server's ``pollInterval``, clamped to
:data:`MIN_POLL_SECONDS`..:data:`MAX_POLL_SECONDS` (1 s when it names none), at most
:data:`MAX_POLLS` times and never past the deadline the caller gives. ``input_required``: the
server has requests for the client queued, which it delivers once the client calls
``tasks/result``; that request blocks until the task is terminal and answers with its result, and
the server's requests on the way (``elicitation/create``, ``sampling/createMessage``) reach the
session's handlers like any other. ``completed`` (and ``failed``, whose result is the tool's
``isError`` result when the server stored one): ``tasks/result``. ``cancelled``, or a ``failed`` task
without a result: :class:`~kxen_core.errors.TaskFailed`. A ``tasks/get`` answered with an error (the
server lost the task) ends the wait with ``TaskFailed`` too: never a retry loop.

A caller that gives up (its cancel scope, the deadline, the session stopping) stops polling, and
the task is cancelled on the wire with ``tasks/cancel`` (:func:`cancel`), not
``notifications/cancelled``: the revision's rule for task-augmented requests.

The client declares no ``tasks`` capability: that capability says the client *runs* task-augmented
requests the server sends it (sampling, elicitation), which kxen does not; a requester needs the
server's ``tasks.requests.tools.call`` and the tool's ``execution.taskSupport``.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from kxen_core.errors import ClosedError, RemoteError, RequestTimeout, TaskFailed
from kxen_core.safe_text import safe_text

if TYPE_CHECKING:
    from kxen_core.protocol.session import Session

TERMINAL = frozenset({"completed", "failed", "cancelled"})
STATUSES = TERMINAL | {"working", "input_required"}
#: the server's pollInterval is clamped to this range (seconds)
MIN_POLL_SECONDS = 0.25
MAX_POLL_SECONDS = 5.0
DEFAULT_POLL_SECONDS = 1.0
#: tasks/get calls of one wait, whatever its deadline
MAX_POLLS = 5000
#: the longest statusMessage and taskId kept
MAX_STATUS_CHARS = 500
MAX_TASK_ID_CHARS = 256
#: what a tasks/cancel gets to go out and be answered
CANCEL_SECONDS = 2.0

StatusCallback = Callable[[dict[str, Any]], None | Awaitable[None]]


def task_support(tool: dict[str, Any]) -> str:
    """A tool's ``execution.taskSupport``: ``forbidden`` (the default), ``optional`` or ``required``."""
    execution = tool.get("execution")
    value = execution.get("taskSupport") if isinstance(execution, dict) else None
    return value if value in ("optional", "required") else "forbidden"


def server_runs_tool_tasks(capabilities: dict[str, Any]) -> bool:
    """Whether the server declared ``tasks.requests.tools.call``."""
    tasks = capabilities.get("tasks")
    requests = tasks.get("requests") if isinstance(tasks, dict) else None
    tools = requests.get("tools") if isinstance(requests, dict) else None
    return isinstance(tools, dict) and isinstance(tools.get("call"), dict)


def is_created(result: Any) -> bool:
    """Whether a reply is a ``CreateTaskResult`` (a task, not the tool's result)."""
    return type(result) is dict and type(result.get("task")) is dict and "content" not in result


def parse_task(value: Any, server: str) -> dict[str, Any]:
    """A ``Task`` object checked and bounded: ``taskId``, ``status``, ``statusMessage`` (escaped,
    cut), ``ttl`` (ms or None: unlimited), ``pollInterval`` (ms or None), ``createdAt``. Raises
    ``TaskFailed`` for one without a usable id or status."""
    if type(value) is not dict:
        raise TaskFailed("the server's task is not an object", server=server)
    task_id, status = value.get("taskId"), value.get("status")
    if type(task_id) is not str or not 0 < len(task_id) <= MAX_TASK_ID_CHARS:
        raise TaskFailed("the server's task has no usable taskId", server=server)
    if status not in STATUSES:
        raise TaskFailed(f"task {safe_text(task_id)!r} has an unknown status", server=server, task_id=task_id)
    message = value.get("statusMessage")
    message = safe_text(message[:MAX_STATUS_CHARS]) if isinstance(message, str) else None
    return {
        "taskId": task_id,
        "status": status,
        "statusMessage": message,
        "ttl": _millis(value.get("ttl")),
        "pollInterval": _millis(value.get("pollInterval")),
        "createdAt": value.get("createdAt") if isinstance(value.get("createdAt"), str) else None,
    }


def _millis(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return int(value)


def poll_seconds(task: dict[str, Any]) -> float:
    """The wait before the next ``tasks/get``: the server's ``pollInterval``, clamped."""
    interval = task.get("pollInterval")
    seconds = DEFAULT_POLL_SECONDS if interval is None else interval / 1000
    return min(MAX_POLL_SECONDS, max(MIN_POLL_SECONDS, seconds))


async def follow(
    session: Session,
    task: dict[str, Any],
    *,
    deadline: float,
    request_timeout: float,
    on_status: StatusCallback | None = None,
    budget: str = "its budget",
) -> dict[str, Any]:
    """Follow ``task`` (parsed) until it ends and return its result (``tasks/result``), by
    ``deadline`` (``time.monotonic()``). Raises ``TaskFailed`` (cancelled, failed without a
    result, lost by the server), ``RequestTimeout`` (the deadline; the task is then cancelled on the
    wire; ``budget`` is how its message names the deadline), ``ClosedError``. Any way out but a
    result cancels the task on the wire (best effort)."""
    server, task_id = session.server, task["taskId"]
    try:
        for _ in range(MAX_POLLS):
            status = task["status"]
            if status in ("completed", "input_required", "failed"):
                # input_required: tasks/result carries the server's requests, then blocks to the end
                return await _result(session, task, deadline, budget, request_timeout)
            if status == "cancelled":
                raise TaskFailed(
                    _ended(task, "was cancelled by the server"), server=server, task_id=task_id, status="cancelled"
                )
            await _sleep(session, min(poll_seconds(task), _left(deadline, budget, server)))
            left = _left(deadline, budget, server)
            try:
                got = await within(session, "tasks/get", task_id, deadline, min(request_timeout, left), budget)
            except RemoteError as exc:
                raise TaskFailed(
                    f"the server no longer knows task {safe_text(task_id)!r} ({exc}); it was not polled again",
                    server=server,
                    task_id=task_id,
                    status="lost",
                ) from None
            task = {**parse_task(got, server), "taskId": task_id}
            if on_status is not None:
                answer = on_status(task)
                if inspect.isawaitable(answer):
                    await answer
        raise TaskFailed(f"task {safe_text(task_id)!r} did not end in {MAX_POLLS} polls", server=server)
    except TaskFailed as exc:
        if exc.status == "broken":  # still running as far as the server knows: it is told to stop
            await cancel(session, task_id)
        raise
    except BaseException:
        await cancel(session, task_id)
        raise


async def within(session: Session, method: str, task_id: str, deadline: float, timeout: float, budget: str) -> Any:
    """One request of a task, ``timeout`` long; when it was the task's deadline that cut it, the
    error names the task's budget rather than this one request's remnant."""
    try:
        return await session.request(method, {"taskId": task_id}, timeout=timeout)
    except RequestTimeout:
        _left(deadline - 0.05, budget, session.server)  # the deadline cut it (give or take the clock)
        raise


async def _result(
    session: Session, task: dict[str, Any], deadline: float, budget: str, request_timeout: float
) -> dict[str, Any]:
    task_id, status = task["taskId"], task["status"]
    left = _left(deadline, budget, session.server)
    # a terminal task's result is there now; an input_required one's comes at the end of its work
    wait = min(left, request_timeout) if status != "input_required" else left
    try:
        result = await within(session, "tasks/result", task_id, deadline, wait, budget)
    except RemoteError as exc:
        if status == "failed":
            how = f"failed ({exc})"
            raise TaskFailed(_ended(task, how), server=session.server, task_id=task_id, status="failed") from None
        how = f"tasks/result failed: {exc}"
        raise TaskFailed(_ended(task, how), server=session.server, task_id=task_id, status="lost") from None
    if type(result) is not dict:
        raise TaskFailed(f"task {safe_text(task_id)!r}: tasks/result is not an object", server=session.server)
    return result


def _ended(task: dict[str, Any], how: str) -> str:
    message = task.get("statusMessage")
    return f"task {task['taskId']!r} {how}" + (f": {message}" if message else "")


def _left(deadline: float, budget: str, server: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise RequestTimeout("tools/call", 0, server=server, why=f"{budget}, as a task; tasks/cancel sent")
    return left


async def _sleep(session: Session, seconds: float) -> None:
    """Wait ``seconds``, or less when the session closes (then ``ClosedError``)."""
    with anyio.move_on_after(seconds):
        await session.closed_event.wait()
    if session.closed:
        raise ClosedError(f"the session ended while task polling waited: {session.close_reason}", server=session.server)


async def cancel(session: Session, task_id: str) -> bool:
    """``tasks/cancel`` for ``task_id``, shielded and bounded (:data:`CANCEL_SECONDS`); whether the
    server answered it without an error. Never raises."""
    if session.closed:
        return False
    with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_SECONDS):
        try:
            await session.request("tasks/cancel", {"taskId": task_id}, timeout=CANCEL_SECONDS)
            return True
        except Exception:  # best effort: finished already, unknown, or the connection is gone
            return False
    return False


__all__ = [
    "MAX_POLLS",
    "MAX_POLL_SECONDS",
    "MIN_POLL_SECONDS",
    "TERMINAL",
    "cancel",
    "follow",
    "is_created",
    "parse_task",
    "poll_seconds",
    "server_runs_tool_tasks",
    "task_support",
]

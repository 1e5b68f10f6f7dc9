"""Tasks of the 2026-07-28 era: the ``io.modelcontextprotocol/tasks`` extension (SEP-2663), the
requester's side.

* kxen declares the extension (``extensions`` of its client capabilities in each request's
  ``_meta``) only to a server whose ``server/discover`` offers it (:func:`declare_if_offered`);
* the server alone decides to answer a ``tools/call`` with a task: a flat ``CreateTaskResult``
  (``resultType: "task"``, ``taskId``, ``status``, ``ttlMs``, ``pollIntervalMs`` at the top level);
  kxen sends no ``task`` hint;
* ``tasks/get`` answers a ``DetailedTask``: a ``completed`` one inlines the tool's ``result`` (a
  tool's own error is ``completed`` with ``result.isError``), a ``failed`` one an ``error``
  (``code``, ``message``), an ``input_required`` one its ``inputRequests`` (by key, as an
  input-required result has them), answered with ``tasks/update`` (``taskId``, ``inputResponses``)
  through the session's request handlers -- the elicitation and sampling hooks;
* there is no ``tasks/result`` and no ``tasks/list``; ``tasks/cancel`` is acknowledged with an
  empty result, and the task's status then says ``cancelled``.

Polling has the bounds of :mod:`kxen_core.protocol.tasks` (the interval clamped, a poll count, the
caller's deadline), input rounds at most :data:`~kxen_core.protocol.era_requests.MAX_INPUT_ROUNDS`;
every way out but a result sends ``tasks/cancel``.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from kxen_core.errors import RemoteError, TaskFailed
from kxen_core.protocol.era_requests import MAX_INPUT_ROUNDS
from kxen_core.protocol.tasks import (
    MAX_POLLS,
    StatusCallback,
    _left,
    _sleep,
    cancel,
    parse_task,
    poll_seconds,
    within,
)
from kxen_core.safe_text import safe_text

if TYPE_CHECKING:
    from kxen_core.protocol.era_requests import Modern
    from kxen_core.protocol.session import Session

EXTENSION = "io.modelcontextprotocol/tasks"


def declare_if_offered(modern: Modern, server_capabilities: Any) -> None:
    """Add the extension to what kxen declares, when the server's capabilities offer it."""
    offered = server_capabilities.get("extensions") if isinstance(server_capabilities, dict) else None
    if isinstance(offered, dict) and EXTENSION in offered:
        mine = modern.capabilities.get("extensions")
        modern.capabilities["extensions"] = {**(mine if isinstance(mine, dict) else {}), EXTENSION: {}}


def is_created(result: Any) -> bool:
    return type(result) is dict and result.get("resultType") == "task"


def parse(value: Any, server: str) -> dict[str, Any]:
    """A modern task (``ttlMs``, ``pollIntervalMs``) as :func:`kxen_core.protocol.tasks.parse_task` gives one."""
    if type(value) is not dict:
        raise TaskFailed("the server's task is not an object", server=server)
    return parse_task({**value, "ttl": value.get("ttlMs"), "pollInterval": value.get("pollIntervalMs")}, server)


async def follow(
    session: Session,
    created: dict[str, Any],
    *,
    deadline: float,
    request_timeout: float,
    on_status: StatusCallback | None = None,
    budget: str = "its budget",
) -> dict[str, Any]:
    """Follow the task ``created`` names to its result, by ``deadline`` (``time.monotonic()``); raises
    as :func:`kxen_core.protocol.tasks.follow` does."""
    server = session.server
    detail = created
    task = parse(detail, server)
    task_id = task["taskId"]
    rounds = 0
    try:
        for _ in range(MAX_POLLS):
            status = task["status"]
            if status == "completed":
                result = detail.get("result")
                if type(result) is not dict:  # the create answer does not inline it: ask once more
                    detail = await _get(session, task_id, deadline, request_timeout, budget)
                    result = detail.get("result")
                if type(result) is not dict:
                    raise TaskFailed(f"task {safe_text(task_id)!r} completed without a result", server=server)
                return result
            if status in ("failed", "cancelled"):
                raise _ended(server, task, detail)
            if status == "input_required" and detail.get("inputRequests"):
                rounds += 1
                if rounds > MAX_INPUT_ROUNDS or session.modern is None:
                    raise TaskFailed(f"task {safe_text(task_id)!r} asked for input too often", server=server)
                answers = await session.modern._answer("tasks/update", detail["inputRequests"])
                left = _left(deadline, budget, server)
                await session.request(
                    "tasks/update", {"taskId": task_id, "inputResponses": answers}, timeout=min(request_timeout, left)
                )
            else:
                await _sleep(session, min(poll_seconds(task), _left(deadline, budget, server)))
            detail = await _get(session, task_id, deadline, request_timeout, budget)
            task = {**parse(detail, server), "taskId": task_id}
            if on_status is not None:
                answer = on_status(task)
                if inspect.isawaitable(answer):
                    await answer
        raise TaskFailed(f"task {safe_text(task_id)!r} did not end in {MAX_POLLS} polls", server=server)
    except TaskFailed as exc:
        if exc.status == "broken":
            await cancel(session, task_id)
        raise
    except BaseException:
        await cancel(session, task_id)
        raise


async def _get(session: Session, task_id: str, deadline: float, request_timeout: float, budget: str) -> dict[str, Any]:
    left = _left(deadline, budget, session.server)
    try:
        return await within(session, "tasks/get", task_id, deadline, min(request_timeout, left), budget)
    except RemoteError as exc:
        raise TaskFailed(
            f"the server no longer knows task {safe_text(task_id)!r} ({exc}); it was not polled again",
            server=session.server,
            task_id=task_id,
            status="lost",
        ) from None


def _ended(server: str, task: dict[str, Any], detail: dict[str, Any]) -> TaskFailed:
    status = task["status"]
    how = "was cancelled" if status == "cancelled" else "failed"
    error = detail.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        how += f" (server error {error.get('code')}: {safe_text(error['message'][:500])})"
    message = task.get("statusMessage")
    text = f"task {safe_text(task['taskId'])!r} {how}" + (f": {message}" if message else "")
    return TaskFailed(text, server=server, task_id=task["taskId"], status=status)


__all__ = ["EXTENSION", "declare_if_offered", "follow", "is_created", "parse"]

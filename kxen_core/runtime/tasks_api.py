"""The Runtime's task API (mixed into :class:`kxen_core.Runtime`): the tasks this runtime knows, and
a stored handle's status, result and cancellation (:mod:`.tasks`; docs/embedding.md, "Tasks").

A handle is what ``call_tool(..., wait=False)`` returned; it stays good after a reconnect, or in
another runtime after a restart, for as long as the server keeps the task (its ``ttl``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kxen_core.errors import InvalidArguments, TaskFailed

if TYPE_CHECKING:
    from kxen_core.protocol.progress import ProgressCallback
    from kxen_core.protocol.session import Session
    from kxen_core.runtime.server import Server


class TasksHost:
    """Mixed into :class:`kxen_core.Runtime`. The attributes below are the runtime's."""

    if TYPE_CHECKING:
        servers: dict[str, Server]

        def _ready(self, name: str) -> Server: ...

    def tasks(self, server: str | None = None) -> list[dict[str, Any]]:
        """The tasks this runtime knows (of ``server``, or of every server): each a handle's keys
        (``server``, ``taskId``, ``tool``, ``ttl``, ``created``, ``pollInterval``) plus ``status``,
        ``statusMessage`` (escaped) and ``waiting`` (a call follows it now)."""
        out: list[dict[str, Any]] = []
        for s in self.servers.values():
            if server is None or s.name == server:
                out.extend(_scrubbed(s, s.tasks.views()))
        return out

    async def server_tasks(self, server: str) -> list[dict[str, Any]]:
        """The tasks a ready server lists (``tasks/list``, when it declared ``tasks.list``; at most
        :data:`~kxen_core.runtime.tasks.MAX_LISTED` in :data:`~kxen_core.runtime.tasks.MAX_LIST_PAGES`
        pages) together with those this runtime knows of it: the keys of :meth:`tasks` (``tool``
        null for one this runtime never called, ``ttl``/``pollInterval`` as the server says) plus
        ``known`` (this runtime holds it) and ``createdAt`` (the server's timestamp, or null)."""
        from kxen_core.protocol.tasks import parse_task
        from kxen_core.runtime.tasks import MAX_LIST_PAGES, MAX_LISTED

        target = self._ready(server)
        session = target.session
        assert session is not None
        known = {v["taskId"]: {**v, "known": True, "createdAt": None} for v in target.tasks.views()}
        caps = session.initialized.capabilities if session.initialized is not None else {}
        tasks_cap = caps.get("tasks")
        listed: dict[str, dict[str, Any]] = {}
        if session.modern is None and isinstance(tasks_cap, dict) and isinstance(tasks_cap.get("list"), dict):
            cursor: Any = None
            for _ in range(MAX_LIST_PAGES):
                page = await session.request("tasks/list", {"cursor": cursor} if cursor is not None else {})
                for item in page.get("tasks") or [] if isinstance(page, dict) else []:
                    try:
                        task = parse_task(item, target.name)
                    except TaskFailed:
                        continue
                    listed[task["taskId"]] = task
                cursor = page.get("nextCursor") if isinstance(page, dict) else None
                if not isinstance(cursor, str) or len(listed) >= MAX_LISTED:
                    break
        out = []
        for task_id, task in list(listed.items())[:MAX_LISTED]:
            mine = known.pop(task_id, None)
            base = mine or {"server": target.name, "tool": None, "created": None, "waiting": False, "known": False}
            out.append({**base, **task})
        return _scrubbed(target, out + list(known.values()))

    def _task_target(self, handle: Any) -> tuple[Server, Session, dict[str, Any]]:
        from kxen_core.runtime.tasks import check_handle, modern_tasks, seconds_left

        checked = check_handle(handle)
        target = self._ready(checked["server"])
        session = target.session
        assert session is not None  # _ready says so
        if session.modern is not None and not modern_tasks(session):
            raise InvalidArguments(f"server {target.name!r} does not offer the tasks extension: it has no tasks")
        if seconds_left(checked) <= 0:
            raise TaskFailed(
                f"task {checked['taskId']!r} is past its ttl: the server no longer keeps it",
                server=target.name,
                task_id=checked["taskId"],
                status="lost",
            )
        return target, session, checked

    async def task_status(self, handle: Any) -> dict[str, Any]:
        """Ask the server (one ``tasks/get``) and return the task's status: the keys of :meth:`tasks`.
        Raises ``TaskFailed`` ("lost") when the server no longer knows the task."""
        from kxen_core.errors import RemoteError
        from kxen_core.protocol import tasks_modern
        from kxen_core.protocol.tasks import parse_task

        target, session, checked = self._task_target(handle)
        try:
            got = await session.request("tasks/get", {"taskId": checked["taskId"]})
        except RemoteError as exc:
            target.tasks.forget(checked["taskId"])
            raise TaskFailed(
                f"the server no longer knows task {checked['taskId']!r} ({exc})",
                server=target.name,
                task_id=checked["taskId"],
                status="lost",
            ) from None
        parse = parse_task if session.modern is None else tasks_modern.parse  # the extension: ttlMs, pollIntervalMs
        task = {**parse(got, target.name), "taskId": checked["taskId"]}
        known = target.tasks.get(checked["taskId"])
        waiting = known.waiting if known is not None else False
        known = target.tasks.add(checked, task["status"], task["statusMessage"], waiting=waiting)
        target.tasks.update(task)
        return _scrubbed(target, [known.view()])[0]

    async def task_result(
        self, handle: Any, *, timeout: float | None = None, on_progress: ProgressCallback | None = None
    ) -> dict[str, Any]:
        """Follow the task to its end and return its result, as the call would have (``input_required``
        goes through the elicitation and sampling hooks); at most ``timeout`` seconds (else the
        server's ``timeouts.maxTotalSeconds``) and never past the task's ttl. Raises ``TaskFailed``
        (cancelled, failed without a result, lost), ``RequestTimeout`` (the task is then cancelled
        on the wire), and what a call raises. A caller that gives up cancels the task too."""
        from kxen_core.runtime.tasks import follow_handle

        target, session, checked = self._task_target(handle)
        total = timeout if timeout is not None else target.config.timeouts.maxTotalSeconds
        known = target.tasks.get(checked["taskId"])
        task = {"taskId": checked["taskId"], "status": known.status if known else "working"}
        task.update(statusMessage=known.message if known else None, pollInterval=checked["pollInterval"])
        named = "timeouts.maxTotalSeconds" if timeout is None else "the timeout given"
        result = await follow_handle(target, session, checked, task, total, on_progress, named)
        info = target.tools_by_name.get(checked["tool"])
        if info is not None and "outputSchema" in info:
            from kxen_core.agent.tool_output import check_result

            return check_result(info, result, target.diag)
        return result

    async def cancel_task(self, handle: Any) -> dict[str, Any]:
        """Send ``tasks/cancel`` and return the task as the server then has it (the keys of
        :meth:`tasks`; ``status`` "cancelled", or the terminal status it had already reached).
        Raises ``TaskFailed`` ("lost") when the server does not know the task."""
        from kxen_core.errors import RemoteError
        from kxen_core.protocol.tasks import CANCEL_SECONDS, parse_task

        target, session, checked = self._task_target(handle)
        try:
            got = await session.request("tasks/cancel", {"taskId": checked["taskId"]}, timeout=CANCEL_SECONDS * 5)
        except RemoteError as exc:
            target.tasks.forget(checked["taskId"])
            raise TaskFailed(
                f"task {checked['taskId']!r} was not cancelled: {exc}",
                server=target.name,
                task_id=checked["taskId"],
                status="lost",
            ) from None
        try:
            task = {**parse_task(got, target.name), "taskId": checked["taskId"]}
        except TaskFailed:  # an answer without the task: cancelled as far as kxen can tell
            task = {"taskId": checked["taskId"], "status": "cancelled", "statusMessage": None}
        view = {**checked, "status": task["status"], "statusMessage": task["statusMessage"], "waiting": False}
        target.tasks.forget(checked["taskId"])
        return _scrubbed(target, [view])[0]


def _scrubbed(server: Server, views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``views`` with what kxen holds as secret scrubbed (a server's status message may quote one)."""
    secrets = server.env.secrets if server.env is not None else None
    return [secrets.data(v) for v in views] if secrets else views


__all__ = ["TasksHost"]

"""The Runtime's tool API and server lookups (mixed into :class:`kxen_core.Runtime`): the status of
every server, the tools the model sees, a tool call on the host's path (:mod:`.calls`), catalog
refreshes and resource subscriptions.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any, cast

from kxen_core.errors import UnknownTool
from kxen_core.runtime.states import State

if TYPE_CHECKING:
    from pathlib import Path

    from kxen_core.protocol.catalog import Catalog
    from kxen_core.protocol.notices import Subscription, UpdateCallback
    from kxen_core.protocol.progress import ProgressCallback
    from kxen_core.runtime.kxen_tools import AgentHost
    from kxen_core.runtime.server import Server


class ToolsHost:
    """Mixed into :class:`kxen_core.Runtime`. The attributes below are the runtime's."""

    if TYPE_CHECKING:
        servers: dict[str, Server]
        _call_tool: Any
        _timed_call_tool: Any
        _calls_log: Any
        _tool_policy: Any
        _audit: Any
        _audited_call: Any
        _found_tools: dict[str, None]
        _events: Any

    def status(self) -> list[dict[str, Any]]:
        return [server.snapshot() for server in self.servers.values()]

    def tools(
        self, server: str | None = None, *, include_hidden: bool = False, with_deferred: bool = False
    ) -> list[dict[str, Any]]:
        """The tools the model sees: each ready server's, as the server listed it, less those held
        by their pins (a definition changed or new since pinned: docs/config.md) (``title``,
        ``annotations``, ``outputSchema``, ``execution``, ``_meta``... and the schemas exactly as
        sent) plus ``server``, ``policy`` (``allow`` or ``ask``: what a call with nothing else voting
        would be; a plugin's vote or the argument guard may still ask or deny) and
        ``qualifiedName``, the provider-safe name the model sees (see
        :mod:`kxen_core.agent.tool_names`; ``name`` stays the server's own); then, without ``server``,
        kxen's own resource and prompt tools (``"server": None``, see :mod:`.kxen_tools`).

        A tool a filter (``enabledTools``, ``disabledTools``, ``annotationFilter``, the user's
        ``[[project_filters]]``) or a fixed ``deny`` (the config's, the role's) keeps from the model
        is not in it, and its calls are refused (:mod:`.server_filters`). Every listing made for a
        model API is built on this one. With ``include_hidden`` (``kxen mcp tools --all``) every
        listed tool is in it, each with ``hidden`` and ``why`` (None when shown).

        Without ``server``, while tool search is on (``[tool_search]``, :mod:`.search_tools`), only
        the ``always_visible`` server tools and those the model's searches found are in it, then
        kxen's tools and ``kxen_search_tools``;
        with ``with_deferred`` every one is in it, the others marked ``"deferred": True``, and
        ``kxen_search_tools`` is not (a model API that defers tools searches them itself)."""
        out = self._server_tools(server, include_hidden=include_hidden)
        if server is not None:
            return out
        from kxen_core.runtime import kxen_tools

        # the Runtime it is mixed into is one
        own = kxen_tools.available(cast("AgentHost", self), include_hidden=include_hidden)
        if include_hidden:
            return out + own
        from kxen_core.runtime import search_tools

        arranged = search_tools.arrange(self, out, with_deferred=with_deferred)
        if arranged is out or with_deferred:
            return arranged + own
        return arranged + own + [search_tools.entry()]

    def _server_tools(self, server: str | None, *, include_hidden: bool = False) -> list[dict[str, Any]]:
        out = []
        for s in self.servers.values():
            if (server is not None and s.name != server) or s.state != State.READY:
                continue
            out.extend(s.listed_entries() if include_hidden else s.model_entries())
        return out

    def search_tools(self, query: str, limit: int | None = None) -> list[dict[str, Any]]:
        """The model-visible server tools best matching ``query`` (SQLite FTS5's BM25 over names, titles,
        descriptions and parameters: :mod:`kxen_core.agent.tool_search`), best first, at most
        ``limit`` (1-20; default ``[tool_search] results``), each a :meth:`tools` entry plus its
        ``score``. Searches whether or not tool search is on for the model; a filtered, denied or
        held tool is never found. Raises ``InvalidArguments`` for a bad query or limit."""
        from kxen_core.runtime import search_tools

        return search_tools.search(self, query, limit)

    def forget_found_tools(self) -> None:
        """Take the tools the model found by ``kxen_search_tools`` out of :meth:`tools` again (a
        new conversation starts from the always-visible ones); a ``tools`` event when that changed it."""
        if self._found_tools:
            self._found_tools.clear()
            self._events.publish("tools", server=None)

    def tool_search_state(self) -> dict[str, Any]:
        """Whether tool search is on for the model and why (``toolSearch`` of
        :meth:`settings_snapshot`; see :func:`kxen_core.runtime.search_tools.state`)."""
        from kxen_core.runtime import search_tools

        return search_tools.state(self)

    def instructions(self) -> list[dict[str, Any]]:
        """What each ready server that sent ``instructions`` says to the model, for a host's system
        prompt: ``server``, ``scope`` (whose words: a project or remote server's are unverified),
        ``serverInfo`` and ``instructions`` (escaped, bounded, with what kxen holds as secret
        scrubbed; :mod:`.server_words`)."""
        from kxen_core.runtime.server_words import server_words

        out = []
        for s in self.servers.values():
            if s.state != State.READY:
                continue
            words = server_words(s.session)
            if words["instructions"] is None:
                continue
            secrets = s.env.secrets if s.env is not None else None
            entry = {"server": s.name, "scope": s.config.scope, "remote": s.config.is_remote, **words}
            out.append(secrets.data(entry) if secrets else entry)
        return out

    def _server(self, name: str) -> Server:
        server = self.servers.get(name)
        if server is None:
            raise UnknownTool(f"no server named {name[:40]!r}")
        return server

    def _ready(self, name: str) -> Server:
        server = self._server(name)
        if server.state != State.READY or server.session is None:
            raise server.not_ready()
        return server

    async def refresh(self, server: str, kind: str = "tools") -> Catalog:
        """Fetch one catalog (``tools``, ``resources`` or ``prompts``) of a ready server again and
        return it; what the agent sees changes at once. Raises ``ServerNotReady`` when the server
        is not ready, ``KeyError`` for an unknown kind, and what the listing raises. The catalog is
        the listing as the server sent it: a tool held by its pin (``held`` in :meth:`status`) is in
        it, but not in :meth:`tools`."""
        target = self._ready(server)
        return await target.refresh(kind)

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        server: str | None = None,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        wait: bool = True,
        as_task: bool = False,
    ) -> Coroutine[Any, Any, dict[str, Any]]:
        """Call a tool by its model-facing name (``qualifiedName`` of :meth:`tools`), or by
        ``server=`` and the tool's own name; return the server's result as it is (for the host;
        :meth:`agent_call` is the agent's view).

        Goes through the policy votes and, for ``ask``, an approval channel, before anything is sent.
        kxen's own tools (:mod:`.kxen_tools`) return their agent view as a tool result.
        With ``on_progress`` (a function or coroutine function of a :class:`kxen_core.protocol.progress.Progress`)
        the call gets the server's progress updates, the latest first, until the result is in. With
        the server's ``timeouts.resetOnProgress`` (the default) every call asks for progress, and
        each update restarts its timeout (``timeout``, else the tool's ``toolSeconds``, else
        ``requestSeconds``), up to ``maxTotalSeconds`` after it was sent (docs/config.md, "Timeouts").
        A ``structuredContent`` that breaks the tool's ``outputSchema`` gives an ``isError`` result.
        When a remote server has forgotten the session (the request was not processed), the call
        waits for the new session the server opens at once and is sent again, once (see
        :mod:`kxen_core.runtime.calls`).

        A tool whose ``execution.taskSupport`` is ``required`` (``optional`` with ``as_task=True``)
        runs as a task (2025-11-25): kxen polls it and returns its result as if the call had returned
        it; a status change reaches ``on_progress`` as a ``task <status>: <message>`` update. With
        ``wait=False`` (a task tool only) the call returns the task's *handle* at once, a plain dict
        for :meth:`task_result`, :meth:`task_status` and :meth:`cancel_task` (docs/embedding.md, "Tasks").
        """
        # a plain method handing back the call's own coroutine (``await rt.call_tool(...)``, or a
        # task of it): every call of every host passes here, and a coroutine of its own would be one
        # more frame to create, enter and resume at each step of every call
        # kxen -v: the call logged with its time (kxen_core.runtime.calls), else nothing added
        call = self._timed_call_tool if self._calls_log.isEnabledFor(20) else self._call_tool
        trail = self._audit
        if trail is not None:  # the audit trail records the call (kxen_core.runtime.audit_wiring)
            return self._audited_call(
                self,
                call,
                trail,
                name,
                arguments,
                server=server,
                timeout=timeout,
                on_progress=on_progress,
                wait=wait,
                as_task=as_task,
            )
        return call(
            self, name, arguments, server=server, timeout=timeout, on_progress=on_progress, wait=wait, as_task=as_task
        )

    @property
    def audit_path(self) -> Path | None:
        """The audit trail's file while this runtime records its calls (docs/config.md ``[audit]``), else None."""
        trail = self._audit
        return trail.path if trail is not None else None

    async def tool_policy(self, server: str, tool: str) -> tuple[str, list[str]]:
        """``(allow|ask|deny, reasons)`` of the policy votes for ``tool`` of ``server`` called with no
        arguments (a vote on the arguments may still differ for a real call)."""
        return await self._tool_policy(self, server, tool)

    async def subscribe(self, server: str, uri: str, callback: UpdateCallback) -> Subscription:
        """Call ``callback(uri)`` whenever ``server`` says ``uri`` (or a URI below it) was updated,
        until the subscription is closed (``aclose()``, ``async with``) or the server stops. Raises
        ``Unsupported`` unless it declared ``resources.subscribe``, and what the request raises."""
        return await self._ready(server).subscribe(uri, callback)


__all__ = ["ToolsHost"]

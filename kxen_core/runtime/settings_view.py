"""The Settings API's view (mixed into :class:`kxen_core.Runtime` through
:class:`.settings_api.SettingsHost`): one snapshot of everything a Settings screen shows, the
stream of changes after it (:mod:`.settings_events`), and the approvals a page or a host's own UI
holds and answers (:mod:`kxen_core.policy.pending`).

A page, a host UI and the CLI read the same things: the snapshot's ``servers`` are
:meth:`Runtime.status` entries (the same keys) with ``stderr`` added; the actions are the
runtime's own methods (``answer_approval``, ``set_remote_enabled``, ``acknowledge_remote``,
``login_start`` / ``login_poll`` / ``login_cancel`` / ``logout``, ``restart``, ``reload``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio

from kxen_core.errors import InvalidArguments
from kxen_core.runtime.states import State
from kxen_core.safe_text import safe_text

if TYPE_CHECKING:
    from kxen_core.config import Config
    from kxen_core.policy.approvals import Approvals
    from kxen_core.policy.pending import PendingApprovals
    from kxen_core.runtime.server import Server
    from kxen_core.runtime.settings_events import EventHub, Subscription

#: seconds the first snapshot waits for the initial load by default
FIRST_LOAD_WAIT = 10.0


class SettingsView:
    """Mixed into :class:`kxen_core.Runtime`. The attributes below are the runtime's."""

    if TYPE_CHECKING:
        approvals: Approvals
        config: Config | None
        servers: dict[str, Server]
        _events: EventHub
        _held: PendingApprovals | None
        _loaded: anyio.Event
        _tool_views: dict[str, tuple[Any, ...]]
        _search_seen: tuple[bool, Any]

        @property
        def problems(self) -> list[str]: ...

        def status(self) -> list[dict[str, Any]]: ...

        def remote_servers(self) -> list[dict[str, Any]]: ...

        def logins(self) -> list[dict[str, Any]]: ...

        def held_tools(self, server: str | None = None) -> list[dict[str, Any]]: ...

        def tool_search_state(self) -> dict[str, Any]: ...

    def _server_changed(self, server: Server) -> None:
        self._tools_changed(server)
        if self._events.active and self.servers.get(server.name) is server:
            self._events.publish("server", name=server.name, server=server.snapshot())
        elif not self._events.active:
            self._events.publish("server", name=server.name)  # numbered, never built: nobody listens

    def _tools_changed(self, server: Server) -> None:
        """A ``tools`` event when what the model is shown of ``server`` changed: it became ready
        or stopped being so, listed other tools, or a filter, a deny or a pin hides others. The
        dicts are compared only when one of them was replaced (they are never changed in place)."""
        seen = self._tool_views
        now = (server.state == State.READY, server.tools_by_name, server.hidden_tools, server.tool_names)
        before = seen.get(server.name)
        if before is not None and all(a is b for a, b in zip(before, now, strict=True)):
            return
        seen[server.name] = now
        if before is None and not now[0]:
            return  # a server that never showed a tool: nothing changed for the model
        if before is not None and before[0] == now[0] and (not now[0] or before[1:] == now[1:]):
            return  # replaced by equal ones (a list_changed that changed nothing), or not ready either way
        self._events.publish("tools", server=server.name)
        self._search_changed()

    def _search_changed(self) -> None:
        """A ``tools`` event with ``server`` None when tool search turned on or off or its settings
        changed: the model's whole list changes then (:mod:`.search_tools`). Not worked out while
        nobody listens (the server's own ``tools`` event numbered the change; working it out reads
        every server, for each server that changed): a listener that comes later is told of a turn
        since the last one anybody saw."""
        if not self._events.active:
            return
        from kxen_core.runtime.search_tools import settings_of

        now = (self.tool_search_state()["on"], settings_of(self))
        if now != self._search_seen:
            before, self._search_seen = self._search_seen, now
            if before[0] or now[0]:
                self._events.publish("tools", server=None)

    def _loading(self) -> bool:
        """Not entered yet, or a server is still starting. A server whose launch waits for its
        approval waits for a person -- once the request is listed, when approvals are held here
        (one request is asked at a time: the others queue behind the one listed)."""
        if not self._loaded.is_set():
            return True
        asked = self._held is None or bool(self._held.pending())
        return any(
            not s.settled.is_set() and not (s.state == State.AWAITING_APPROVAL and asked) for s in self.servers.values()
        )

    async def settings_snapshot(self, *, wait: float = FIRST_LOAD_WAIT) -> dict[str, Any]:
        """Everything a Settings screen shows, after waiting at most ``wait`` seconds for the initial
        load (every server settled, or waiting for a person's approval):

        ``loading`` (True while the runtime is not entered or a server is still starting: a screen
        says "loading", never "no servers"), ``seq`` (the last event this snapshot includes: read
        :meth:`settings_events` from here), ``servers`` (each :meth:`status` entry -- scope,
        transport, era, state, phase, error, next, tools/resources/prompts, toolsHidden, toolChars and
        toolTokens (what the model is shown of the tools, and its size), auth, scopes, diagnostics --
        plus ``stderr``, a local server's stderr tail, escaped, secrets scrubbed),
        ``problems`` (a rejected config file's, and a refused reload's), ``remote`` (``enabled``,
        ``servers``: what :meth:`remote_servers` lists, ``question``: what the person confirms for
        each), ``approvals`` (:meth:`pending_approvals`; ``held``: whether approvals wait here for
        an answer), ``logins`` (the sign-ins: :meth:`logins`) and ``pins`` (the tools whose
        definition changed or is new since their server was pinned: :meth:`held_tools`; accept
        them with :meth:`accept_pin`)."""
        if not 0 <= wait <= 600:
            raise InvalidArguments(f"wait must be between 0 and 600 seconds (got {wait})")
        if self._loading():
            sub = self._events.subscribe(max_events=16)  # only woken by it: an overflow is harmless
            try:
                with anyio.move_on_after(wait):
                    while self._loading():
                        if not self._loaded.is_set():
                            await self._loaded.wait()
                            continue
                        await sub.next()
            finally:
                sub.close()
        from kxen_core.runtime.remote_ack import QUESTION  # here: it loads the approvals' digests

        seq = self._events.seq
        servers = [self._with_stderr(entry) for entry in self.status()]
        config = self.config
        return {
            "seq": seq,
            "loading": self._loading(),
            "servers": servers,
            "problems": self.problems,
            "remote": {
                "enabled": bool(config and config.settings.mcp.remote_enabled),
                "question": QUESTION,
                "servers": self.remote_servers() if config is not None else [],
            },
            "approvals": {"held": self._held is not None, "pending": self.pending_approvals()},
            "logins": self.logins(),
            "pins": self.held_tools(),
            "toolSearch": self.tool_search_state(),
        }

    @staticmethod
    def _with_stderr(entry: dict[str, Any]) -> dict[str, Any]:
        info = entry.get("transportInfo")
        tail = info.get("stderr") if isinstance(info, dict) else None
        entry["stderr"] = safe_text(tail, multiline=True) if isinstance(tail, str) and tail else None
        return entry

    def settings_events(self, max_events: int = 256) -> Subscription:
        """Subscribe to the changes (see :mod:`.settings_events`): ``async with rt.settings_events()
        as events: async for event in events: ...``. A subscriber holds at most ``max_events``; one
        that falls behind gets an ``overflow`` event (how many it missed) and should take a fresh
        :meth:`settings_snapshot`."""
        return self._events.subscribe(max_events)

    @asynccontextmanager
    async def hold_approvals(self, bound: float = 300.0) -> AsyncIterator[PendingApprovals]:
        """While the block runs, every approval request of this runtime (a project launch, an
        ``ask`` tool call, the remote switch) waits here, before any installed channel
        (``Approvals.held``; other runtimes on the same plugin manager are not affected), until
        :meth:`answer_approval` answers it -- or ``bound`` seconds pass and it is denied (fail
        closed). Leaving the block denies what still waits. One holder at a time."""
        from kxen_core.policy.pending import PendingApprovals

        if self._held is not None:
            raise InvalidArguments("approvals are already held for this runtime")
        held = PendingApprovals(bound, on_change=self._approvals_changed)
        # this runtime's own: a plugin manager shared with other runtimes does not see it
        self._held = self.approvals.held = held
        try:
            yield held
        finally:
            self._held = self.approvals.held = None
            held.close("the approvals surface closed")

    def _approvals_changed(self) -> None:
        self._events.publish("approvals", pending=self.pending_approvals())

    def pending_approvals(self) -> list[dict[str, Any]]:
        """The approval requests waiting for an answer here (see ``PendingApprovals.pending``);
        empty while nobody holds approvals."""
        return self._held.pending() if self._held is not None else []

    def answer_approval(
        self, approval_id: str, approved: bool, *, remember: str | None = None, reason: str = ""
    ) -> None:
        """Approve or deny the waiting request ``approval_id``; its caller (a server's start, an
        agent's call) gets the answer. ``InvalidArguments`` when approvals are not held here or the
        id is not waiting."""
        if self._held is None:
            raise InvalidArguments("approvals are not held for this runtime (hold_approvals)")
        self._held.answer(approval_id, approved, remember=remember, reason=reason)


__all__ = ["FIRST_LOAD_WAIT", "SettingsView"]

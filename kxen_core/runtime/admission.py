"""Admission: may a configured server start now? Decided once per entry and config.

The gates, in order: a project entry needs a trusted workspace; a remote entry needs the user's
remote switch and the user's confirmation of that server (:mod:`.remote_ack`); an entry may be
turned off with ``enabled: false``; a user entry whose ``${VAR}``
names a variable that is not set is ``failed`` in phase ``config`` (with the variable and the next
step) and never started. A project entry that may not start
gives way to the user entry of the same name, when that one may; a project entry that starts in
place of a user entry says so in its note. (A project *local* server also
needs its exact launch approved; that is asked when it starts: :func:`approve_launch`.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import attrs

from kxen_core.launch.resolve import resolve_launch
from kxen_core.policy import ApprovalRequest
from kxen_core.runtime.remote_ack import NOT_ACKNOWLEDGED, acknowledged
from kxen_core.runtime.states import Phase, State

if TYPE_CHECKING:
    from kxen_core.config import Config, ServerConfig
    from kxen_core.launch.resolve import Launch


@attrs.frozen(kw_only=True)
class Admission:
    """The decision for one entry: ``run`` is the entry to start (the project entry, or the user
    entry standing in), or ``None`` with the ``state`` it stays in and why."""

    run: ServerConfig | None
    state: State = State.CONNECTING
    phase: Phase | None = None
    error: str | None = None
    note: str | None = None


def gate(config: Config, server: ServerConfig) -> Admission | None:
    """Why ``server`` may not start now; None when it may."""
    if server.scope == "project" and not config.trusted:
        return Admission(run=None, state=State.AWAITING_TRUST, error="the workspace is not trusted (kxen trust)")
    if server.is_remote and not config.settings.mcp.remote_enabled:
        return Admission(
            run=None, state=State.DISABLED, note="remote MCP is off ([mcp] remote_enabled = true in user settings)"
        )
    if server.is_remote and not acknowledged(config, server):
        return Admission(run=None, state=State.DISABLED, error=NOT_ACKNOWLEDGED)
    if not server.enabled:
        return Admission(run=None, state=State.DISABLED)
    if server.unset:
        from kxen_core.config.expand import unset_reason

        return Admission(run=None, state=State.FAILED, phase=Phase.CONFIG, error=unset_reason(server))
    return None


def admit(config: Config, entry: ServerConfig) -> Admission:
    """Start ``entry``, a user entry in its place, or nothing (with the state and the reason)."""
    refused = gate(config, entry)
    if refused is None:
        return Admission(run=entry, note=replaces(config, entry))
    fallback = user_fallback(config, entry.name) if entry.scope == "project" else None
    if fallback is not None:
        why = refused.error or refused.note or refused.state.value
        return Admission(run=fallback, note=f"the project entry is not used ({why}); using the user entry")
    return refused


def replaces(config: Config, entry: ServerConfig) -> str | None:
    """The note when a project entry replaces the user entry of the same name (never silently)."""
    user = config.user_servers.get(entry.name) if entry.scope == "project" else None
    if user is None:
        return None
    return f"the project entry ({describe(entry)}) replaces the user entry of this name ({describe(user)})"


def describe(server: ServerConfig) -> str:
    """A server's kind and what stands behind it (URL with query values hidden, or command)."""
    from kxen_core.safe_text import shown_url

    if server.is_remote:
        return f"{server.kind} {shown_url(server)}"
    return f"{server.kind} {server.command!r}" if server.command is not None else server.kind


def user_fallback(config: Config, name: str) -> ServerConfig | None:
    """The user entry named ``name`` when it may start now."""
    fallback = config.user_servers.get(name)
    if fallback is not None and gate(config, fallback) is None:
        return fallback
    return None


def why_replaced(config: Config, name: str) -> str:
    """A clear reason for stopping a running server on reload."""
    entry = config.servers.get(name)
    if entry is None:
        return "it was removed from the configuration"
    decision = admit(config, entry)
    if decision.run is None:
        return f"it is now {decision.state.value} ({decision.error or decision.note or 'by configuration'})"
    return "its configuration changed (reload)"


class Gated(Protocol):
    """What gating a launch needs of a server (a :class:`kxen_core.runtime.server.Server`)."""

    env: Any
    config: ServerConfig
    fingerprint: str | None
    awaiting_launch: Launch | None
    state: State
    note: str | None

    def set(self, state: State, phase: Any = None, error: str | None = None) -> None: ...

    def changed(self) -> None: ...


async def approve_launch(target: Gated, launch: Launch) -> tuple[ServerConfig, Launch | None] | None:
    """Gate the project local server ``target`` (a :class:`kxen_core.runtime.server.Server`) on the approval of
    its exact launch; None = do not start.

    A user entry of the same name stands in when the project entry is not approved.
    """
    env = target.env
    assert env is not None
    server = target.config
    target.fingerprint = launch.fingerprint
    target.state = State.AWAITING_APPROVAL  # not settled while a channel is asking
    target.changed()
    decision = await env.approvals.ask(
        ApprovalRequest(
            kind="stdio_launch",
            server=server.name,
            summary=(
                f"start project MCP server {server.name!r} from {server.source}"
                if server.scope == "project"
                else f"start MCP server {server.name!r} from {server.source}: it runs what the workspace holds"
            ),
            details=launch.display(),
            fingerprint=launch.fingerprint,
        )
    )
    if decision.approved:
        target.fingerprint = None
        return server, launch  # start exactly what was approved: no second lookup
    fallback = env.fallback(server.name) if server.scope == "project" else None
    if fallback is not None:
        target.config = fallback
        target.note = f"the project entry was not approved ({decision.reason}); using the user entry"
        return fallback, (None if fallback.is_remote else resolve_launch(fallback, env.workspace))
    held = f"held: {launch.held}; " if launch.held else ""
    target.awaiting_launch = launch  # a call that also needs an approval names both fingerprints
    target.set(
        State.AWAITING_APPROVAL,
        None,
        f"{held}not approved ({decision.reason}); approve this exact launch with --approve {launch.fingerprint}",
    )
    return None


__all__ = ["Admission", "admit", "approve_launch", "describe", "gate", "replaces", "user_fallback", "why_replaced"]

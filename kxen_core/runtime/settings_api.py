"""The Runtime's settings actions (mixed into :class:`kxen_core.Runtime`): the remote switch, decisions
on approval requests, what would start and what waits for approval, config problems.

What these act on (the config, the servers, the approvals) is the runtime's own (:mod:`.workspace`);
what they use loads on the first call, not with the runtime (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from kxen_core.errors import ApprovalDenied, ConfigError, ConnectError, InvalidArguments
from kxen_core.runtime.settings_view import SettingsView

if TYPE_CHECKING:
    from kxen_core.config import Config, ServerConfig
    from kxen_core.launch.resolve import Launch
    from kxen_core.policy import ApprovalDecision, ApprovalRequest
    from kxen_core.policy.approvals import Approvals


class SettingsHost(SettingsView):
    """Mixed into :class:`kxen_core.Runtime`: the Settings API (its snapshot, events and held
    approvals: :class:`.settings_view.SettingsView`). The attributes below are the runtime's."""

    if TYPE_CHECKING:
        home: Path | None
        host_settings: Mapping[str, Any] | None
        workspace: Path
        config: Config | None
        approvals: Approvals
        _rejected: list[str]

        def load(self) -> Config: ...

        async def reload(
            self, *, servers: Mapping[str, Any] | None = None, settings: Mapping[str, Any] | None = None
        ) -> None: ...

        async def _replace(self, config: Config) -> None: ...

    @property
    def approved(self) -> set[str]:
        """Fingerprints approved for this process (launches, tool calls); never persisted."""
        return self.approvals.approved

    @property
    def problems(self) -> list[str]:
        """Config problems of the config in force (a rejected project file) and, after a reload that
        was refused, every problem of the rejected files (the servers that ran keep running)."""
        kept = list(self.config.project_problems) if self.config else []
        return kept + [p for p in self._rejected if p not in kept]

    async def set_remote_enabled(
        self, enabled: bool, *, acknowledge: Iterable[str] | None = None, confirmed: bool = False
    ) -> bool:
        """The settings API for the remote switch: write it to user settings and reload at once.

        Turning remote MCP on is an approval request (kind ``remote_enable``) that lists each remote
        server (name, scope, URL with query values hidden, host) and asks whether the user knows its
        operator, data retention and access scope (:data:`.remote_ack.QUESTION`): without a channel
        that says yes it stays off. A yes records the confirmation of the servers named in
        ``acknowledge`` (every listed one when None) per canonical URL in the user's ``config.toml``;
        the others stay off until :meth:`acknowledge_remote`. ``confirmed=True`` says the caller
        asked the person itself, per server, with that question (a Settings page's confirmation):
        no approval request is made. Turning it off needs no approval; the reload stops every
        remote server and wakes their pending calls. Returns whether remote MCP is now on.
        """
        from kxen_core.config.trust import acknowledge_remote, set_remote_enabled

        current = bool(self.config and self.config.settings.mcp.remote_enabled)
        if enabled and current:
            return True  # already on: nothing to approve (a server not confirmed: acknowledge_remote)
        host = self.host_settings
        if host is not None and not enabled:
            # the host's mapping is never written: this runtime's copy of it turns remote MCP off
            mcp = dict(host["mcp"]) if isinstance(host.get("mcp"), Mapping) else {}
            try:
                await self.reload(settings={**host, "mcp": {**mcp, "remote_enabled": False}})
            finally:
                self._events.publish("remote", enabled=bool(self.config and self.config.settings.mcp.remote_enabled))
            return bool(self.config and self.config.settings.mcp.remote_enabled)
        home = self._settings_home()
        if enabled:
            keys = await self._confirm_remote(acknowledge, "turn remote MCP on", confirmed)
            await anyio.to_thread.run_sync(lambda: acknowledge_remote(home, keys, enable=True))
        else:
            # the write holds a cross-process lock (bounded): wait for it in a worker thread, not on the loop
            await anyio.to_thread.run_sync(set_remote_enabled, home, enabled)
        try:
            await self.reload()
        except ConfigError:
            if not enabled and self.config is not None:
                # the off switch must not fail open because of an unrelated config problem
                settings = self.config.settings
                off = attrs.evolve(settings, mcp=attrs.evolve(settings.mcp, remote_enabled=False))
                await self._replace(attrs.evolve(self.config, settings=off))
            raise
        finally:
            self._events.publish("remote", enabled=bool(self.config and self.config.settings.mcp.remote_enabled))
        return bool(self.config and self.config.settings.mcp.remote_enabled)

    def remote_servers(self) -> list[dict[str, Any]]:
        """Each configured remote server as the confirmation shows it: ``name``, ``scope``,
        ``transport``, ``url`` (query values hidden), ``host``, ``key`` (what is recorded) and
        ``acknowledged`` (loads the config first when the runtime was not entered)."""
        from kxen_core.runtime.remote_ack import remote_servers

        return remote_servers(self.config or self.load())

    async def acknowledge_remote(self, names: Iterable[str], *, confirmed: bool = False) -> list[str]:
        """Confirm the remote servers ``names`` (an approval request, kind ``remote_enable``, as for
        the switch; none with ``confirmed=True``, when the caller asked the person itself), record
        them in the user's ``config.toml`` and reload. Returns the keys written. A name that is not
        a configured remote server is a ``ConfigError``."""
        from kxen_core.config.trust import acknowledge_remote

        names = list(names)
        home = self._settings_home()  # refused before anyone is asked when the settings are the host's
        keys = await self._confirm_remote(names, "confirm remote MCP servers", confirmed)
        await anyio.to_thread.run_sync(lambda: acknowledge_remote(home, keys))
        try:
            await self.reload()
        finally:
            self._events.publish("remote", enabled=bool(self.config and self.config.settings.mcp.remote_enabled))
        return keys

    async def _confirm_remote(self, names: Iterable[str] | None, what: str, confirmed: bool) -> list[str]:
        from kxen_core.policy import ApprovalRequest
        from kxen_core.runtime.remote_ack import QUESTION

        rows = self.remote_servers()
        if names is not None:
            wanted = set(names)
            unknown = sorted(wanted - {r["name"] for r in rows})
            if unknown:
                raise ConfigError([f"remote servers: not configured remote servers: {', '.join(unknown)}"])
            rows = [r for r in rows if r["name"] in wanted]
        if confirmed:
            return [r["key"] for r in rows]
        shown = [{k: r[k] for k in ("name", "scope", "transport", "url", "host")} for r in rows]
        decision = await self.ask(
            ApprovalRequest(
                kind="remote_enable",
                server="*",
                summary=f"{what}: remote servers will receive tool arguments over the network; {QUESTION}",
                details={"remote servers": [r["name"] for r in rows], "confirm": QUESTION, "servers": shown},
            )
        )
        if not decision.approved:
            stays = "remote MCP stays off" if what.startswith("turn") else "those remote servers stay off"
            raise ApprovalDenied(f"{stays}: {decision.reason}")
        return [r["key"] for r in rows]

    def _settings_home(self) -> Path:
        """The home whose ``config.toml`` the remote switch writes; ``InvalidArguments`` when the
        settings are the host's own mapping (kxen writes no host's config)."""
        from kxen_core.config.host import HOST_SETTINGS
        from kxen_core.config.loader import default_home

        if self.host_settings is not None:
            raise InvalidArguments(
                f"the settings are the host's ({HOST_SETTINGS}): set mcp.remote_enabled and "
                "mcp.remote_acknowledged there, then reload(settings=...)"
            )
        return self.home if self.home is not None else default_home()

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        """Get a decision on ``request``: a fingerprint approved in this process, else a channel, else no."""
        return await self.approvals.ask(request)

    def pending_launches(self) -> list[tuple[ServerConfig, Launch | None, str | None]]:
        """Project local servers and their launches, approved or not, and user ones whose launch is
        held (it runs what the workspace holds), without starting anything (loads the config first
        when the runtime was not entered)."""
        from kxen_core.launch.resolve import resolve_launch

        config = self.config or self.load()
        out: list[tuple[ServerConfig, Launch | None, str | None]] = []
        for server in config.servers.values():
            if server.is_remote or server.unset:  # a server that cannot start has no launch to approve
                continue
            try:
                launch = resolve_launch(server, self.workspace)
            except ConnectError as exc:
                if server.scope == "project":
                    out.append((server, None, str(exc)))
                continue
            if server.scope == "project" or launch.held:
                out.append((server, launch, None))
        return out

    def plan(self) -> list[dict[str, Any]]:
        """What starting would do, per configured server, starting and contacting nothing (loads the
        config first when the runtime was not entered): see :mod:`kxen_core.runtime.plan`."""
        from kxen_core.runtime.plan import plan

        return plan(self.config or self.load(), self.workspace, self.approvals)


__all__ = ["SettingsHost"]

"""The Runtime's settings actions (mixed into :class:`kxen_core.Runtime`): the remote switch, decisions
on approval requests, what would start and what waits for approval, config problems.

What these act on (the config, the servers, the approvals) is the runtime's own (:mod:`.workspace`);
what they use loads on the first call, not with the runtime (docs/performance.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import attrs

from kxen_core.errors import ApprovalDenied, ConfigError, ConnectError

if TYPE_CHECKING:
    from pathlib import Path

    from kxen_core.config import Config, ServerConfig
    from kxen_core.launch.resolve import Launch
    from kxen_core.policy import ApprovalDecision, ApprovalRequest
    from kxen_core.policy.approvals import Approvals


class SettingsHost:
    """Mixed into :class:`kxen_core.Runtime`. The attributes below are the runtime's."""

    if TYPE_CHECKING:
        home: Path | None
        workspace: Path
        config: Config | None
        approvals: Approvals

        def load(self) -> Config: ...

        async def reload(self) -> None: ...

        async def _replace(self, config: Config) -> None: ...

    @property
    def approved(self) -> set[str]:
        """Fingerprints approved for this process (launches, tool calls); never persisted."""
        return self.approvals.approved

    @property
    def problems(self) -> list[str]:
        """Config problems that did not stop the load (a rejected project file)."""
        return list(self.config.project_problems) if self.config else []

    async def set_remote_enabled(self, enabled: bool) -> bool:
        """The settings API for the remote switch: write it to user settings and reload at once.

        Turning remote MCP on is an approval request (kind ``remote_enable``): without a channel
        that says yes it stays off. Turning it off needs no approval; the reload stops every remote
        server and wakes their pending calls. Returns whether remote MCP is now on.
        """
        from kxen_core.config.trust import set_remote_enabled

        current = bool(self.config and self.config.settings.mcp.remote_enabled)
        if enabled and current:
            return True  # already on: nothing to approve
        if enabled:
            from kxen_core.policy import ApprovalRequest

            remote = sorted(n for n, s in (self.config.servers if self.config else {}).items() if s.is_remote)
            decision = await self.ask(
                ApprovalRequest(
                    kind="remote_enable",
                    server="*",
                    summary="turn remote MCP on: remote servers will receive tool arguments over the network",
                    details={"remote servers": remote},
                )
            )
            if not decision.approved:
                raise ApprovalDenied(f"remote MCP stays off: {decision.reason}")
        from kxen_core.config.loader import default_home

        home = self.home if self.home is not None else default_home()
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
        return bool(self.config and self.config.settings.mcp.remote_enabled)

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

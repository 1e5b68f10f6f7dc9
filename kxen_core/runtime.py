"""The Runtime: one workspace's servers, their states, and the calls the agent makes.

::

    async with Runtime(home=..., workspace=...) as rt:
        await rt.wait_ready()
        print(rt.status())
        result = await rt.call_tool("demo__echo", {"text": "hi"})

The runtime loads the config (fail closed), decides which servers may start (:mod:`.admission`),
runs each in its own task (:mod:`.server`), asks approvals through one :class:`.approvals.Approvals`,
and routes the agent's calls through the policy votes. States: see :class:`.server.State`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import attrs

from .errors import ApprovalDenied, ConfigError, ConnectError, UnknownTool
from .login_host import LoginHost
from .plugins import KxenPluginManager, make_plugin_manager
from .runtime_contents import ContentsHost
from .states import State

if TYPE_CHECKING:
    # what a Runtime uses loads when it is made or used, not with this module (docs/performance.md)
    from pathlib import Path

    import anyio.abc

    from .catalog import Catalog
    from .config import Config, ServerConfig
    from .launch import Launch
    from .notices import Subscription, UpdateCallback
    from .policy import ApprovalDecision, ApprovalRequest
    from .progress import ProgressCallback
    from .server import Server


class Runtime(LoginHost, ContentsHost):
    """Servers of one workspace. An async context manager; nothing starts before entering it.
    Signing in to a remote server: ``login_start``, ``login_poll``, ``login_cancel``, ``logout``
    (:mod:`.logins`)."""

    def __init__(
        self,
        *,
        home: Path | str | None = None,
        workspace: Path | str | None = None,
        pm: KxenPluginManager | None = None,
        role: str | None = None,
        only: set[str] | None = None,
        approve: Iterable[str] = (),
    ) -> None:
        from pathlib import Path

        from . import calls
        from .allow_rules import always_writer  # "always": allow in the user's toolPolicies
        from .approvals import Approvals
        from .converter import shared_converter
        from .era import EraMemory
        from .paths import resolved
        from .votes import PreparedVotes

        self.home = Path(home) if home is not None else None
        self.workspace = resolved(workspace if workspace is not None else Path.cwd())
        self.pm = pm if pm is not None else make_plugin_manager()
        self.role = role
        self.only = only  # start only these servers (e.g. for one call); None = all
        self.approvals = Approvals(self.pm, approve)
        self.approvals.allow_always = always_writer(self)
        self._votes = PreparedVotes(self.pm)  # the fixed part of each tool's policy vote, counted once
        self.config: Config | None = None
        self.servers: dict[str, Server] = {}
        self._converter = shared_converter()
        self._eras = EraMemory()  # each remote endpoint's protocol era, found once for the runtime's life
        # the call path, held here: an import statement in call_tool would run on every call
        self._call_tool, self._tool_policy = calls.call_tool, calls.tool_policy
        self._tg: anyio.abc.TaskGroup | None = None

    @property
    def approved(self) -> set[str]:
        """Fingerprints approved for this process (launches, tool calls); never persisted."""
        return self.approvals.approved

    # --- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> Runtime:
        config = self.load()  # raises ConfigError before anything starts
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._apply(config)
        # one turn of the loop before the host goes on: the servers' tasks run up to their spawn
        # first (never cancelled here: the task group is open and __aexit__ would not run)
        await anyio.lowlevel.cancel_shielded_checkpoint()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        with anyio.CancelScope(shield=True):
            for server in list(self.servers.values()):
                await server.stop("the runtime is closing")
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        return None

    def load(self) -> Config:
        """Read and check the config files (kinds and options against the installed plugins), and
        keep the result as ``self.config`` when nothing is running yet. Raises ``ConfigError``."""
        from .config import load_config

        config = load_config(self.home, self.workspace, pm=self.pm, canonical=True)
        if self.config is None:
            self.config = config
        return config

    async def reload(self) -> None:
        """Load the config again. On a bad config raise ``ConfigError`` and change nothing.

        A rejected project file is rejected whole, and the running runtime is kept: the project
        entries in force before stay (admitted again under the new settings: untrusting the
        workspace or turning remote off still stops them), and ``problems`` says why the file was
        not applied. The user's changes apply."""
        await self._replace(self._keep_project(self.load()))

    def _keep_project(self, config: Config) -> Config:
        """``config`` with the project entries of the running config when its project file was rejected."""
        if not config.project_problems or self.config is None:
            return config
        kept = {n: s for n, s in self.config.servers.items() if s.scope == "project"}
        if not kept:
            return config
        return attrs.evolve(config, servers={**config.servers, **kept})

    async def _replace(self, config: Config) -> None:
        """Apply a new config: servers whose entry and admission are unchanged keep running; the
        rest are stopped (their pending calls fail at once) and started again from the new config."""
        from .admission import admit, why_replaced

        keep = {
            n: s
            for n, s in self.servers.items()
            if config.servers.get(n) == s.entry
            and admit(config, s.entry) == s.admission
            # a held launch depends on workspace trust: started again when trust changed
            and not (s.held and s.env is not None and s.env.trusted != config.trusted)
            and not (s.state in (State.FAILED, State.NEEDS_LOGIN) and s.done.is_set())  # a reload retries it
        }
        for name, server in self.servers.items():
            if name not in keep:
                await server.stop(why_replaced(config, name))
        self.servers = dict(keep)
        self._apply(config, skip=set(keep))

    def _apply(self, config: Config, skip: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        from .admission import admit, user_fallback
        from .server import Server, ServerEnv

        self.config = config
        env = ServerEnv(
            pm=self.pm,
            workspace=self.workspace,
            approvals=self.approvals,
            settings=config.settings,
            converter=self._converter,
            fallback=lambda name: user_fallback(config, name),
            trusted=config.trusted,
            home=config.home,
            eras=self._eras,
        )
        for name, entry in config.servers.items():
            if name in skip:
                self.servers[name].env = env  # kept running: it sees the new settings from now on
                continue
            if self.only is not None and name not in self.only:
                continue
            server = self.servers[name] = Server(entry=entry, admission=admit(config, entry), env=env)
            if server.admission.run is not None:
                assert self._tg is not None
                self._tg.start_soon(server.run, name=f"kxen-server-{name}")

    async def set_remote_enabled(self, enabled: bool) -> bool:
        """The settings API for the remote switch: write it to user settings and reload at once.

        Turning remote MCP on is an approval request (kind ``remote_enable``): without a channel
        that says yes it stays off. Turning it off needs no approval; the reload stops every remote
        server and wakes their pending calls. Returns whether remote MCP is now on.
        """
        from .config.trust import set_remote_enabled

        current = bool(self.config and self.config.settings.mcp.remote_enabled)
        if enabled and current:
            return True  # already on: nothing to approve
        if enabled:
            from .policy import ApprovalRequest

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
        from .config.loader import default_home

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

    async def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until every server has settled (ready, failed, disabled, ...); False on timeout."""
        with anyio.move_on_after(timeout) as scope:
            for server in list(self.servers.values()):
                await server.settled.wait()
        return not scope.cancelled_caught

    async def stop_server(self, name: str) -> None:
        await self._server(name).stop("stop requested")

    async def restart(self, name: str) -> None:
        """Stop server ``name`` (its waiting calls fail at once with the reason, its process group
        is ended) and start it again from the current config, through the same gates (trust, the
        remote switch, approvals). Returns once the new start has begun; :meth:`wait_ready` waits."""
        old = self._server(name)
        await old.stop("restarting")
        if self.config is None or self._tg is None or name not in self.config.servers:
            return
        from .admission import admit
        from .server import Server

        entry = self.config.servers[name]
        server = self.servers[name] = Server(entry=entry, admission=admit(self.config, entry), env=old.env)
        if server.admission.run is not None:
            self._tg.start_soon(server.run, name=f"kxen-server-{name}")

    async def refresh(self, server: str, kind: str = "tools") -> Catalog:
        """Fetch one catalog (``tools``, ``resources`` or ``prompts``) of a ready server again and
        return it; what the agent sees changes at once. Raises ``ServerNotReady`` when the server
        is not ready, ``KeyError`` for an unknown kind, and what the listing raises."""
        target = self._ready(server)
        return await target.refresh(kind)

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        """Get a decision on ``request``: a fingerprint approved in this process, else a channel, else no."""
        return await self.approvals.ask(request)

    def pending_launches(self) -> list[tuple[ServerConfig, Launch | None, str | None]]:
        """Project local servers and their launches, approved or not, and user ones whose launch is
        held (it runs what the workspace holds), without starting anything (loads the config first
        when the runtime was not entered)."""
        from .launch import resolve_launch

        config = self.config or self.load()
        out: list[tuple[ServerConfig, Launch | None, str | None]] = []
        for server in config.servers.values():
            if server.is_remote:
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
        config first when the runtime was not entered): see :mod:`kxen_core.plan`."""
        from .plan import plan

        return plan(self.config or self.load(), self.workspace, self.approvals)

    # --- what the agent sees and calls --------------------------------------------------------

    def status(self) -> list[dict[str, Any]]:
        return [server.snapshot() for server in self.servers.values()]

    @property
    def problems(self) -> list[str]:
        """Config problems that did not stop the load (a rejected project file)."""
        return list(self.config.project_problems) if self.config else []

    def tools(self, server: str | None = None) -> list[dict[str, Any]]:
        """The tools the model sees: each ready server's, as the server listed it (``title``,
        ``annotations``, ``outputSchema``, ``execution``, ``_meta``... and the schemas exactly as
        sent) plus ``server`` and ``qualifiedName``, the provider-safe name the model sees (see
        :mod:`kxen_core.tool_names`; ``name`` stays the server's own); then, without ``server``,
        kxen's own resource and prompt tools (``"server": None``, see :mod:`.kxen_tools`)."""
        out = []
        for s in self.servers.values():
            name = s.name
            if (server is not None and name != server) or s.state != State.READY:
                continue
            notes = s.catalogs["tools"].notes if "tools" in s.catalogs else {}
            model_names = s.tool_names  # the server's name map (provider-safe, see tool_names)
            for tool, t in s.tools_by_name.items():  # keyed by each tool's "name"
                entry = t.copy()  # a new dict per tool (the host may change it); copied, then 2 keys set
                entry["server"], entry["qualifiedName"] = name, model_names[tool]
                if notes and tool in notes:
                    entry["notes"] = notes[tool]  # what catalog plugins annotated
                out.append(entry)
        if server is not None:
            return out
        from . import kxen_tools

        return out + kxen_tools.available(self)

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

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        server: str | None = None,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """Call a tool by its model-facing name (``qualifiedName`` of :meth:`tools`), or by
        ``server=`` and the tool's own name; return the server's result as it is (for the host;
        :meth:`agent_call` is the agent's view).

        Goes through the policy votes and, for ``ask``, an approval channel, before anything is sent.
        kxen's own tools (:mod:`.kxen_tools`) return their agent view as a tool result.
        With ``on_progress`` (a function or coroutine function of a :class:`kxen_core.progress.Progress`)
        the call asks for progress and gets the server's updates, the latest first, until the result
        is in. A ``structuredContent`` that breaks the tool's ``outputSchema`` gives an ``isError`` result.
        When a remote server has forgotten the session (the request was not processed), the call
        waits for the new session the server opens at once and is sent again, once (see
        :mod:`kxen_core.calls`).
        """
        return await self._call_tool(self, name, arguments, server=server, timeout=timeout, on_progress=on_progress)

    async def tool_policy(self, server: str, tool: str) -> tuple[str, list[str]]:
        """``(allow|ask|deny, reasons)`` of the policy votes for ``tool`` of ``server`` called with no
        arguments (a vote on the arguments may still differ for a real call)."""
        return await self._tool_policy(self, server, tool)

    async def subscribe(self, server: str, uri: str, callback: UpdateCallback) -> Subscription:
        """Call ``callback(uri)`` whenever ``server`` says ``uri`` (or a URI below it) was updated,
        until the subscription is closed (``aclose()``, ``async with``) or the server stops. Raises
        ``Unsupported`` unless it declared ``resources.subscribe``, and what the request raises."""
        return await self._ready(server).subscribe(uri, callback)


__all__ = ["Runtime"]

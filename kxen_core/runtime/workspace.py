"""The Runtime: one workspace's servers, their states, and the calls the agent makes.

::

    async with Runtime(home=..., workspace=...) as rt:
        await rt.wait_ready()
        print(rt.status())
        result = await rt.call_tool("demo__echo", {"text": "hi"})

The runtime loads the config (fail closed), decides which servers may start (:mod:`.admission`),
runs each in its own task (:mod:`.server`), asks approvals through one
:class:`kxen_core.policy.approvals.Approvals`,
and routes the agent's calls through the policy votes. States: see :class:`.states.State`.

This module holds the runtime's life (enter, load, reload, restart, close); its API is mixed in
from one module per job: tools and calls (:mod:`.tools_api`), resources and prompts
(:mod:`.contents_api`), the model-API formats (:mod:`.model_api`), settings actions
(:mod:`.settings_api`), sign-ins (:mod:`.login_api`) and pinned tool definitions (:mod:`.pins_api`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import attrs

from kxen_core.plugins.manager import KxenPluginManager, make_plugin_manager
from kxen_core.runtime.contents_api import ContentsHost
from kxen_core.runtime.login_api import LoginHost
from kxen_core.runtime.model_api import ModelHost
from kxen_core.runtime.pins_api import PinsHost
from kxen_core.runtime.settings_api import SettingsHost
from kxen_core.runtime.states import State
from kxen_core.runtime.tasks_api import TasksHost
from kxen_core.runtime.tools_api import ToolsHost

if TYPE_CHECKING:
    # what a Runtime uses loads when it is made or used, not with this module (docs/performance.md)
    from pathlib import Path

    import anyio.abc

    from kxen_core.config import Config
    from kxen_core.runtime.server import Server
    from kxen_core.safe_text import Secrets


class Runtime(ToolsHost, TasksHost, ContentsHost, ModelHost, SettingsHost, LoginHost, PinsHost):
    """Servers of one workspace. An async context manager; nothing starts before entering it.
    Signing in to a remote server: ``login_start``, ``login_poll``, ``login_cancel``, ``logout``
    (:mod:`.logins`). ``audit=True`` keeps the audit trail of decided calls unless the user's
    ``[audit] enabled`` says otherwise (docs/config.md; the ``kxen`` command passes it).

    ``servers`` and ``settings`` are a host's own config, for a host that holds it itself: the
    content of a user ``mcp.json`` (``{"mcpServers": {...}}``) and of ``config.toml`` as mappings.
    Each stands in for its file in ``home``, checked by the same rules and with the same scope
    (user), and is copied when loaded; :meth:`reload` takes new ones. kxen never writes a host's
    mapping: an approval of such a server offers no "always", and the remote switch is refused
    (change the mapping and reload)."""

    def __init__(
        self,
        *,
        home: Path | str | None = None,
        workspace: Path | str | None = None,
        pm: KxenPluginManager | None = None,
        role: str | None = None,
        only: set[str] | None = None,
        approve: Iterable[str] = (),
        audit: bool = False,
        servers: Mapping[str, Any] | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        from pathlib import Path

        from kxen_core.config.converter import shared_converter
        from kxen_core.config.paths import resolved
        from kxen_core.policy.allow_rules import always_writer  # "always": allow in the user's toolPolicies
        from kxen_core.policy.approvals import Approvals
        from kxen_core.policy.votes import PreparedVotes
        from kxen_core.protocol.era import EraMemory
        from kxen_core.runtime import calls

        self.home = Path(home) if home is not None else None
        self.workspace = resolved(workspace if workspace is not None else Path.cwd())
        self.pm = pm if pm is not None else make_plugin_manager()
        self.role = role
        self.only = only  # start only these servers (e.g. for one call); None = all
        #: the host's own config (None: the files in home), read by each load
        self.host_servers: Mapping[str, Any] | None = servers
        self.host_settings: Mapping[str, Any] | None = settings
        self.approvals = Approvals(self.pm, approve)
        self.approvals.allow_always = always_writer(self)
        self._votes = PreparedVotes(self.pm)  # the fixed part of each tool's policy vote, counted once
        self.config: Config | None = None
        self.servers: dict[str, Server] = {}
        self._converter = shared_converter()
        self._eras = EraMemory()  # each remote endpoint's protocol era, found once for the runtime's life
        # the call path, held here: an import statement in call_tool would run on every call
        self._call_tool, self._tool_policy = calls.call_tool, calls.tool_policy
        self._timed_call_tool, self._calls_log = calls.timed_call_tool, calls.log
        self._tg: anyio.abc.TaskGroup | None = None
        self._running = 0  # tasks started in _tg (by _spawn) that have not ended
        self._secrets: tuple[Config | None, Secrets] | None = None
        self._secret_sources: tuple[Any, ...] | None = None
        from kxen_core.runtime.settings_events import EventHub

        self._events = EventHub()  # the Settings API's event stream (settings_api)
        self._tool_views: dict[str, tuple[Any, ...]] = {}  # what each server last showed the model (tools events)
        self._search_seen: tuple[bool, Any] = (False, None)  # tool search on, and its settings (tools events)
        self._search_index: Any = None  # the tool-search index and state, made on first use (search_tools)
        self._search_state: Any = None
        self._found_tools: dict[str, None] = {}  # what the model's searches found, oldest first (search_tools)
        self._held = None  # the held-approvals channel while a host holds approvals (settings_view)
        self._loaded = anyio.Event()  # set once the servers of the first load were made
        self._rejected: list[str] = []  # the problems of the last reload, when it was refused
        #: the audit trail (kxen_core.policy.audit): the host's default (the kxen command: on), unless
        #: the user's [audit] enabled says otherwise; set with each config applied; None = off
        self._audit_default = audit
        self._audit: Any = None

    @property
    def secrets(self) -> Secrets:
        """What kxen scrubs (as ``***``) from everything a server sends before the agent, a terminal,
        a status or a log gets it: the config's secrets (:func:`kxen_core.config.secrets.config_secrets`)
        and the values plugins hold now (``kxen_register_secrets``: the tokens of a sign-in)."""
        cached = self._secrets
        if cached is None or cached[0] is not self.config:
            from kxen_core.config.secrets import config_secrets
            from kxen_core.plugins.secrets import secret_sources

            if self._secret_sources is None:
                self._secret_sources = secret_sources(self.pm)
            config = self.config
            servers = [*config.servers.values(), *config.user_servers.values()] if config is not None else []
            cached = self._secrets = (config, config_secrets(servers, sources=self._secret_sources))
        return cached[1]

    # --- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> Runtime:
        config = self.load()  # raises ConfigError before anything starts
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._apply(config)
        self._loaded.set()
        # one turn of the loop before the host goes on: the servers' tasks run up to their spawn
        # first (never cancelled here: the task group is open and __aexit__ would not run)
        await anyio.lowlevel.cancel_shielded_checkpoint()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        with anyio.CancelScope(shield=True):
            for server in list(self.servers.values()):
                await server.stop("the runtime is closing")
        assert self._tg is not None
        if self._running:  # a server that did not end in time, a sign-in waiting for its browser
            self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        if self._audit is not None:  # what the calls recorded is written before the host goes on (bounded)
            from kxen_core.runtime.audit_wiring import flush

            await flush()
        return None

    def load(self) -> Config:
        """Read and check the config files (kinds and options against the installed plugins), and
        keep the result as ``self.config`` when nothing is running yet. Raises ``ConfigError``."""
        from kxen_core.config import load_config

        config = load_config(
            self.home,
            self.workspace,
            pm=self.pm,
            canonical=True,
            servers=self.host_servers,
            settings=self.host_settings,
        )
        if self.config is None:
            self.config = config
        return config

    async def reload(
        self, *, servers: Mapping[str, Any] | None = None, settings: Mapping[str, Any] | None = None
    ) -> None:
        """Load the config again. On a bad config raise ``ConfigError`` and change nothing.
        ``servers`` and ``settings`` replace the host's mappings (see the class), kept only when
        the config they make is applied.

        A rejected project file is rejected whole, and the running runtime is kept: the project
        entries in force before stay (admitted again under the new settings: untrusting the
        workspace or turning remote off still stops them), and ``problems`` says why the file was
        not applied. The user's changes apply. A config rejected here is kept in ``problems``
        (and a ``problems`` event of :meth:`settings_events`) until a reload succeeds."""
        from kxen_core.errors import ConfigError

        before = (self.host_servers, self.host_settings)
        if servers is not None:
            self.host_servers = servers
        if settings is not None:
            self.host_settings = settings
        try:
            config = self.load()
        except ConfigError as exc:
            self.host_servers, self.host_settings = before
            self._rejected = [str(p) for p in exc.problems]
            self._events.publish("problems", problems=self.problems)
            raise
        had, self._rejected = self._rejected, []
        await self._replace(self._keep_project(config))
        self._search_changed()
        if had:
            self._events.publish("problems", problems=self.problems)

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
        from kxen_core.runtime.admission import admit, why_replaced

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
        from kxen_core.runtime.admission import admit, user_fallback
        from kxen_core.runtime.server import Server, ServerEnv

        self.config = config
        if self._audit is not None or self._audit_default or config.settings.audit.enabled:
            from kxen_core.runtime.audit_wiring import audited_call, trail

            self._audit, self._audited_call = trail(self, config), audited_call
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
            secrets=self.secrets,
            changed=self._server_changed,
            pins_changed=self._pins_changed,
            role=self.role,
            user_servers=config.user_servers,
        )
        for name, entry in config.servers.items():
            if name in skip:
                kept = self.servers[name]
                kept.env = env  # kept running: it sees the new settings from now on
                kept.take_entry(entry, admit(config, entry))  # and its tool filters: no new listing
                continue
            if self.only is not None and name not in self.only:
                continue
            server = self.servers[name] = Server(entry=entry, admission=admit(config, entry), env=env)
            if server.admission.run is not None:
                self._spawn(server.run, name=f"kxen-server-{name}")
        self._events.publish("servers", names=list(self.servers))

    def _spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> None:
        """Start ``fn(*args)`` in the runtime's task group, counted while it runs: the close cancels
        the group only when something still runs in it (a cancel costs each start's close its
        delivery rounds; the servers were stopped just before)."""
        assert self._tg is not None

        async def counted() -> None:
            try:
                await fn(*args)
            finally:
                self._running -= 1

        self._running += 1
        self._tg.start_soon(counted, name=name)

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
        from kxen_core.runtime.admission import admit
        from kxen_core.runtime.server import Server

        entry = self.config.servers[name]
        server = self.servers[name] = Server(entry=entry, admission=admit(self.config, entry), env=old.env)
        if server.admission.run is not None:
            self._spawn(server.run, name=f"kxen-server-{name}")
        self._events.publish("servers", names=list(self.servers))


__all__ = ["Runtime"]

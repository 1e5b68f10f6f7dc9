"""The Runtime: one workspace's servers, their states, and the calls the agent makes.

::

    async with Runtime(home=..., workspace=...) as rt:
        await rt.wait_ready()
        print(rt.status())
        result = await rt.call_tool("demo__echo", {"text": "hi"})

Each server runs in its own task inside the runtime's task group, holding its transport open until
it is stopped. States: ``disabled``, ``connecting``, ``initializing``, ``listing``, ``ready``,
``failed`` (with ``phase`` in transport | auth | initialize | catalog | call and a reason), ``stopped``.
A process that runs is not a server that is ready: ``ready`` means initialized and listed.
"""

from __future__ import annotations

import logging
from collections import deque
from pathlib import Path
from typing import Any, Iterable, Mapping

import anyio
import attrs

from . import agent_tools
from .catalog import KINDS, Catalog, CatalogPage, Verdict, fetch_catalog
from .config import Config, ServerConfig, load_config
from .errors import (
    ApprovalDenied,
    ClosedError,
    ConfigError,
    ConnectError,
    KxenError,
    PolicyDenied,
    RemoteError,
    RequestError,
    ServerNotReady,
    UnknownTool,
)
from .hookcall import acall_all, acall_first
from .plugins import KxenPluginManager, make_plugin_manager
from .policy import (
    ApprovalDecision,
    ApprovalRequest,
    StdioLaunch,
    ToolCall,
    Vote,
    combine,
    fingerprint,
    resolve_launch,
)
from .session import Session
from .transport import TransportContext

log = logging.getLogger("kxen.runtime")

SETTLED = frozenset({"disabled", "awaiting_trust", "awaiting_approval", "needs_login", "ready", "failed", "stopped"})
MAX_DIAGNOSTICS = 200
LIST_CHANGED_DEBOUNCE = 0.05


@attrs.define(eq=False)
class ServerState:
    config: ServerConfig
    state: str = "connecting"
    phase: str | None = None
    error: str | None = None
    session: Session | None = None
    catalogs: dict[str, Catalog] = attrs.field(factory=dict)
    diagnostics: deque = attrs.field(factory=lambda: deque(maxlen=MAX_DIAGNOSTICS))
    settled: anyio.Event = attrs.field(factory=anyio.Event)
    scope: anyio.CancelScope | None = None
    done: anyio.Event = attrs.field(factory=anyio.Event)
    stopping: bool = False
    refreshing: set = attrs.field(factory=set)
    changed_early: set = attrs.field(factory=set)
    tools_by_name: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    tg: Any = None  # the server's own task group while it runs (list_changed refreshes)
    note: str | None = None  # e.g. why a user entry stands in for a project entry
    entry: Any = None  # the merged config entry this state was made from (for reload)
    plan: Any = None  # the admission decision for it (for reload)
    fingerprint: str | None = None  # of a project stdio launch awaiting approval
    stream: Any = None  # the open MessageStream while the transport is up (for describe())
    close_reason: str | None = None  # why kxen stopped it ("stopped", "reload")

    @property
    def name(self) -> str:
        return self.config.name

    def set(self, state: str, phase: str | None = None, error: str | None = None) -> None:
        self.state, self.phase, self.error = state, phase, error
        if state in SETTLED:
            self.settled.set()

    def diag(self, message: str) -> None:
        self.diagnostics.append(message)

    def count(self, kind: str) -> int:
        cat = self.catalogs.get(kind)
        return len(cat.items) if cat else 0

    def snapshot(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "scope": self.config.scope,
            "transport": self.config.kind,
            "state": self.state,
            "phase": self.phase,
            "error": self.error,
            "tools": self.count("tools"),
            "resources": self.count("resources"),
            "prompts": self.count("prompts"),
            "note": self.note,
            "fingerprint": self.fingerprint,
            "transportInfo": self._describe(),
            "diagnostics": list(self.diagnostics)[-20:],
        }

    def _describe(self) -> dict[str, Any] | None:
        if self.stream is None:
            return None
        try:
            info = self.stream.describe()
        except Exception as exc:  # describe() is best effort
            return {"error": f"{type(exc).__name__}"}
        return info if isinstance(info, dict) else None


def _admit(config: Config, server: ServerConfig) -> tuple[str, str | None, str | None] | None:
    """Why ``server`` may not start now, as (state, error, note); None when it may."""
    if server.scope == "project" and not config.trusted:
        return ("awaiting_trust", "the workspace is not trusted (kxen trust)", None)
    if server.is_remote and not config.settings.mcp.remote_enabled:
        return ("disabled", None, "remote MCP is off ([mcp] remote_enabled = true in user settings)")
    if not server.enabled:
        return ("disabled", None, None)
    return None


def _why_replaced(config: Config, name: str) -> str:
    """A clear reason for stopping a running server on reload."""
    entry = config.servers.get(name)
    if entry is None:
        return "it was removed from the configuration"
    run, state, error, note = _plan(config, entry)
    if run is None:
        return f"it is now {state} ({error or note or 'by configuration'})"
    return "its configuration changed (reload)"


def _plan(config: Config, entry: ServerConfig) -> tuple[ServerConfig | None, str, str | None, str | None]:
    """(config to run or None, state if not running, error, note). A project entry that may not
    start gives way to the user entry of the same name, if that one may."""
    gate = _admit(config, entry)
    if gate is None:
        return (entry, "connecting", None, None)
    fallback = config.user_servers.get(entry.name) if entry.scope == "project" else None
    if fallback is not None and _admit(config, fallback) is None:
        why = gate[1] or gate[2] or gate[0]
        return (fallback, "connecting", None, f"the project entry is not used ({why}); using the user entry")
    return (None, *gate)


class Runtime:
    """Servers of one workspace. An async context manager; nothing starts before entering it."""

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
        self.home = Path(home) if home is not None else None
        self.workspace = Path(workspace).resolve() if workspace is not None else Path.cwd().resolve()
        self.pm = pm if pm is not None else make_plugin_manager()
        self.role = role
        self.only = only  # start only these servers (e.g. for one call); None = all
        #: fingerprints approved for this process (stdio launches, tool calls); never persisted
        self.approved: set[str] = set(approve)
        self._ask_lock = anyio.Lock()
        self.config: Config | None = None
        self.servers: dict[str, ServerState] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> Runtime:
        config = self._load()  # raises ConfigError before anything starts
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._apply(config)
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        with anyio.CancelScope(shield=True):
            for st in list(self.servers.values()):
                await self._stop(st, "the runtime is closing")
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        return None

    def _load(self) -> Config:
        return load_config(self.home, self.workspace)

    async def reload(self) -> None:
        """Load the config again. On a bad config raise ``ConfigError`` and change nothing."""
        config = self._load()
        await self._replace(config)

    async def _replace(self, config: Config) -> None:
        """Apply a new config: servers whose entry and admission are unchanged keep running; the
        rest are stopped (their pending calls fail at once) and started again from the new config."""
        old = self.servers
        keep = {
            n: st
            for n, st in old.items()
            if n in config.servers and config.servers[n] == st.entry and _plan(config, st.entry) == st.plan
        }
        for name, st in old.items():
            if name not in keep:
                await self._stop(st, _why_replaced(config, name))
        self.servers = dict(keep)
        self._apply(config, skip=set(keep))

    def _apply(self, config: Config, skip: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.config = config
        for name, entry in config.servers.items():
            if name in skip or (self.only is not None and name not in self.only):
                continue
            plan = _plan(config, entry)
            run, state, error, note = plan
            st = ServerState(config=run or entry, entry=entry, plan=plan, note=note)
            self.servers[name] = st
            if run is None:
                st.set(state, None, error)
                continue
            assert self._tg is not None
            self._tg.start_soon(self._run, st, name=f"kxen-server-{name}")

    async def set_remote_enabled(self, enabled: bool) -> bool:
        """The settings API for the remote switch: write it to user settings and reload at once.

        Turning remote MCP on is an approval request (kind ``remote_enable``): without a channel
        that says yes it stays off. Turning it off needs no approval; the reload stops every remote
        server and wakes their pending calls. Returns whether remote MCP is now on.
        """
        from .config.loader import default_home
        from .config.trust import set_remote_enabled

        current = bool(self.config and self.config.settings.mcp.remote_enabled)
        if enabled and current:
            return True  # already on: nothing to approve
        if enabled:
            decision = await self.ask(
                ApprovalRequest(
                    kind="remote_enable",
                    server="*",
                    summary="turn remote MCP on: remote servers will receive tool arguments over the network",
                    details={"remote servers": sorted(n for n, s in (self.config.servers if self.config else {}).items() if s.is_remote)},
                )
            )
            if not decision.approved:
                raise ApprovalDenied(f"remote MCP stays off: {decision.reason}")
        set_remote_enabled(self.home if self.home is not None else default_home(), enabled)
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
            for st in list(self.servers.values()):
                await st.settled.wait()
        return not scope.cancelled_caught

    async def stop_server(self, name: str) -> None:
        await self._stop(self._state(name), "stop requested")

    async def _stop(self, st: ServerState, reason: str) -> None:
        st.stopping = True
        st.close_reason = reason
        if st.session is not None:
            await st.session.aclose(f"server {st.name!r} was stopped: {reason}")
        if st.scope is not None:
            st.scope.cancel()
        if st.scope is not None or st.session is not None:
            with anyio.move_on_after(10):
                await st.done.wait()
        if st.state not in ("disabled",):
            st.set("stopped")

    # --- one server ---------------------------------------------------------------------------

    async def _run(self, st: ServerState) -> None:
        server = st.config
        phase = "transport"
        try:
            with anyio.CancelScope() as scope:
                st.scope = scope
                if server.scope == "project" and not server.is_remote:
                    approved = await self._approve_launch(st)
                    if approved is None:
                        return
                    server = approved
                transport = self.pm.hook.kxen_transport_open(server=server, context=self._context(st))
                if transport is None:
                    st.set("failed", "transport", self._missing_transport(server.kind))
                    return
                st.set("connecting")
                async with transport as stream:
                    st.stream = stream
                    phase = "initialize"
                    st.set("initializing")
                    async with Session(
                        stream,
                        server=server.name,
                        request_timeout=server.timeouts.requestSeconds,
                        initialize_timeout=server.timeouts.initializeSeconds,
                        capabilities=self._client_capabilities(server),
                        on_notification=lambda m, p: self._on_notification(st, m, p),
                        on_diagnostic=st.diag,
                        request_handlers=self._request_handlers(server),
                    ) as session:
                        st.session = session
                        init = await session.initialize()
                        phase = "catalog"
                        st.set("listing")
                        async with anyio.create_task_group() as tg:
                            for kind in KINDS:
                                if kind in init.capabilities:
                                    await self._list(st, kind, required=(kind == "tools"))
                            st.tg = tg
                            st.set("ready")
                            # a list_changed that came while we were listing: fetch that kind again now
                            for kind in sorted(st.changed_early):
                                self._on_notification(st, f"notifications/{kind}/list_changed", None)
                            st.changed_early.clear()
                            await session.closed_event.wait()
                            st.tg = None
                            tg.cancel_scope.cancel()
                        if not st.stopping:
                            st.set("failed", "transport", session.close_reason or "connection closed")
        except KxenError as exc:
            if not st.stopping:
                st.set("failed", phase, str(exc))
        except Exception as exc:  # a plugin bug must not take the runtime down
            if not st.stopping:
                st.set("failed", phase, f"{type(exc).__name__}: {exc}")
            log.debug("server %s failed", server.name, exc_info=True)
        finally:
            st.session = None
            if st.stopping:
                st.set("stopped")
            elif st.state not in SETTLED:
                st.set("failed", phase, "stopped unexpectedly")
            st.stream = None
            st.done.set()
            try:
                self.pm.hook.kxen_transport_closed(server=server, reason=st.close_reason or st.error or st.state)
            except Exception as exc:  # an observer must not take the runtime down
                st.diag(f"a kxen_transport_closed observer failed: {type(exc).__name__}: {exc}")

    async def _approve_launch(self, st: ServerState) -> ServerConfig | None:
        """Gate a project stdio server on the approval of its exact launch; None = do not start it.

        A user entry of the same name stands in when the project entry is not approved.
        """
        server = st.config
        launch = resolve_launch(server, self.workspace)  # ConnectError -> failed(transport)
        st.fingerprint = launch.fingerprint
        st.state = "awaiting_approval"  # not settled while a channel is asking
        request = ApprovalRequest(
            kind="stdio_launch",
            server=server.name,
            summary=f"start project MCP server {server.name!r} from {server.source}",
            details=launch.display(),
            fingerprint=launch.fingerprint,
        )
        decision = await self.ask(request)
        if decision.approved:
            # start exactly what was approved: the resolved command and cwd, not a second lookup
            st.fingerprint = None
            if server.kind != "stdio":
                return server
            return attrs.evolve(server, command=launch.command, cwd=launch.cwd)
        fallback = self.config.user_servers.get(server.name) if self.config else None
        if fallback is not None and self.config is not None and _admit(self.config, fallback) is None:
            st.config = fallback
            st.note = f"the project entry was not approved ({decision.reason}); using the user entry"
            return fallback
        st.set(
            "awaiting_approval",
            None,
            f"not approved ({decision.reason}); approve this exact launch with --approve {launch.fingerprint}",
        )
        return None

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        """Get a decision on ``request``: a fingerprint approved in this process, else a channel, else no."""
        earlier = ApprovalDecision(approved=True, reason="approved earlier in this process", channel="process")
        if request.fingerprint and request.fingerprint in self.approved:
            return earlier
        async with self._ask_lock:  # one prompt at a time
            if request.fingerprint and request.fingerprint in self.approved:
                return earlier  # approved while this request waited for the lock
            try:
                answer = await acall_first(self.pm, "kxen_approval_prompt", request=request)
            except KxenError as exc:
                log.warning("approval channel failed: %s", exc)
                return ApprovalDecision(approved=False, reason=f"approval channel failed: {exc}")
        if not isinstance(answer, ApprovalDecision):
            return ApprovalDecision(approved=False, reason="no approval channel is available")
        if answer.approved and request.fingerprint:
            self.approved.add(request.fingerprint)
        if not answer.approved and not answer.reason:
            answer = attrs.evolve(answer, reason="declined")
        return answer

    def pending_launches(self) -> list[tuple[ServerConfig, StdioLaunch | None, str | None]]:
        """Project stdio servers and their launches, approved or not, without starting anything."""
        out = []
        for server in (self.config.servers.values() if self.config else ()):
            if server.scope != "project" or server.is_remote:
                continue
            try:
                out.append((server, resolve_launch(server, self.workspace), None))
            except ConnectError as exc:
                out.append((server, None, str(exc)))
        return out

    def _context(self, st: ServerState) -> TransportContext:
        return TransportContext(
            workspace=self.workspace,
            diagnostic=st.diag,
            pm=self.pm,
            settings=self.config.settings if self.config else None,
        )

    def _missing_transport(self, kind: str) -> str:
        failure = self.pm.failure_for_kind(kind)
        if failure is not None:
            return f"the plugin for transport {kind!r} ({failure.display()}) failed to load: {failure.error}"
        return f"no installed plugin provides transport {kind!r} (install the matching kxen extra)"

    def _client_capabilities(self, server: ServerConfig) -> dict[str, Any]:
        # local servers may see the workspace as a root; remote ones get nothing by default
        return {} if server.is_remote else {"roots": {"listChanged": False}}

    def _request_handlers(self, server: ServerConfig) -> dict[str, Any]:
        workspace = self.workspace

        async def roots_list(params: Mapping[str, Any]) -> dict[str, Any]:
            if server.is_remote:
                return {"roots": []}
            return {"roots": [{"uri": workspace.as_uri(), "name": workspace.name}]}

        return {"roots/list": roots_list}

    async def _list(self, st: ServerState, kind: str, *, required: bool) -> None:
        method = KINDS[kind][0]
        session = st.session
        assert session is not None

        async def fetch(cursor: str | None) -> dict[str, Any]:
            return await session.request(method, {"cursor": cursor} if cursor is not None else None)

        settings = self.config.settings if self.config else None

        async def judge(page: CatalogPage) -> list[tuple[str, Verdict]]:
            page = attrs.evolve(page, settings=settings)
            answers = await acall_all(self.pm, "kxen_catalog_page", server=st.config, kind=kind, page=page)
            return [(plugin, v) for plugin, verdicts in answers for v in verdicts]

        try:
            catalog = await fetch_catalog(kind, fetch, judge=judge)
        except (RequestError, ClosedError) as exc:
            if required:
                raise
            st.diag(f"{method} failed: {exc}")
            return
        for message in catalog.diagnostics:
            st.diag(f"{kind}: {message}")
        st.catalogs[kind] = catalog
        if kind == "tools":
            st.tools_by_name = {t["name"]: t for t in catalog.items}

    def _on_notification(self, st: ServerState, method: str, params: Any) -> None:
        if method.endswith("/list_changed"):
            kind = method.split("/")[1]
            if kind not in KINDS:
                return
            if st.tg is None:
                st.changed_early.add(kind)  # still listing: refetch once ready
            elif kind not in st.refreshing:
                st.refreshing.add(kind)
                st.tg.start_soon(self._refresh, st, kind)

    async def _refresh(self, st: ServerState, kind: str) -> None:
        await anyio.sleep(LIST_CHANGED_DEBOUNCE)  # a burst of list_changed becomes one refetch
        st.refreshing.discard(kind)
        try:
            await self._list(st, kind, required=False)
        except KxenError as exc:
            st.diag(f"refreshing {kind} failed: {exc}")

    # --- what the agent sees and calls --------------------------------------------------------

    def status(self) -> list[dict[str, Any]]:
        return [st.snapshot() for st in self.servers.values()]

    @property
    def problems(self) -> list[str]:
        """Config problems that did not stop the load (a rejected project file)."""
        return list(self.config.project_problems) if self.config else []

    def tools(self, server: str | None = None) -> list[dict[str, Any]]:
        out = []
        for st in self.servers.values():
            if server is not None and st.name != server:
                continue
            if st.state != "ready":
                continue
            for tool in st.tools_by_name.values():
                out.append(
                    {
                        "server": st.name,
                        "name": tool["name"],
                        "qualifiedName": agent_tools.qualified_name(st.name, tool["name"]),
                        "description": tool.get("description"),
                        "inputSchema": tool.get("inputSchema") or {"type": "object"},
                    }
                )
        return out

    def _state(self, name: str) -> ServerState:
        st = self.servers.get(name)
        if st is None:
            raise UnknownTool(f"no server named {name[:40]!r}")
        return st

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        server: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Call a tool by qualified name (``server__tool``), or by ``server=`` and the tool's own name.

        Goes through the policy votes and, for ``ask``, an approval channel, before anything is sent.
        """
        if server is None:
            try:
                server, tool = agent_tools.split_qualified(name)
            except ValueError as exc:
                raise UnknownTool(str(exc)) from None
        else:
            tool = name
        st = self._state(server)
        if st.state != "ready" or st.session is None:
            raise ServerNotReady(st.name, st.state, st.phase, st.error)
        info = st.tools_by_name.get(tool)
        if info is None:
            raise UnknownTool(f"server {server!r} has no tool {tool[:80]!r}")
        args = dict(arguments or {})
        call = ToolCall(
            server=st.config,
            tool=tool,
            arguments=args,
            role=self.role,
            tool_info=info,
            settings=self.config.settings if self.config else None,
        )
        await self._authorize(call)
        return await st.session.request("tools/call", {"name": tool, "arguments": args}, timeout=timeout)

    async def _authorize(self, call: ToolCall) -> None:
        def as_deny(err: KxenError) -> Vote:
            return Vote.deny(f"policy plugin failed: {err}")

        answers = await acall_all(self.pm, "kxen_policy_decision", call=call, on_error=as_deny)
        votes = []
        for plugin, v in answers:
            if not isinstance(v, Vote) or v.decision not in ("allow", "ask", "deny"):
                # an answer that is not a valid vote is a broken plugin: fail closed, name it
                v = Vote.deny(f"returned {type(v).__name__} instead of a Vote")
            votes.append(attrs.evolve(v, plugin=plugin))
        decision, why = combine(votes, call.server.defaultToolPolicy)
        label = agent_tools.qualified_name(call.server.name, call.tool)
        if decision == "deny":
            reasons = "; ".join(f"{v.plugin}: {v.reason}" for v in why)
            raise PolicyDenied(f"{label} denied by policy ({reasons})", why)
        if decision == "ask":
            fp = fingerprint({"server": call.server.name, "tool": call.tool, "arguments": call.arguments})
            request = ApprovalRequest(
                kind="tool_call",
                server=call.server.name,
                summary=f"call tool {label}",
                details={"tool": call.tool, "arguments": call.arguments, "why": [v.reason for v in why]},
                fingerprint=fp,
            )
            answer = await self.ask(request)
            if not answer.approved:
                raise ApprovalDenied(f"{label} needs approval: {answer.reason} (fingerprint {fp})")


__all__ = ["Runtime", "ServerState", "ConfigError", "RemoteError"]

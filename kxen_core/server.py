"""One server's supervised life: gate, open, initialize, list, refresh, stop.

A :class:`Server` runs as one task in the runtime's task group and holds its transport open until
it is stopped or the connection ends, moving through the states of :mod:`kxen_core.states`. A
process that runs is not a server that is ready: ``ready`` means initialized and listed.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import attrs

from .admission import approve_launch
from .catalog import CAPABILITY, FIRST_PAGES, KINDS, Catalog, kinds_of
from .client_requests import client_capabilities, request_handlers
from .era import EraMemory, handshake_only, open_session
from .errors import AuthRequired, KxenError, Unsupported
from .failures import failure_text, real_cause
from .launch import Launch, resolve_launch
from .notices import ServerLog, Subscription, Subscriptions, UpdateCallback
from .progress import ProgressRoutes
from .reconnect import Backoff
from .server_catalogs import LIST_CHANGED_DEBOUNCE, CatalogLists
from .server_view import ServerView
from .session import Session
from .states import SETTLED, Phase, State
from .transport import MessageStream, TransportContext

if TYPE_CHECKING:
    import cattrs

    from .admission import Admission
    from .approvals import Approvals
    from .config import ServerConfig, Settings
    from .plugins import KxenPluginManager

log = logging.getLogger("kxen.server")

MAX_DIAGNOSTICS = 200
MAX_TIMELINE = 64
STOP_WAIT_SECONDS = 10


@attrs.frozen(kw_only=True)
class ServerEnv:
    """What every server of one runtime shares: the plugins, the workspace, the approvals, the
    settings of the config it was started from, and a way to find a user entry standing in."""

    pm: KxenPluginManager
    workspace: Path
    approvals: Approvals
    settings: Settings
    converter: cattrs.Converter
    #: the user entry that may start in place of a project entry of this name, if any
    fallback: Callable[[str], ServerConfig | None]
    #: whether the user trusts the workspace (a user launch that runs workspace files needs it)
    trusted: bool = False
    #: the kxen home (transports keep per-server files under it: stderr logs)
    home: Path | None = None
    eras: EraMemory | None = None  # the protocol era of each remote endpoint, for the runtime's life


@attrs.define(eq=False)
class Server(CatalogLists, ServerView):
    """One configured server and, while it runs, its transport and session (its catalogs: see
    :class:`kxen_core.server_catalogs.CatalogLists`; its status: :class:`kxen_core.server_view.ServerView`)."""

    entry: ServerConfig  # the merged config entry this server was made from
    admission: Admission  # the decision to start it (or why not)
    env: ServerEnv | None = None
    config: ServerConfig = attrs.field(init=False)  # what runs: the entry, or a user entry standing in
    state: State = State.CONNECTING
    phase: Phase | None = None
    error: str | None = None
    note: str | None = None  # e.g. why a user entry stands in for a project entry
    auth: AuthRequired | None = None  # what the server wants, while it is needs_login
    fingerprint: str | None = None  # of a project launch awaiting approval
    launch: Launch | None = None  # what runs, for a local server (tool-call approvals are bound to it)
    held: bool = False  # its launch runs what the workspace holds: it depends on workspace trust
    session: Session | None = None
    stream: MessageStream | None = None  # while the transport is up (for describe())
    catalogs: dict[str, Catalog] = attrs.field(factory=dict)
    tools_by_name: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    tool_names: dict[str, str] = attrs.field(factory=dict)  # tool -> its model-facing name
    model_tools: dict[str, str] = attrs.field(factory=dict)  # model-facing name -> tool
    diagnostics: deque[str] = attrs.field(factory=lambda: deque(maxlen=MAX_DIAGNOSTICS))
    # lambdas: ``anyio.Event`` named here would load anyio's synchronization modules on import
    settled: anyio.Event = attrs.field(factory=lambda: anyio.Event())
    done: anyio.Event = attrs.field(factory=lambda: anyio.Event())
    stopping: bool = False
    close_reason: str | None = None  # why kxen stopped it ("stop requested", "reload"...)
    _scope: anyio.CancelScope | None = None
    _tg: anyio.abc.TaskGroup | None = None  # while ready: list_changed refreshes run here
    _refreshing: set[str] = attrs.field(factory=set)
    _changed_early: set[str] = attrs.field(factory=set)
    _expiring: dict[str, float] = attrs.field(factory=dict)  # catalog kind -> its caching hint (s)
    _expiry_running: set[str] = attrs.field(factory=set)
    _connected: anyio.Event = attrs.field(factory=lambda: anyio.Event())  # set while a session is ready
    #: (monotonic time, state) of each state it entered, the first MAX_TIMELINE (kxen mcp doctor)
    timeline: list[tuple[float, State]] = attrs.field(factory=lambda: [(time.monotonic(), State.CONNECTING)])
    progress: ProgressRoutes = attrs.field(init=False)  # notifications/progress -> the call's callback
    server_log: ServerLog = attrs.field(init=False)  # notifications/message, bounded
    subscriptions: Subscriptions = attrs.field(init=False)  # notifications/resources/updated

    def __attrs_post_init__(self) -> None:
        self.config = self.admission.run or self.entry
        self.progress = ProgressRoutes("kxen", self.diag)
        self.server_log = ServerLog(self.config.name)
        self.subscriptions = Subscriptions(self.diag)
        self.note = self.admission.note
        if self.admission.run is None:
            self.set(self.admission.state, None, self.admission.error)

    @property
    def name(self) -> str:
        return self.config.name

    def set(self, state: State, phase: Phase | None = None, error: str | None = None) -> None:
        self.state, self.phase, self.error = State(state), Phase(phase) if phase else None, error
        if len(self.timeline) < MAX_TIMELINE:
            self.timeline.append((time.monotonic(), self.state))
        if self.state in SETTLED:
            self.settled.set()

    def diag(self, message: str) -> None:
        self.diagnostics.append(message)

    # --- life -----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Gate, open, initialize and list; then serve until stopped or the connection ends. A
        remote server whose connection fails or ends, or whose session expires, connects again by
        itself (:mod:`kxen_core.reconnect`); a local one stays failed until it is restarted. A
        remote server that refused kxen's credentials waits in ``needs_login`` (phase ``auth``)."""
        env = self.env
        assert env is not None
        server = self.config
        phase = Phase.TRANSPORT
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                gated = await self._gate(env)
                if gated is None:
                    return
                server, launch, kind = gated
                backoff = Backoff()
                while True:
                    phase, failure, was_ready = await self._connect_once(server, launch, kind, env)
                    if self.stopping or self.settle_auth(failure):
                        return  # an auth failure waits for a sign-in or a restart: not retried
                    reason = failure_text(failure) if isinstance(failure, BaseException) else failure
                    delay = backoff.next(failure, was_ready) if server.is_remote else None
                    if delay is None:
                        self.set(State.FAILED, phase, backoff.gave_up(reason))
                        return
                    self.set(State.FAILED, phase, f"{reason}; {backoff.describe(delay)}")
                    self.diag(f"reconnecting ({backoff.describe(delay)}) after: {reason}")
                    await anyio.sleep(delay)
        except Exception as exc:  # a kxen error, or a plugin bug: it must not take the runtime down
            if not self.stopping and not self.settle_auth(exc):
                self.set(State.FAILED, phase, failure_text(exc))
            if not isinstance(real_cause(exc), KxenError):
                log.debug("server %s failed", server.name, exc_info=True)
        finally:
            if self.stopping:
                self.set(State.STOPPED)
            elif self.state not in SETTLED:
                self.set(State.FAILED, phase, "stopped unexpectedly")
            self.done.set()
            try:
                env.pm.hook.kxen_transport_closed(
                    server=server, reason=self.close_reason or self.error or self.state.value
                )
            except Exception as exc:  # an observer must not take the runtime down
                self.diag(f"a kxen_transport_closed observer failed: {type(exc).__name__}: {exc}")

    async def _gate(self, env: ServerEnv) -> tuple[ServerConfig, Launch | None, Any] | None:
        """The launch (resolved once, approved when it must be) and the transport kind; None when
        the server may not start (its state says why)."""
        server = self.config
        launch = None
        if not server.is_remote:
            launch = resolve_launch(server, env.workspace, canonical=True)  # ConnectError -> failed(transport)
            self.held = launch.held is not None
            if server.scope != "project" and launch.held and not env.trusted:
                # a user server that would run what the workspace holds: never in an untrusted one
                self.fingerprint = launch.fingerprint
                self.set(
                    State.AWAITING_TRUST,
                    None,
                    f"held: {launch.held}; trust the workspace (kxen trust) and approve this exact "
                    f"launch with --approve {launch.fingerprint}",
                )
                return None
            if server.scope == "project" or launch.held:
                approved = await approve_launch(self, launch)
                if approved is None:
                    return None
                server, launch = approved
        self.launch = launch
        kind = env.pm.transports.get(server.kind)
        if kind is None:
            self.set(State.FAILED, Phase.TRANSPORT, env.pm.transports.unknown_rule(server.kind, env.pm.broken()))
            return None
        return server, launch, kind

    async def _connect_once(
        self, server: ServerConfig, launch: Launch | None, kind: Any, env: ServerEnv
    ) -> tuple[Phase, BaseException | str | None, bool]:
        """One connection: open, initialize, list, serve until it ends. Returns the phase it ended
        in, what ended it (None when kxen stopped it) and whether it had been ready."""
        phase, was_ready = Phase.TRANSPORT, False
        try:
            context = TransportContext(
                workspace=env.workspace,
                diagnostic=self.diag,
                pm=env.pm,
                settings=env.settings,
                options=env.pm.transports.options_for(server, env.converter),
                launch=launch,
                home=env.home,
            )
            transport = kind.opener(server, context)
            self.set(State.CONNECTING)
            async with transport as stream:
                self.stream = stream
                phase = Phase.INITIALIZE
                self.set(State.INITIALIZING)
                async with Session(
                    stream,
                    server=server.name,
                    request_timeout=server.timeouts.requestSeconds,
                    initialize_timeout=server.timeouts.initializeSeconds,
                    capabilities=client_capabilities(env.pm, server),
                    on_notification=self._on_notification,
                    on_diagnostic=self.diag,
                    request_handlers=request_handlers(env.pm, server, env.workspace, self.diag),
                ) as session:
                    self.session = session
                    init = await open_session(
                        session,
                        server,
                        env.eras,
                        refetch_tools=self.refetch_tools,
                        legacy_only=handshake_only(stream),
                        diag=self.diag,
                        prefetch=FIRST_PAGES,
                    )
                    phase = Phase.CATALOG
                    self.set(State.LISTING)
                    async with anyio.create_task_group() as tg:
                        for kind_name in KINDS:
                            if CAPABILITY[kind_name] in init.capabilities:
                                await self._list(kind_name, required=(kind_name == "tools"))
                        self._tg = tg
                        self.subscriptions.request, self.subscriptions.start = session.request, tg.start_soon
                        self.set(State.READY)
                        was_ready = True
                        self._connected.set()
                        # a list_changed that came while we were listing: fetch that kind again now
                        for kind_name in sorted(self._changed_early):
                            self._list_changed(kind_name)
                        self._changed_early.clear()
                        self.start_expiry()  # catalogs with a caching hint: fetched again when it runs out
                        await session.closed_event.wait()
                        self._tg = None
                        tg.cancel_scope.cancel()
                    phase = Phase.TRANSPORT
                    if self.stopping:
                        return phase, None, was_ready
                    return phase, session.close_error or session.close_reason or "connection closed", was_ready
        except Exception as exc:  # a task group (the listing's, a transport's) wraps the cause: kept
            return phase, (None if self.stopping else exc), was_ready
        finally:
            self.session = None
            self.stream = None
            self.subscriptions.reset()
            self._connected = anyio.Event()  # the next session is a new one

    async def next_session(self, old: Session | None, timeout: float) -> Session | None:
        """Wait (at most ``timeout`` s) for a session other than ``old`` to be ready, as after a
        reconnection; None when there is none by then or the server failed for good or stopped."""
        with anyio.move_on_after(timeout):
            while not self.stopping:
                session = self.session
                if session is not None and session is not old and self.state == State.READY:
                    return session
                if self.done.is_set():
                    return None
                with anyio.move_on_after(0.5):  # a state change without an event (failed for good)
                    await self._connected.wait()
        return None

    async def stop(self, reason: str) -> None:
        """Stop: pending calls fail at once, the transport closes (bounded)."""
        self.stopping = True
        self.close_reason = reason
        if self.session is not None:
            await self.session.aclose(f"server {self.name!r} was stopped: {reason}")
        if self._scope is not None:
            self._scope.cancel()
        if self._scope is not None or self.session is not None:
            with anyio.move_on_after(STOP_WAIT_SECONDS):
                await self.done.wait()
        if self.state != State.DISABLED:
            self.set(State.STOPPED)

    async def subscribe(self, uri: str, callback: UpdateCallback) -> Subscription:
        """Subscribe to updates of ``uri`` (``resources/subscribe``, sent once per URI); raises
        ``Unsupported`` unless the server declared ``resources.subscribe``."""
        init = self.session.initialized if self.session is not None else None
        resources = init.capabilities.get("resources") if init is not None else None
        if not (isinstance(resources, dict) and resources.get("subscribe") is True):
            raise Unsupported(f"server {self.name!r} does not offer resource subscriptions (resources.subscribe)")
        return await self.subscriptions.add(uri, callback)

    def _on_notification(self, method: str, params: Any) -> None:
        """The session reader's: O(1) per notification, never waits (see progress and notices)."""
        if method == "notifications/progress":
            self.progress.notify(params)
        elif method == "notifications/message":
            self.server_log.notify(params)
        elif method == "notifications/resources/updated":
            self.subscriptions.notify(params)
        elif method.endswith("/list_changed"):
            for kind in kinds_of(method.split("/")[1]):  # resources/list_changed: templates too
                self._list_changed(kind)


# the states are re-exported for hosts; failure_text, real_cause and LIST_CHANGED_DEBOUNCE stay importable here
__all__ = ["LIST_CHANGED_DEBOUNCE", "Phase", "SETTLED", "Server", "ServerEnv", "State", "failure_text", "real_cause"]

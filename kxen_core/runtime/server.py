"""One server's supervised life: gate, open, initialize, list, refresh, stop.

A :class:`Server` runs as one task in the runtime's task group and holds its transport open until
it is stopped or the connection ends, moving through the states of :mod:`kxen_core.runtime.states`. A
process that runs is not a server that is ready: ``ready`` means initialized and listed.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import attrs

from kxen_core.errors import AuthRequired, KxenError, Unsupported
from kxen_core.launch.resolve import Launch
from kxen_core.policy.egress import egress_for, using_egress
from kxen_core.protocol.catalog import Catalog, kinds_of
from kxen_core.protocol.listen import ACKNOWLEDGED, Listener
from kxen_core.protocol.notices import ServerLog, Subscription, Subscriptions, UpdateCallback
from kxen_core.protocol.progress import ProgressRoutes
from kxen_core.protocol.session import Session
from kxen_core.runtime.connection import Connection, ServerEnv
from kxen_core.runtime.failures import failure_text, real_cause
from kxen_core.runtime.reconnect import Backoff
from kxen_core.runtime.server_catalogs import LIST_CHANGED_DEBOUNCE, CatalogLists
from kxen_core.runtime.server_filters import ToolView
from kxen_core.runtime.server_pins import Held, PinnedTools
from kxen_core.runtime.server_view import ServerView
from kxen_core.runtime.states import SETTLED, Phase, State
from kxen_core.runtime.tasks import TaskBook
from kxen_core.transport import MessageStream

if TYPE_CHECKING:
    from kxen_core.config import ServerConfig
    from kxen_core.runtime.admission import Admission

log = logging.getLogger("kxen.server")

MAX_DIAGNOSTICS = 200
MAX_TIMELINE = 64
#: a server's note keeps at most this many notices, and this many characters
MAX_NOTES, MAX_NOTE_CHARS = 4, 2000
STOP_WAIT_SECONDS = 10


@attrs.define(eq=False)
class Server(Connection, CatalogLists, PinnedTools, ToolView, ServerView):
    """One configured server and, while it runs, its transport and session (its start and each
    connection: :class:`kxen_core.runtime.connection.Connection`; its catalogs:
    :class:`kxen_core.runtime.server_catalogs.CatalogLists`; its tools' pins:
    :class:`kxen_core.runtime.server_pins.PinnedTools`; what the model sees of its tools:
    :class:`kxen_core.runtime.server_filters.ToolView`; its status:
    :class:`kxen_core.runtime.server_view.ServerView`)."""

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
    awaiting_launch: Launch | None = None  # a launch that waits for its approval (not running)
    held: bool = False  # its launch runs what the workspace holds: it depends on workspace trust
    session: Session | None = None
    listener: Listener | None = None  # a modern session's subscriptions/listen stream (kxen_core.protocol.listen)
    stream: MessageStream | None = None  # while the transport is up (for describe())
    pid: int | None = None  # the process the last connection started (a stdio child), kept after it ends
    catalogs: dict[str, Catalog] = attrs.field(factory=dict)
    tools_by_name: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    tool_names: dict[str, str] = attrs.field(factory=dict)  # tool -> its model-facing name
    model_tools: dict[str, str] = attrs.field(factory=dict)  # model-facing name -> tool
    listed_tools: dict[str, dict[str, Any]] = attrs.field(factory=dict)  # the last listing, held ones too
    held_tools: dict[str, Held] = attrs.field(factory=dict)  # kept from the model, calls refused (pinning hold)
    unaccepted: dict[str, Held] = attrs.field(factory=dict)  # shown, changed since accepted (pinning warn)
    pin_digests: dict[str, str] = attrs.field(factory=dict)  # tool -> the digest of its listed definition
    pin_states: dict[str, str] = attrs.field(factory=dict)  # tool -> pinned, first, added, changed, ...
    _pin_listing: dict[str, Any] = attrs.field(factory=dict)  # pins.listing_of the last listing (listed_tools)
    _pin_dry: Any = None  # (document, listing, what else it depends on, Merged) of the last dry merge
    _pin_session: Any = None  # the session whose first listing found the identity unpinned
    hidden_tools: dict[str, str] = attrs.field(factory=dict)  # listed, not shown to the model: tool -> why
    filtered_tools: dict[str, str] = attrs.field(factory=dict)  # those a filter hides (calls refused as such)
    denied_methods: frozenset[str] = frozenset()  # kxen's read-only methods the fixed votes deny here
    _size: Any = None  # (what it was computed from, toolChars) of context_view
    _policies: Any = None  # (what it was computed from, tool -> allow/ask) of tool_policies
    _unmatched: frozenset[str] = frozenset()  # exact names in its filters that no listed tool has
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
    _notices: deque[str] = attrs.field(factory=lambda: deque(maxlen=MAX_NOTES))
    _connected: anyio.Event = attrs.field(factory=lambda: anyio.Event())  # set while a session is ready
    #: (monotonic time, state) of each state it entered, the first MAX_TIMELINE (kxen mcp doctor)
    timeline: list[tuple[float, State]] = attrs.field(factory=lambda: [(time.monotonic(), State.CONNECTING)])
    progress: ProgressRoutes = attrs.field(init=False)  # notifications/progress -> the call's callback
    server_log: ServerLog = attrs.field(init=False)  # notifications/message, bounded
    subscriptions: Subscriptions = attrs.field(init=False)  # notifications/resources/updated
    tasks: TaskBook = attrs.field(init=False)  # the tasks of its calls this runtime knows (runtime.tasks)

    def __attrs_post_init__(self) -> None:
        self.config = self.admission.run or self.entry
        self.progress = ProgressRoutes("kxen", self.diag)
        self.server_log = ServerLog(self.config.name, lambda: self.env.secrets if self.env is not None else None)
        self.subscriptions = Subscriptions(self.diag)
        self.tasks = TaskBook(self.config.name)
        self.note = self.admission.note
        if self.admission.run is None:
            self.set(self.admission.state, self.admission.phase, self.admission.error)

    @property
    def name(self) -> str:
        return self.config.name

    def set(self, state: State, phase: Phase | None = None, error: str | None = None) -> None:
        before = (self.state, self.phase, self.error)
        self.state, self.phase, self.error = State(state), Phase(phase) if phase else None, error
        if len(self.timeline) < MAX_TIMELINE:
            self.timeline.append((time.monotonic(), self.state))
        if self.state in SETTLED:
            self.settled.set()
        self.changed()
        # kxen -v: each state with the time since the start (a settled state once, not each time it is set)
        if log.isEnabledFor(logging.INFO) and (self.state not in SETTLED or before != (self.state, self.phase, error)):
            since = (time.monotonic() - self.timeline[0][0]) * 1000
            where = f" ({self.phase.value})" if self.phase else ""
            log.info("%s: %s%s at %.1f ms%s", self.name, self.state.value, where, since, f": {error}" if error else "")

    def changed(self) -> None:
        """Tell the runtime's listeners (``ServerEnv.changed``) that this server's status changed."""
        env = self.env
        if env is not None and env.changed is not None:
            env.changed(self)

    def diag(self, message: str) -> None:
        self.diagnostics.append(message)
        if log.isEnabledFor(logging.INFO):
            log.info("%s: %s", self.name, message)

    def notice(self, message: str) -> None:
        """What the person should know though nothing failed (a plugin's repair): the server's
        ``note`` says it (beside the admission's note, the last few, bounded) and the diagnostics
        keep it."""
        self.diag(message)
        if message not in self._notices:
            self._notices.append(message)
        self.note = "; ".join(filter(None, (self.admission.note, *self._notices)))[:MAX_NOTE_CHARS]
        self.changed()

    # --- life -----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Gate, open, initialize and list; then serve until stopped or the connection ends. A
        remote server whose connection fails or ends, or whose session expires, connects again by
        itself (:mod:`kxen_core.runtime.reconnect`); a local one stays failed until it is restarted. A
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
                    # what this connection may reach, for the transport and the plugins it calls
                    with using_egress(egress_for(server, env.settings)):
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
            await self.tasks.cancel_waiting(self.session)  # a task a call waits for ends with it: tasks/cancel
            await self.session.aclose(f"server {self.name!r} was stopped: {reason}")
        # a ready server's run (its listing's task group open: it waits for the session to close)
        # wakes when its session closes and ends the connection as when the server closed it
        # (bounded: the transport's own close); anywhere else it is cancelled
        ends_alone = self._tg is not None and self.session is not None and self.session.closed
        if self._scope is not None and not ends_alone:
            self._scope.cancel()
        if self._scope is not None or self.session is not None:
            with anyio.move_on_after(STOP_WAIT_SECONDS):
                await self.done.wait()
            if ends_alone and not self.done.is_set() and self._scope is not None:
                self._scope.cancel()  # it did not end by itself in time
        if self.state != State.DISABLED:
            self.set(State.STOPPED)

    async def subscribe(self, uri: str, callback: UpdateCallback) -> Subscription:
        """Subscribe to updates of ``uri`` (``resources/subscribe``, sent once per URI); raises
        ``Unsupported`` unless the server declared ``resources.subscribe``."""
        init = self.session.initialized if self.session is not None else None
        resources = init.capabilities.get("resources") if init is not None else None
        if not (isinstance(resources, dict) and resources.get("subscribe") is True):
            raise Unsupported(f"server {self.name!r} does not offer resource subscriptions (resources.subscribe)")
        listener = self.listener
        if listener is not None and listener.state == "fallback":
            raise Unsupported(
                f"server {self.name!r}: its change stream (subscriptions/listen) was given up: {listener.why}"
            )
        return await self.subscriptions.add(uri, callback)

    def listen_fell_back(self, why: str) -> None:
        """The listen stream was given up for this session: the caching hints alone, and the status says so."""
        self.notice(f"change stream (subscriptions/listen) given up: {why}; catalogs follow their ttlMs hints")
        self.resume_expiry()

    def listen_reopened(self, kinds: list[str], uris: list[str]) -> None:
        """A reopened listen stream: what changed while it was down was missed, so fetch again once."""
        for name in kinds:
            for kind in kinds_of(name):  # resources: templates too
                self._list_changed(kind)
        for uri in uris:
            self.subscriptions.notify({"uri": uri})

    def _from_stream(self, params: Any) -> bool:
        """A change notification of a modern session counts only from its listen stream (when it has
        one: a server that offers none, or whose stream was given up, is taken at its word)."""
        listener = self.listener
        return listener is None or listener.state in ("off", "fallback") or listener.owns(params)

    def _on_notification(self, method: str, params: Any) -> None:
        """The session reader's: O(1) per notification, never waits (see progress and notices)."""
        if method == "notifications/progress":
            self.progress.notify(params)
        elif method == "notifications/message":
            self.server_log.notify(params)
        elif method == "notifications/resources/updated":
            if self._from_stream(params):
                self.subscriptions.notify(params)
        elif method == "notifications/tasks/status":
            self.tasks.notify(params)
        elif method.endswith("/list_changed"):
            if self._from_stream(params):
                for kind in kinds_of(method.split("/")[1]):  # resources/list_changed: templates too
                    self._list_changed(kind)
        elif self.listener is not None:
            if method == ACKNOWLEDGED:
                self.listener.acknowledged(params)
            elif method == "notifications/cancelled":
                self.listener.cancelled(params)


# the states are re-exported for hosts; failure_text, real_cause and LIST_CHANGED_DEBOUNCE stay importable here
__all__ = [
    "LIST_CHANGED_DEBOUNCE",
    "Phase",
    "SETTLED",
    "Server",
    "ServerEnv",
    "State",
    "failure_text",
    "real_cause",
]

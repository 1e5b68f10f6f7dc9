"""One server's start and each of its connections: the gate (the launch resolved once and approved
when it must be, the transport kind), then one connection -- open the transport, the session in the
server's era (:mod:`kxen_core.protocol.era`), every declared catalog listed, ready until it ends.

:class:`Connection` is the part of :class:`kxen_core.runtime.server.Server` that connects; the
server's life around it (reconnects, stop, notifications) is in :mod:`.server`.

With ``kxen.server`` logging at info level (``kxen -v``) each step is logged with its time: the
gate's outcome, the transport opened (and the pid it started), the session initialized (protocol
version, era, the server's name), each catalog listed; state changes and diagnostics are logged by
the server itself. With ``kxen.traffic`` at debug level (``-vv``) every JSON-RPC message is logged
(:mod:`kxen_core.protocol.traffic`: the server's secrets scrubbed, bounded).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from kxen_core.launch.resolve import Launch, resolve_launch
from kxen_core.protocol import traffic
from kxen_core.protocol.catalog import CAPABILITY, FIRST_PAGES, KINDS
from kxen_core.protocol.client_requests import client_capabilities, request_handlers
from kxen_core.protocol.era import EraMemory, handshake_only, open_session
from kxen_core.protocol.listen import Listener
from kxen_core.protocol.session import Session
from kxen_core.runtime.admission import approve_launch
from kxen_core.runtime.states import Phase, State
from kxen_core.transport import MessageStream, TransportContext

log = logging.getLogger("kxen.server")

if TYPE_CHECKING:
    import anyio.abc
    import cattrs

    from kxen_core.config import ServerConfig, Settings
    from kxen_core.plugins.manager import KxenPluginManager
    from kxen_core.policy.approvals import Approvals
    from kxen_core.protocol.notices import Subscriptions
    from kxen_core.safe_text import Secrets


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
    #: what is scrubbed from the server's text before a status or a log shows it (``Runtime.secrets``)
    secrets: Secrets | None = None
    #: told of each change to a server's status (its state, its catalogs): the Settings API's events
    changed: Callable[[Any], None] | None = None
    #: told when a server's held or unaccepted tools changed (the Settings API's ``pins`` event)
    pins_changed: Callable[[Any], None] | None = None
    #: the acting role, and the user's entries by name: what the model is shown of a server's tools
    #: depends on them (:mod:`kxen_core.runtime.server_filters`)
    role: str | None = None
    user_servers: Mapping[str, ServerConfig] = attrs.field(factory=dict)


class Connection:
    """Mixed into ``Server``: the attributes below are the server's own (attrs fields there)."""

    if TYPE_CHECKING:
        env: ServerEnv | None
        config: ServerConfig
        state: State
        note: str | None
        session: Session | None
        listener: Listener | None
        stream: MessageStream | None
        pid: int | None
        launch: Launch | None
        awaiting_launch: Launch | None
        held: bool
        fingerprint: str | None
        stopping: bool
        subscriptions: Subscriptions
        _tg: anyio.abc.TaskGroup | None
        _changed_early: set[str]
        _connected: anyio.Event

        def set(self, state: State, phase: Phase | None = None, error: str | None = None) -> None: ...

        def diag(self, message: str) -> None: ...

        def changed(self) -> None: ...

        def notice(self, message: str) -> None: ...

        async def refetch_tools(self) -> None: ...

        async def _list(self, kind: str, *, required: bool) -> None: ...

        def _list_changed(self, kind: str) -> None: ...

        def refilter_methods(self) -> None: ...

        def start_expiry(self) -> None: ...

        def listen_fell_back(self, why: str) -> None: ...

        def listen_reopened(self, kinds: list[str], uris: list[str]) -> None: ...

        def _on_notification(self, method: str, params: Any) -> None: ...

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
        if log.isEnabledFor(logging.INFO):
            what = f"runs {launch.command}" if launch is not None else "remote"
            note = " (its launch approved)" if server.scope == "project" or self.held else ""
            log.info("%s: gate passed: %s server, %s, %s%s", server.name, server.scope, server.kind, what, note)
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
                notice=self.notice,
            )
            transport = kind.opener(server, context)
            self.set(State.CONNECTING)
            started = time.monotonic()
            async with transport as stream:
                self.stream = stream
                self.pid = _pid_of(stream)
                if log.isEnabledFor(logging.INFO):
                    pid = f" (pid {self.pid})" if self.pid is not None else ""
                    log.info("%s: transport %s open in %.1f ms%s", server.name, server.kind, _ms(started), pid)
                phase = Phase.INITIALIZE
                self.set(State.INITIALIZING)
                if traffic.log.isEnabledFor(logging.DEBUG):  # -vv: every message, the server's secrets scrubbed
                    from kxen_core.config.secrets import config_secrets

                    session_stream = traffic.logged(stream, server.name, config_secrets([server]).text)
                else:
                    session_stream = stream
                started = time.monotonic()
                async with Session(
                    session_stream,
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
                    if log.isEnabledFor(logging.INFO):
                        info = init.server_info if isinstance(init.server_info, dict) else {}
                        log.info(
                            "%s: initialized in %.1f ms: protocol %s (%s era), server %s %s",
                            server.name, _ms(started), init.protocol_version,
                            "stateless" if session.modern is not None else "handshake",
                            str(info.get("name"))[:100], str(info.get("version"))[:50],
                        )  # fmt: skip
                    phase = Phase.CATALOG
                    self.set(State.LISTING)
                    async with anyio.create_task_group() as tg:
                        # the stateless era's change stream, opened before the listing: a change
                        # while listing is fetched again once ready (_changed_early), none is missed
                        if session.modern is not None:
                            self.listener = Listener(
                                session,
                                init.capabilities,
                                uris=self.subscriptions.uris,
                                refresh=self.listen_reopened,
                                on_fallback=self.listen_fell_back,
                                diag=self.diag,
                            )
                            self.subscriptions.via_listen = self.listener.refilter
                            await tg.start(self.listener.run, name=f"kxen-listen-{server.name}")
                        for kind_name in KINDS:
                            if CAPABILITY[kind_name] in init.capabilities:
                                await self._list(kind_name, required=(kind_name == "tools"))
                        self._tg = tg
                        self.subscriptions.request, self.subscriptions.start = session.request, tg.start_soon
                        self.refilter_methods()  # kxen's read-only tools the policy denies here
                        self.set(State.READY)
                        was_ready = True
                        self._connected.set()
                        # a list_changed that came while we were listing: fetch that kind again now
                        for kind_name in sorted(self._changed_early):
                            self._list_changed(kind_name)
                        self._changed_early.clear()
                        self.start_expiry()  # catalogs with a caching hint: fetched again when it runs out
                        # _tg is set from here (no await since it was set) until the session closes:
                        # stop() closes the session, which wakes this, so it need not cancel
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
            if self.listener is not None:
                self.listener.close()
                self.listener = None
            self.subscriptions.reset()
            self._connected = anyio.Event()  # the next session is a new one


def _ms(since: float) -> float:
    return (time.monotonic() - since) * 1000


def _pid_of(stream: MessageStream) -> int | None:
    """The pid a transport names in ``describe()`` (a stdio child's), best effort."""
    try:
        info = stream.describe()
    except Exception:  # describe() is best effort: a plugin's failure is not the connection's
        return None
    pid = info.get("pid") if isinstance(info, dict) else None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) else None


__all__ = ["Connection", "ServerEnv"]

"""Which protocol era a server speaks, found once per server: the handshake era (``initialize``,
2024-11-05 .. 2025-11-25) or the stateless era (2026-07-28: ``server/discover``, no handshake).

:func:`open_session` starts a fresh :class:`~kxen_core.protocol.session.Session` in the server's era:

* ``protocolEra: "legacy"`` (pinned) sends ``initialize`` as always; ``"modern"`` sends
  ``server/discover`` and fails if the server does not answer it; neither probes.
* ``"auto"`` (the default) probes with ``server/discover``. A remote server's start has one budget,
  the initialize timeout. A local server's has two: ``startupSeconds`` from its spawn to its first
  answer (a package runner's first install is slow, and a silent process cannot be told from one
  still installing), then the initialize timeout from that answer. The probe takes at most
  :data:`DISCOVER_SECONDS` and half of each budget for a local server (a remote one, which answers
  every POST, may take it all), and ``initialize`` -- and the one more probe below -- what is left;
  a start that runs out fails with :class:`~kxen_core.errors.StartTimeout` naming the budget. A
  discover result naming a version kxen speaks, or an error only a stateless-era server sends
  (``-32020..-32022``), means modern; any other error, a result without a common version, or no
  answer in time means legacy, and ``initialize`` follows -- so the probe costs at most one round
  trip. A closed connection is not an era: it fails the start as it would have.
* The outcome is remembered in the runtime's :class:`EraMemory`, per endpoint for a remote server (a
  reconnection or a restart sends no probe) and per process for a local one (a new process may be a
  new program). An ``initialize`` that a remembered-legacy endpoint refuses with ``-32022`` naming a
  modern version, or a probe that a remembered-modern endpoint no longer answers, forgets it.

A modern session's requests then go through :class:`kxen_core.protocol.era_requests.Modern` (the ``_meta``
envelope, ``resultType``, input-required rounds, the new error codes); its ``initialized`` holds what
``server/discover`` said, in the shape ``initialize`` gives, so everything after the start (catalogs,
capabilities, status) is the same in both eras. Its capabilities are the server's as it said them:
``listChanged`` and ``resources.subscribe`` are what kxen's ``subscriptions/listen`` stream asks for
(:mod:`kxen_core.protocol.listen`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import urlsplit

import anyio

from kxen_core.errors import (
    ClosedError,
    ConnectError,
    KxenError,
    ProtocolError,
    RemoteError,
    RequestError,
    RequestTimeout,
    StartTimeout,
    TransportError,
)
from kxen_core.protocol.era_requests import (
    CLIENT_INFO,
    LATEST_MODERN_VERSION,
    META_SERVER_INFO,
    MODERN_ERRORS,
    MODERN_VERSIONS,
    UNSUPPORTED_VERSION,
    Modern,
    modern_capabilities,
    mutual_version,
)
from kxen_core.protocol.handshake import Handshake, HandshakeSession, InitializeResult
from kxen_core.protocol.replies import error_code

if TYPE_CHECKING:
    from kxen_core.config import ServerConfig

Era = Literal["legacy", "modern"]
ERA_SETTINGS = ("auto", "legacy", "modern")
#: a local server's probe waits at most this long (and at most half the start's budget, the initialize timeout)
DISCOVER_SECONDS = 10.0
#: the most endpoints one runtime remembers
MAX_REMEMBERED = 1024


class Session(HandshakeSession, Protocol):
    """What starting a session in its era needs of it (a :class:`kxen_core.protocol.session.Session`)."""

    initialize_timeout: float
    handlers: dict[str, Callable[[Mapping[str, Any]], Awaitable[Any]]]
    modern: Modern | None
    era_note: str | None

    async def request_once(
        self, method: str, params: Mapping[str, Any] | None, timeout: float | None
    ) -> dict[str, Any]: ...


class EraMemory:
    """What the runtime found out, by endpoint: the era each remote server speaks. Bounded: past
    :data:`MAX_REMEMBERED` endpoints the oldest is forgotten (it is probed again, nothing worse)."""

    def __init__(self) -> None:
        self._eras: dict[str, Era] = {}

    @staticmethod
    def key(server: ServerConfig) -> str | None:
        """The endpoint of a remote server (scheme, host, port and path; no query, which may hold
        secrets); None for a local one, whose era lives as long as its process."""
        if not server.is_remote or not server.url:
            return None
        try:
            parts = urlsplit(server.url)
        except ValueError:
            return None
        return f"{server.kind} {parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"

    def get(self, key: str | None) -> Era | None:
        return self._eras.get(key) if key is not None else None

    def remember(self, key: str | None, era: Era) -> None:
        if key is None:
            return
        self._eras.pop(key, None)
        if len(self._eras) >= MAX_REMEMBERED:
            del self._eras[next(iter(self._eras))]
        self._eras[key] = era

    def forget(self, key: str | None) -> None:
        if key is not None:
            self._eras.pop(key, None)


class _Legacy(Exception):
    """The probe's verdict: not a stateless-era server (``why`` says what it answered; ``answered``
    is False when no answer came in time)."""

    def __init__(self, why: str, *, answered: bool = True) -> None:
        super().__init__(why)
        self.why = why
        self.answered = answered


def _modern_result(session: Session, modern: Modern, result: dict[str, Any]) -> InitializeResult:
    """What ``server/discover`` said, as ``initialize`` would have said it; raises ``_Legacy`` when it
    names no version kxen speaks."""
    supported = result.get("supportedVersions")
    common = [v for v in MODERN_VERSIONS if isinstance(supported, list) and v in supported]
    if not common:
        raise _Legacy(f"server/discover named no version kxen speaks ({', '.join(MODERN_VERSIONS)})")
    if modern.version not in common:
        modern.version = common[0]
    caps = result.get("capabilities")
    meta = result.get("_meta")
    info = meta.get(META_SERVER_INFO) if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        info = result.get("serverInfo")  # where some servers of the era put it
    instructions = result.get("instructions")
    from kxen_core.protocol.tasks_modern import declare_if_offered

    declare_if_offered(modern, caps)  # the tasks extension, declared to a server that offers it
    return InitializeResult(
        protocol_version=modern.version,
        capabilities=dict(caps) if isinstance(caps, dict) else {},
        server_info=info if isinstance(info, dict) else {},
        instructions=instructions if isinstance(instructions, str) else None,
    )


async def _discover(
    session: Session, modern: Modern, timeout: float, *, probing: bool, then: Handshake | None = None
) -> InitializeResult:
    """``server/discover`` (again once at a version both speak after ``-32022``). When ``probing``,
    an answer that is not modern raises ``_Legacy``; otherwise it raises what the server said.
    ``then``: the handshake to begin the moment an error reply says "handshake era"."""

    def handshake_era(reply: dict[str, Any]) -> None:
        # exactly the errors the RemoteError branch below turns into _Legacy when probing
        err = reply.get("error")
        if then is not None and isinstance(err, dict) and error_code(err) not in MODERN_ERRORS:
            then.begin()

    for attempt in range(2):
        try:
            params = modern.stamp(None)
            begun = (
                session.begin("server/discover", params, on_reply=handshake_era)
                if probing and then is not None
                else None
            )
            if begun is not None:
                result = await session.finish(begun, timeout)
            else:
                result = await session.request_once("server/discover", params, timeout)
        except RemoteError as err:
            if err.code == UNSUPPORTED_VERSION and attempt == 0:
                version = mutual_version(err.data)
                if version is not None:
                    modern.version = version
                    continue
            if probing and err.code not in MODERN_ERRORS:
                raise _Legacy(f"server/discover: error {err.code}: {err.message[:120]}") from None
            raise
        except (ClosedError, ConnectError):
            raise  # not an era: the connection is gone, or never was
        except (RequestError, TransportError) as exc:  # a timeout, an HTTP status, a bad reply
            if probing:
                raise _Legacy(
                    f"server/discover: {type(exc).__name__}", answered=not isinstance(exc, RequestTimeout)
                ) from None
            raise
        kind = result.get("resultType", "complete")
        if kind != "complete":
            if probing:
                raise _Legacy(f"server/discover: resultType {str(kind)[:40]!r}")
            raise ProtocolError(f"server/discover: unexpected resultType {str(kind)[:40]!r}", server=session.server)
        try:
            return _modern_result(session, modern, result)
        except _Legacy as verdict:
            if probing:
                raise
            raise ProtocolError(verdict.why, server=session.server) from None
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


async def open_session(
    session: Session,
    server: ServerConfig,
    memory: EraMemory | None,
    *,
    refetch_tools: Callable[[], Awaitable[None]] | None = None,
    legacy_only: bool = False,
    diag: Callable[[str], None] | None = None,
    prefetch: Sequence[tuple[str, str]] = (),
) -> InitializeResult:
    """Start ``session`` in ``server``'s era (see the module docstring) and return what the server
    said of itself. ``legacy_only``: the transport speaks only the handshake era (HTTP+SSE);
    ``diag`` hears why the probe concluded what it did; ``prefetch``: the list requests a
    handshake-era start sends with ``notifications/initialized`` (:mod:`kxen_core.protocol.handshake`)."""
    say = diag or (lambda text: None)
    setting = getattr(server, "protocolEra", "auto")
    key = EraMemory.key(server)
    known = memory.get(key) if memory is not None else None
    modern = Modern(
        LATEST_MODERN_VERSION,
        modern_capabilities(session.capabilities),
        CLIENT_INFO,
        session.handlers,
        server=session.server,
        refetch_tools=refetch_tools,
    )
    handshake = Handshake(session, prefetch)
    # a local server that has not answered yet may still be coming up (a package runner's first
    # install): until its first answer the start may take startupSeconds from the spawn, and once it
    # answered, initializeSeconds counts from that answer. A remote server's start has one budget.
    budget = session.initialize_timeout
    began = anyio.current_time()
    startup = None if server.is_remote else server.timeouts.startupSeconds
    silent_until = began + (budget if startup is None else startup)
    if setting == "legacy" or legacy_only:
        return await _legacy(handshake, memory, key, silent_until, startup)
    if setting == "modern":
        try:
            init = await _discover(session, modern, silent_until - began, probing=False)
        except RequestTimeout:
            if startup is None:
                raise
            raise StartTimeout(startup, server=session.server, budget="startupSeconds") from None
    else:
        # one start, one budget: the probe, initialize and a second probe all end by this deadline
        deadline = began + budget
        found: InitializeResult | None = None
        answered = True
        probed = known != "legacy"
        if probed:
            try:
                found = await _discover(session, modern, _probe_seconds(session, server), probing=True, then=handshake)
            except _Legacy as verdict:
                session.era_note = verdict.why
                answered = verdict.answered
                say(f"protocol era: handshake ({verdict.why})")
                if answered and startup is not None:
                    deadline = anyio.current_time() + budget  # counted from its first answer
        if found is None:
            silent = not answered and startup is not None
            try:
                return await _legacy(handshake, memory, key, silent_until if silent else deadline)
            except RequestTimeout:
                if silent and startup is not None:
                    raise StartTimeout(startup, server=session.server, budget="startupSeconds") from None
                if probed:  # the probe had its share of the budget: the message says both, and the whole
                    raise StartTimeout(budget, server=session.server) from None
                raise
            except (RemoteError, ProtocolError) as err:
                # the stateless era after all? A -32022 naming its version says so (a probe that came
                # too late, or a remembered-legacy endpoint that changed); after a probe that got no
                # answer in time (a slow start, a crowded machine), any refusal of the handshake
                # earns the probe one more try, with the handshake's own timeout
                version = (
                    mutual_version(err.data)
                    if isinstance(err, RemoteError) and err.code == UNSUPPORTED_VERSION
                    else None
                )
                if version is None and answered:
                    raise
                modern.version = version or modern.version
                if silent:  # the refusal was its first answer
                    deadline = anyio.current_time() + budget
                left = deadline - anyio.current_time()
                if left <= 0:
                    raise
                say(f"protocol era: initialize was refused ({err}); server/discover once more")
                try:
                    found = await _discover(session, modern, left, probing=False)
                except KxenError as again:
                    say(f"protocol era: server/discover failed again: {type(again).__name__}: {again}")
                    raise err from None
        init = found
    session.modern = modern
    session.initialized = init
    if memory is not None:
        memory.remember(key, "modern")
    return init


def _probe_seconds(session: Session, server: ServerConfig) -> float:
    """How long the probe waits, of the start's budget. A local server that ignores an unknown
    method never answers it: at most :data:`DISCOVER_SECONDS` and half its budgets (initialize
    timeout and startup), so ``initialize`` keeps the rest. A remote one answers every POST, if only
    with an HTTP error, and its answer may wait for a sign-in the credential plugin runs first: the
    whole budget (what it leaves is ``initialize``'s)."""
    if server.is_remote:
        return session.initialize_timeout
    return min(DISCOVER_SECONDS, session.initialize_timeout / 2, server.timeouts.startupSeconds / 2)


async def _legacy(
    handshake: Handshake,
    memory: EraMemory | None,
    key: str | None,
    deadline: float | None = None,
    startup: float | None = None,
) -> InitializeResult:
    """The handshake by ``deadline``; ``startup``: the local server's ``startupSeconds``, when the
    handshake is its whole start (no probe), named by the timeout."""
    try:
        init = await handshake.run(deadline)
    except RequestTimeout:
        if startup is None:
            raise
        raise StartTimeout(startup, server=handshake.session.server, budget="startupSeconds") from None
    if memory is not None:
        memory.remember(key, "legacy")
    return init


def handshake_only(stream: Any) -> bool:
    """Whether a transport's stream speaks only the handshake era: one whose ``protocol_eras``
    attribute (optional on a :class:`~kxen_core.transport.MessageStream`) leaves the stateless era out."""
    eras = getattr(stream, "protocol_eras", None)
    return isinstance(eras, tuple) and "modern" not in eras


def era_fields(session: Session | None) -> dict[str, str | None]:
    """``era`` and ``protocolVersion`` of a server's status: what its session speaks (None before
    it started, or while it is not connected)."""
    init = session.initialized if session is not None else None
    return {"era": era_of(session), "protocolVersion": init.protocol_version if init is not None else None}


def era_of(session: Session | None) -> Era | None:
    """The era a started session speaks, or None before it started."""
    if session is None or session.initialized is None:
        return None
    return "modern" if session.modern is not None else "legacy"


def ttl_seconds(result: Mapping[str, Any]) -> float | None:
    """A catalog page's ``ttlMs`` caching hint in seconds (None when absent or not a count)."""
    ttl = result.get("ttlMs")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl != ttl or ttl < 0:
        return None
    return float(ttl) / 1000.0


__all__ = [
    "DISCOVER_SECONDS",
    "ERA_SETTINGS",
    "Era",
    "EraMemory",
    "InitializeResult",
    "era_fields",
    "era_of",
    "handshake_only",
    "open_session",
    "ttl_seconds",
]

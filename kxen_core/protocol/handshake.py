"""The handshake era's start (``initialize``), with no pause between a server's answer and what
kxen sends next.

A server that has answered waits for its next line. Where idle CPUs sleep (a virtual machine's
CPUs, a laptop's), each pause kxen takes between receiving an answer and sending what follows
lets the server's CPU go to sleep, and the next exchange pays its wake-up as well as kxen's work.
So what must follow a reply goes out from the reply's arrival (the ``on_reply`` of
:meth:`kxen_core.protocol.session.Session.begin`), not after the waiting task has woken and worked through it:

* :class:`Handshake` sends ``initialize``; a reply that :meth:`Handshake.run` will accept (a result
  naming a version kxen speaks) sends ``notifications/initialized`` at once, then the first page
  request of each catalog the caller lists next (``prefetch``, each only when the server declared
  its capability), kept in ``session.prefetched`` for that caller.
* The era probe (:mod:`kxen_core.protocol.era`) begins the handshake from the probe's own reply, when that
  reply already says "handshake era".

The messages, their order and their content are those of the plain sequence; only the pauses go.
A stream that cannot send without waiting (Streamable HTTP sends notifications inline) gets the
plain sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeGuard

import anyio
import attrs

from kxen_core.errors import ProtocolError, RemoteError, RequestTimeout
from kxen_core.protocol.era_requests import CLIENT_INFO
from kxen_core.protocol.replies import Begun
from kxen_core.protocol.replies import brief as _brief

LATEST_PROTOCOL_VERSION = "2025-11-25"
SUPPORTED_PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")


@attrs.frozen(kw_only=True)
class InitializeResult:
    """What a server said of itself at the start: the ``initialize`` result, or in the stateless era
    the ``server/discover`` result in the same shape."""

    protocol_version: str
    capabilities: dict[str, Any]
    server_info: dict[str, Any]
    instructions: str | None


def _speaks(version: Any) -> TypeGuard[str]:
    """Whether the ``protocolVersion`` of an ``initialize`` result is one kxen speaks: the one rule
    for accepting the result, as it arrives (what follows is sent then) and in :meth:`Handshake.run`."""
    return version in SUPPORTED_PROTOCOL_VERSIONS


class HandshakeSession(Protocol):
    """What a handshake needs of its session (a :class:`kxen_core.protocol.session.Session`)."""

    server: str
    capabilities: dict[str, Any]
    initialized: InitializeResult | None
    prefetched: dict[str, Begun]

    def begin(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        on_reply: Callable[[dict[str, Any]], None] | None = None,
    ) -> Begun | None: ...

    async def finish(self, begun: Begun, timeout: float | None = None) -> dict[str, Any]: ...

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]: ...

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None: ...

    def notify_nowait(self, method: str, params: Mapping[str, Any] | None = None) -> bool: ...


class Handshake:
    """One ``initialize`` exchange of ``session``; ``prefetch`` as in the module docstring."""

    def __init__(self, session: HandshakeSession, prefetch: Sequence[tuple[str, str]] = ()) -> None:
        self.session = session
        self.prefetch = prefetch
        self.begun: Begun | None = None  # initialize sent, its answer not yet taken
        self.announced = False  # notifications/initialized went out as the result arrived

    def params(self, version: str = LATEST_PROTOCOL_VERSION) -> dict[str, Any]:
        return {"protocolVersion": version, "capabilities": self.session.capabilities, "clientInfo": CLIENT_INFO}

    def begin(self, version: str = LATEST_PROTOCOL_VERSION) -> bool:
        """Send ``initialize`` now; False when it cannot go out without waiting (:meth:`run` sends it)."""
        self.begun = self.session.begin("initialize", self.params(version), on_reply=self._answered)
        return self.begun is not None

    def _answered(self, message: dict[str, Any]) -> None:
        result = message.get("result")
        if "error" in message or not isinstance(result, dict) or not _speaks(result.get("protocolVersion")):
            return  # run() says what is wrong, as it would have
        session = self.session
        if not session.notify_nowait("notifications/initialized"):
            return  # run() sends it, and nothing may go before it
        self.announced = True
        caps = result.get("capabilities")
        declared = caps if isinstance(caps, dict) else {}
        for capability, method in self.prefetch:
            if capability in declared and method not in session.prefetched:
                begun = session.begin(method)
                if begun is not None:
                    session.prefetched[method] = begun

    async def _ask(self, version: str, deadline: float | None) -> dict[str, Any]:
        timeout = None if deadline is None else deadline - anyio.current_time()
        if timeout is not None and timeout <= 0:  # nothing left to wait with: nothing is sent
            raise RequestTimeout("initialize", 0.0, server=self.session.server)
        if self.begun is None:
            self.begin(version)
        begun, self.begun = self.begun, None
        if begun is None:
            return await self.session.request("initialize", self.params(version), timeout=timeout)
        return await self.session.finish(begun, timeout)

    async def run(self, deadline: float | None = None) -> InitializeResult:
        """Negotiate the protocol version (``initialize``, begun already or sent now), then send
        ``notifications/initialized`` unless it went out as the result arrived. ``deadline`` (on
        ``anyio.current_time()``'s clock): when the exchange must end, instead of the session's
        initialize timeout (what is left of a start's one budget)."""
        session = self.session
        try:
            result = await self._ask(LATEST_PROTOCOL_VERSION, deadline)
        except RemoteError as err:
            # a server may reject the version with -32602 and data.supported; retry once with a mutual one
            supported = err.data.get("supported") if isinstance(err.data, dict) else None
            mutual = [v for v in SUPPORTED_PROTOCOL_VERSIONS if isinstance(supported, list) and v in supported]
            if err.code != -32602 or not mutual:
                raise
            result = await self._ask(mutual[0], deadline)
        version = result.get("protocolVersion")
        if not _speaks(version):
            raise ProtocolError(
                f"server answered protocol version {_brief(version)}; kxen supports "
                + ", ".join(SUPPORTED_PROTOCOL_VERSIONS),
                server=session.server,
            )
        caps = result.get("capabilities")
        info = result.get("serverInfo")
        instructions = result.get("instructions")
        session.initialized = InitializeResult(
            protocol_version=version,
            capabilities=caps if isinstance(caps, dict) else {},
            server_info=info if isinstance(info, dict) else {},
            instructions=instructions if isinstance(instructions, str) else None,
        )
        if not self.announced:
            await session.notify("notifications/initialized")
        return session.initialized


__all__ = [
    "Handshake",
    "HandshakeSession",
    "InitializeResult",
    "LATEST_PROTOCOL_VERSION",
    "SUPPORTED_PROTOCOL_VERSIONS",
]

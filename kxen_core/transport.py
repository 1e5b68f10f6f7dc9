"""What a transport plugin provides, and what the core gives it.

A transport is an async context manager (returned by ``kxen_transport_open``). Entering it opens the
connection and yields a :class:`MessageStream`; leaving it closes everything it started, bounded in
time, even when the surrounding task is cancelled.

Messages are plain JSON-RPC dicts. A transport reports trouble that is not fatal (a non-JSON stdout
line, an oversized frame, stderr output) through ``context.diagnostic`` and keeps going; when the
connection ends it raises :class:`kxen_core.errors.ClosedError` from ``receive``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

import attrs

Message = dict[str, Any]


@runtime_checkable
class MessageStream(Protocol):
    async def send(self, message: Message) -> None:
        """Send one JSON-RPC message. Raises ``ClosedError`` once the connection is gone."""

    async def receive(self) -> Message:
        """Return the next message from the server. Raises ``ClosedError`` at the end."""

    def describe(self) -> dict[str, Any]:
        """Secret-free facts for status and diagnostics (pid, url, recent stderr...)."""


class Transport(Protocol):
    async def __aenter__(self) -> MessageStream: ...

    async def __aexit__(self, *exc: Any) -> bool | None: ...


@attrs.frozen
class RequestFailed:
    """Put on the stream (returned by ``receive``) when one request failed inside the transport.

    The session fails that request with ``error`` -- a local error, never confusable with a
    JSON-RPC error the server sent -- and keeps the connection.
    """

    id: Any
    error: BaseException


@attrs.define(kw_only=True)
class TransportContext:
    """What the core hands to a transport plugin when it opens a server."""

    workspace: Path
    diagnostic: Callable[[str], None] = lambda message: None
    #: the host's plugin manager, for the credential seam (call it through kxen_core.hookcall)
    pm: Any = None
    settings: Any = None


@attrs.frozen(kw_only=True)
class CredentialRequest:
    """A remote request that wants credentials (method and URL; never a body)."""

    method: str
    url: str

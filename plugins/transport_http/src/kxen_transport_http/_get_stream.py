"""The GET stream: messages the server starts (notifications, requests), opened after
``notifications/initialized`` and followed across reconnections. ``400``/``404``/``405`` mean the
server offers none: it is not asked again."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, AsyncIterator

import httpx

from kxen_core.errors import TransportError

from ._exchange import answer_reader
from ._mcp_session import SessionExpired
from .plumbing import SseCursor, map_errors

if TYPE_CHECKING:
    from ._parts import StreamParts


class GetStream:
    """The GET stream of one connection; ``state`` is what ``describe()`` shows."""

    def __init__(self, stream: StreamParts) -> None:
        self._stream = stream
        self.state = "off"

    def open(self) -> None:
        """Start following it in the transport's task group, once (unless ``getStream`` is off)."""
        if self.state == "off" and self._stream.options.getStream:
            self.state = "opening"
            self._stream.tg.start_soon(self._run, name="kxen-http-get")

    async def _run(self) -> None:
        stream = self._stream
        try:
            with map_errors("GET stream", stream.redact, stream.name):
                end = await stream.follower.follow(self._connect, SseCursor(), answer_reader(stream, None), label="GET stream")
        except TransportError as error:
            self.state = "closed"
            if isinstance(error, SessionExpired):
                stream.fail(error)
            elif stream.failure is None:
                stream.diag(f"GET stream closed: {error}")
            return
        if end.unsupported is not None:
            self.state = f"unsupported (HTTP {end.unsupported})"
            return
        self.state = "closed"
        stream.diag(f"GET stream: {end.reason}; not reopened after {end.attempts} attempt(s)")

    @asynccontextmanager
    async def _connect(self, cursor: SseCursor) -> AsyncIterator[httpx.Response]:
        if self._stream.failure is not None:  # the transport failed: stop following
            raise self._stream.closed_error()
        async with self._stream.open_get(cursor) as response:
            self.state = "open"
            try:
                yield response
            finally:
                self.state = "reconnecting"

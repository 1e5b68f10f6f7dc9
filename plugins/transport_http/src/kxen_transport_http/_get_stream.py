"""The GET stream: messages the server starts (notifications, requests), opened after
``notifications/initialized`` and followed across reconnections. ``400``/``404``/``405`` mean the
server offers none: it is not asked again.

The first GET is answered (or refused) before the session goes on, waiting at most
:data:`START_WAIT_SECONDS`: a GET that reached the server only after the first request was sent
could take that request's answer away from the stream it belongs to, and a server counting GETs as
reconnections would see one that is not."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import httpx

from kxen_core.errors import AuthRequired, PluginHookError, TransportError

from ._exchange import answer_reader
from ._mcp_session import SessionExpired
from .plumbing import SseCursor, map_errors

if TYPE_CHECKING:
    from ._parts import StreamParts

#: how long the session waits for the first GET to be answered before it goes on anyway
START_WAIT_SECONDS = 3.0


class GetStream:
    """The GET stream of one connection; ``state`` is what ``describe()`` shows."""

    def __init__(self, stream: StreamParts) -> None:
        self._stream = stream
        self.state = "off"
        self._answered = anyio.Event()  # the first GET got its response (or will get none)

    async def open(self) -> None:
        """Start following it in the transport's task group, once (unless ``getStream`` is off),
        and wait (bounded) until the first GET is answered."""
        if self.state == "off" and self._stream.options.getStream:
            self.state = "opening"
            self._stream.tg.start_soon(self._run, name="kxen-http-get")
            with anyio.move_on_after(START_WAIT_SECONDS):
                await self._answered.wait()

    async def _run(self) -> None:
        try:
            await self._follow()
        finally:
            self._answered.set()

    async def _follow(self) -> None:
        stream = self._stream
        try:
            with map_errors("GET stream", stream.redact, stream.name):
                end = await stream.follower.follow(
                    self._connect, SseCursor(), answer_reader(stream, None), label="GET stream"
                )
        except (TransportError, AuthRequired, PluginHookError) as error:
            self.state = "closed"
            if isinstance(error, (SessionExpired, AuthRequired)):
                stream.fail(error)  # the session is gone, or the server wants a sign-in
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
        try:
            async with self._stream.open_get(cursor) as response:
                self.state = "open"
                self._answered.set()
                try:
                    yield response
                finally:
                    self.state = "reconnecting"
        finally:  # an answer that is not a stream (405, an error) is an answer too
            self._answered.set()

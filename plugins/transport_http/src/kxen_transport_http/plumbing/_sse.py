"""Server-sent events: reading a stream with every event bounded in decoded bytes, and the one
loop that follows a stream across reconnections (``GET`` + ``Last-Event-ID`` after the server's
``retry``), bounded."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager

import anyio
import attrs
import httpx
from httpx_sse import ServerSentEvent

from kxen_core import Message

from ._bodies import BodyError, MessageTooLarge, content_type, inflater_for, parse_messages, raw_chunks
from ._errors import describe_exception
from ._secrets import Redactor

#: a server's ``retry`` is honoured up to this many milliseconds
MAX_RETRY_MS = 60_000
#: a GET answered with one of these means the server offers no such stream: it is not retried
UNSUPPORTED = (400, 404, 405)

OnEvent = Callable[[ServerSentEvent], Awaitable[bool]]
Connect = Callable[["SseCursor"], AbstractAsyncContextManager[httpx.Response]]


@attrs.define
class SseCursor:
    """Where a followed SSE stream got to: what a ``GET`` needs to resume it."""

    last_id: str | None = None
    retry_ms: int | None = None
    #: events with data read so far (any of them means the stream was of use)
    events: int = 0

    def wait_seconds(self, default_ms: int) -> float:
        """How long to wait before reconnecting: the server's ``retry``, else ``default_ms``, capped."""
        return min(self.retry_ms if self.retry_ms is not None else default_ms, MAX_RETRY_MS) / 1000


class StreamRefused(Exception):
    """A request for an SSE stream was answered with something else."""

    def __init__(self, status: int, media_type: str) -> None:
        self.status = status
        super().__init__(f"HTTP {status} ({media_type[:60] or 'no content type'}), not an SSE stream")

    @property
    def unsupported(self) -> bool:
        """The server offers no such stream (400, 404, 405): asking again will not help."""
        return self.status in UNSUPPORTED


def check_event_stream(response: httpx.Response) -> None:
    """Raise :class:`StreamRefused` unless ``response`` is a 2xx ``text/event-stream``."""
    media_type = content_type(response)
    if not 200 <= response.status_code < 300 or media_type != "text/event-stream":
        raise StreamRefused(response.status_code, media_type)


class SseParser:
    """Server-sent events from decoded bytes, as the HTML standard reads them (lines end with
    CRLF, LF or CR; ``data`` lines join with LF; ``id`` is kept across events; comments and
    unknown fields are ignored), with every event bounded: the bytes it keeps (its fields and the
    line still being read) may not pass ``limit`` (:class:`MessageTooLarge`). Comments keep nothing."""

    __slots__ = ("_limit", "_parts", "_held", "_kept", "_cr", "_event", "_data", "_id", "_retry", "_fields")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._parts: list[bytes] = []  # the line being read
        self._held = 0  # its bytes
        self._kept = 0  # bytes of the fields of the current event
        self._cr = False
        self._event = ""
        self._data: list[str] = []
        self._id = ""
        self._retry: int | None = None
        self._fields = False

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """The events ``chunk`` completes (a chunk is at most one read or ``DECODE_CHUNK``)."""
        if self._cr:
            chunk = b"\r" + chunk
            self._cr = False
        if chunk.endswith(b"\r"):  # it may be the first half of a CRLF: decide with the next chunk
            self._cr = True
            chunk = chunk[:-1]
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = chunk.split(b"\n")
        tail = lines.pop()
        events: list[ServerSentEvent] = []
        if lines:
            if self._parts:
                lines[0] = b"".join(self._parts) + lines[0]
                self._parts = []
                self._held = 0
            for line in lines:
                event = self._line(line)
                if event is not None:
                    events.append(event)
        if tail:
            self._parts.append(tail)
            self._held += len(tail)
            if self._held + self._kept > self._limit:
                raise MessageTooLarge(f"SSE event over {self._limit} bytes")
        return events

    def _line(self, line: bytes) -> ServerSentEvent | None:
        if not line:
            if not self._fields:
                return None
            event = ServerSentEvent(event=self._event, data="\n".join(self._data), id=self._id, retry=self._retry)
            self._event, self._data, self._retry, self._fields, self._kept = "", [], None, False, 0
            return event
        if line[0] == 58:  # b":": a comment
            return None
        name, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value.decode("utf-8", "replace"))
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" in value:
                return None
            self._id = value.decode("utf-8", "replace")
        elif name == b"retry":
            try:
                self._retry = int(value)
            except ValueError:
                return None
        else:
            return None
        self._fields = True
        self._kept += len(line) + 1
        if self._kept > self._limit:
            raise MessageTooLarge(f"SSE event over {self._limit} bytes")
        return None


async def read_events(response: httpx.Response, cursor: SseCursor, limit: int, on_event: OnEvent) -> bool:
    """Hand each event of ``response`` to ``on_event`` until it answers True (then True) or the
    stream ends (False). Moves ``cursor``; raises :class:`MessageTooLarge` for an event over
    ``limit`` decoded bytes, :class:`BadEncoding` for a body that cannot be decoded, and httpx's
    exceptions when the stream breaks. A compressed stream is inflated piece by piece, bounded."""
    inflater = inflater_for(response)
    parser = SseParser(limit)
    async for raw in raw_chunks(response):
        for piece in (raw,) if inflater is None else inflater.feed(raw):
            for event in parser.feed(piece):
                if event.id:
                    cursor.last_id = event.id
                if event.retry is not None:
                    cursor.retry_ms = max(0, event.retry)
                if event.data:
                    cursor.events += 1
                if await on_event(event):
                    return True
    return False


def messages_in(event: ServerSentEvent, diag: Callable[[str], None]) -> list[Message]:
    """The JSON-RPC messages in ``event.data``: none for a priming event, none (and a diagnostic)
    for data that is not JSON-RPC."""
    if not event.data:
        return []
    try:
        return parse_messages(event.data)
    except ValueError as exc:
        diag(f"ignored an SSE event that is not JSON-RPC: {exc}")
        return []


@attrs.frozen
class FollowEnd:
    """Why :meth:`SseFollower.follow` returned."""

    #: ``on_event`` had what it wanted
    done: bool = False
    #: otherwise what ended the last attempt: ``StreamRefused``, a ``BodyError``, an httpx
    #: exception; None when the stream simply ended
    error: Exception | None = None
    #: that, as redacted text ("ended" when the stream simply ended)
    reason: str = ""
    #: False when it could not be resumed: no event id to resume from
    resumable: bool = True
    #: reconnections made in all
    attempts: int = 0

    @property
    def unsupported(self) -> int | None:
        """The status (400, 404, 405) of a ``GET`` that says the server offers no such stream."""
        error = self.error
        return error.status if isinstance(error, StreamRefused) and error.unsupported else None


@attrs.define
class SseFollower:
    """Follows SSE streams: reads one, and when it ends or breaks, reconnects after the server's
    ``retry`` (else ``default_retry_ms``), at most ``attempts`` times in a row. An attempt that read
    an event with data starts the count again. ``attempts=0`` reads one stream and stops."""

    limit: int
    redact: Redactor
    diag: Callable[[str], None]
    attempts: int = 0
    default_retry_ms: int = 1000

    async def follow(
        self,
        connect: Connect,
        cursor: SseCursor,
        on_event: OnEvent,
        *,
        label: str,
        dropped: str | None = None,
        need_event_id: bool = False,
    ) -> FollowEnd:
        """Follow the stream ``connect(cursor)`` opens until ``on_event`` answers True or it cannot go on.

        ``connect`` enters into a response to read, or raises :class:`StreamRefused` (see
        :func:`check_event_stream`); it sends ``cursor.last_id`` as ``Last-Event-ID`` when there
        is one. ``dropped`` says the caller read the stream once already and why it stopped: then
        the first step is to reconnect. With ``need_event_id`` it does not reconnect without an
        event id (resuming one answer). Anything other than ``StreamRefused``, a ``BodyError``
        and httpx's request errors propagates: put :class:`map_errors` around the call.
        """
        error: Exception | None = None
        reason = dropped
        attempts = in_a_row = 0
        while True:
            if reason is not None:  # the stream is gone: reconnect, or say why not
                if need_event_id and cursor.last_id is None:
                    return FollowEnd(error=error, reason=reason, resumable=False, attempts=attempts)
                if in_a_row >= self.attempts:
                    return FollowEnd(error=error, reason=reason, attempts=attempts)
                in_a_row += 1
                attempts += 1
                self.diag(f"{label}: {reason}; reconnecting ({in_a_row} of {self.attempts})")
                await anyio.sleep(cursor.wait_seconds(self.default_retry_ms))
            seen = cursor.events
            try:
                async with connect(cursor) as response:
                    if await read_events(response, cursor, self.limit, on_event):
                        return FollowEnd(done=True, attempts=attempts)
                error, reason = None, "ended"
            except StreamRefused as exc:
                error, reason = exc, str(exc)
                if exc.unsupported:
                    return FollowEnd(error=exc, reason=reason, attempts=attempts)
            except BodyError as exc:  # an event too large, a body that cannot be decoded
                error, reason = exc, str(exc)
            except httpx.RequestError as exc:
                error, reason = exc, describe_exception(exc, self.redact)
            if cursor.events > seen:
                in_a_row = 0

"""One request: its POST, its answer (a JSON body or an SSE stream) into the queue, and resuming
an answer stream that dropped before the response (``GET`` + ``Last-Event-ID``, bounded).

A request that cannot get its answer fails alone (``RequestFailed``: the session raises it for that
request id, the connection stays); a broken connection or an expired session fails the transport.
A request refused for want of credentials even after the credential plugin was asked again (see
``HttpMessageStream.send_request``) fails with ``AuthRequired``, and so does the transport: the
server needs a sign-in before anything else will work.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx
from httpx_sse import ServerSentEvent

from kxen_core import RequestFailed
from kxen_core.errors import AuthRequired, PluginHookError, TransportError

from ._mcp_session import answers
from ._modern import headers_refused
from .plumbing import (
    BodyError,
    MessageTooLarge,
    SseCursor,
    content_type,
    describe_exception,
    messages_in,
    parse_messages,
    read_events,
    read_limited,
    rejected,
)

if TYPE_CHECKING:
    from ._parts import StreamParts


async def run_request(stream: StreamParts, rid: Any, body: bytes, headers: httpx.Headers) -> None:
    """The task of request ``rid``: POST it and feed its answer. It never raises (but cancellation)."""
    try:
        with stream.post_errors:
            dropped = await _post(stream, rid, body, headers)
            if dropped is not None:
                await _resume(stream, rid, *dropped)
    except MessageTooLarge as exc:
        await stream.deliver_error(rid, f"answer too large: {exc} (maxMessageBytes)")
    except BodyError as exc:  # an encoding not asked for, or corrupt compressed data
        await stream.deliver_error(rid, f"answer cannot be decoded: {exc}")
    except TransportError as error:  # the connection broke, or the session expired
        stream.fail(error)
    except AuthRequired as error:  # refused for good: this request fails with it, and the transport
        await stream.deliver(RequestFailed(rid, error))
        stream.fail(error)
    except PluginHookError as error:  # the credential plugin broke while answering a challenge
        await stream.deliver(RequestFailed(rid, error))


async def _post(stream: StreamParts, rid: Any, body: bytes, headers: httpx.Headers) -> tuple[SseCursor, str] | None:
    """POST request ``rid`` and feed its answer; when its SSE stream dropped before the response,
    return where it got to and why, for :func:`_resume`."""
    response = await stream.send_request("POST", stream.post_url, headers, content=body)
    try:
        status = response.status_code
        stream.mcp.check(response)
        if not 200 <= status < 300:
            failed = await rejected(response, rid, stream.redact)
            if status == 431 and isinstance(failed, RequestFailed):  # Request Header Fields Too Large
                failed = headers_refused(failed, headers)
            await stream.deliver(failed)
            return None
        if rid == stream.mcp.init_id:
            stream.mcp.take_id(response)
        ctype = content_type(response)
        if status in (202, 204) or not ctype:
            stream.diag(f"request {rid!r} was accepted without an answer (HTTP {status}); waiting for it elsewhere")
            return None
        if ctype == "application/json":
            raw = await read_limited(response, stream.options.maxMessageBytes)
            try:
                messages = parse_messages(raw)
            except ValueError as exc:
                await stream.deliver_error(rid, f"answer is not JSON-RPC: {exc}")
                return None
            found = False
            for message in messages:
                await stream.deliver(message)
                found = found or answers(message, rid)
            if not found:
                await stream.deliver_error(rid, "the JSON answer did not contain the response")
            return None
        if ctype == "text/event-stream":
            cursor = SseCursor()
            try:
                if await read_events(response, cursor, stream.options.maxMessageBytes, answer_reader(stream, rid)):
                    return None
                return cursor, "ended"
            except httpx.RequestError as exc:  # a dropped stream is not a cancellation: resume it
                return cursor, describe_exception(exc, stream.redact)
        await stream.deliver_error(rid, f"answer has an unexpected Content-Type {ctype[:60]!r} (HTTP {status})")
        return None
    finally:
        await response.aclose()


async def _resume(stream: StreamParts, rid: Any, cursor: SseCursor, dropped: str) -> None:
    @asynccontextmanager
    async def resume(cursor: SseCursor) -> AsyncIterator[httpx.Response]:
        stream.resumes += 1
        async with stream.open_get(cursor) as response:
            yield response

    end = await stream.follower.follow(
        resume,
        cursor,
        answer_reader(stream, rid),
        label=f"answer stream for request {rid!r}",
        dropped=dropped,
        need_event_id=True,
    )
    if end.done:
        return
    if not end.resumable:
        await stream.deliver_error(rid, "the answer stream ended before the response and cannot be resumed")
    elif end.unsupported is not None:
        await stream.deliver_error(rid, f"the answer stream cannot be resumed (GET: HTTP {end.unsupported})")
    else:
        await stream.deliver_error(
            rid, f"the answer stream was not resumed after {end.attempts} attempt(s) ({end.reason})"
        )


def answer_reader(stream: StreamParts, want: Any) -> Any:
    """The ``on_event`` of an SSE stream: feed its messages; True once the response to ``want``
    went by (never, for ``want=None``: the GET stream). An event that is not JSON-RPC (not JSON,
    nested too deeply...) is a diagnostic: the stream goes on."""

    async def on_event(event: ServerSentEvent) -> bool:
        found = False
        for message in messages_in(event, stream.diag):
            await stream.deliver(message)
            found = found or (want is not None and answers(message, want))
        return found

    return on_event

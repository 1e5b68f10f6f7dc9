"""The legacy HTTP+SSE transport (MCP 2024-11-05) as a :class:`kxen_core.transport.MessageStream`.

Entering GETs the SSE URL and waits (at most ``endpointTimeoutSeconds``) for the ``endpoint`` event.
Its URL is resolved against the SSE URL and refused unless scheme, host and port are the same
(a server must not send our credentials elsewhere). Every outgoing message is POSTed there (the
server answers ``202``); server messages, responses included, arrive as ``message`` events on the
one GET stream and go into a bounded queue that ``receive`` reads. When that stream ends, the
transport is closed and ``receive`` raises ``ClosedError``.

An HTTP error on the POST of a request becomes a JSON-RPC error for that request id (the session
raises ``RemoteError``); on a notification or response it is a diagnostic.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import Any, Callable
from urllib.parse import urljoin, urlsplit

import anyio
import anyio.abc
import httpx

from kxen_core.config.models import ServerConfig
from kxen_core.errors import ClosedError, ConnectError, TransportError
from kxen_core.transport import Message, TransportContext
from kxen_transport_http.common import (
    StreamFailures,
    ClientTransport,
    open_client,
    CLOSE_STEP_SECONDS,
    ERROR_BODY_LIMIT,
    MessageTooLarge,
    Options,
    Redactor,
    content_type,
    encode,
    error_from_http,
    iter_events,
    map_http_error,
    parse_messages,
    parse_options,
    read_limited,
    request_headers,
    safe_url,
)

SSE_OPTIONS = ("maxMessageBytes", "connectTimeoutSeconds", "queueSize", "endpointTimeoutSeconds")
_DEFAULT_PORTS = {"http": 80, "https": 443}

#: tests and embedding hosts may set this to hand every new client an ``httpx.AsyncBaseTransport``
transport_factory: Callable[[ServerConfig], httpx.AsyncBaseTransport | None] | None = None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme)


def resolve_endpoint(sse_url: str, data: str, server: str = "") -> str:
    """The POST URL named by an ``endpoint`` event, resolved against ``sse_url``; same origin only."""
    data = data.strip()
    if not data:
        raise ConnectError("the endpoint event is empty", server=server)
    try:
        target = urljoin(sse_url, data)
        same = _origin(target) == _origin(sse_url)
    except ValueError:
        raise ConnectError("the endpoint event is not a valid URL", server=server) from None
    if not same:
        scheme, host, port = _origin(target)
        raise ConnectError(
            f"the endpoint event names another origin ({scheme}://{host}:{port}); refused", server=server
        )
    return target


class LegacySSEStream(StreamFailures):
    """The :class:`~kxen_core.transport.MessageStream` of one HTTP+SSE connection."""

    def __init__(self, server: ServerConfig, context: TransportContext, client: httpx.AsyncClient, opts: Options) -> None:
        self._server = server
        self._name = server.name
        self._context = context
        self._client = client
        self._opts = opts
        self._url = server.url or ""
        self._safe_url = safe_url(self._url)
        self._endpoint = ""
        self._redact = Redactor()
        self._post_timeout = httpx.Timeout(
            connect=opts.connectTimeoutSeconds, read=server.timeouts.requestSeconds, write=30.0, pool=30.0
        )
        self._feed, self._inbox = anyio.create_memory_object_stream[Message](opts.queueSize)
        self._failure: TransportError | None = None
        self._closing = False
        self._posts = self._received = 0

    # --- MessageStream ------------------------------------------------------------------------

    def send_nowait(self, message: Message) -> bool:
        return False  # every POST is awaited by send()

    async def send(self, message: Message) -> None:
        if self._failure is not None:
            raise self._closed()
        method = message.get("method")
        rid = message.get("id")
        body = encode(message)
        headers = await request_headers(self._server, self._context, "POST", self._endpoint, self._redact)
        headers["Content-Type"] = "application/json"
        self._posts += 1
        try:
            async with self._client.stream(
                "POST", self._endpoint, content=body, headers=headers, timeout=self._post_timeout
            ) as response:
                if 200 <= response.status_code < 300:
                    return
                try:
                    error_body = await read_limited(response, ERROR_BODY_LIMIT)
                except (MessageTooLarge, httpx.HTTPError):
                    error_body = b""
        except Exception as exc:
            self._fail(map_http_error(exc, f"POST {safe_url(self._endpoint)}", self._redact, self._name))
            raise self._closed()
        error = error_from_http(rid, response.status_code, response.reason_phrase, error_body, self._redact)
        if isinstance(method, str) and rid is not None:
            await self._deliver(error)
        else:
            self._diag(f"{method or 'response'}: server rejected it: HTTP {response.status_code}")

    async def receive(self) -> Message:
        try:
            return await self._inbox.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise self._closed()

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "sse",
            "url": self._safe_url,
            "endpoint": safe_url(self._endpoint) if self._endpoint else None,
            "posts": self._posts,
            "received": self._received,
            "closed": str(self._failure) if self._failure is not None else None,
        }

    # --- plumbing -----------------------------------------------------------------------------

    async def _deliver(self, message: Message) -> None:
        self._received += 1
        try:
            await self._feed.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    # --- the SSE stream -------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Open the stream, wait for the endpoint, report started, then feed messages until it ends."""
        started = False
        try:
            headers = await request_headers(self._server, self._context, "GET", self._url, self._redact)
            headers["Accept"] = "text/event-stream"
            headers["Cache-Control"] = "no-store"
            async with self._client.stream("GET", self._url, headers=headers) as response:
                status = response.status_code
                if not 200 <= status < 300 or content_type(response) != "text/event-stream":
                    raise ConnectError(
                        f"GET {self._safe_url}: HTTP {status} ({content_type(response)[:60] or 'no content type'}),"
                        " not an SSE stream",
                        server=self._name,
                    )
                async with aclosing(iter_events(response, self._opts.maxMessageBytes)) as events:
                    with anyio.move_on_after(self._opts.endpointTimeoutSeconds) as waiting:
                        async for event in events:
                            if event.event == "endpoint":
                                self._endpoint = resolve_endpoint(self._url, event.data, self._name)
                                break
                            if event.data:
                                self._diag(f"ignored a {event.event[:40]!r} event before the endpoint event")
                    if not self._endpoint:
                        why = (
                            f"within {self._opts.endpointTimeoutSeconds:g} s"
                            if waiting.cancelled_caught
                            else "before the stream ended"
                        )
                        raise ConnectError(f"GET {self._safe_url}: no endpoint event {why}", server=self._name)
                    started = True
                    task_status.started()
                    async for event in events:
                        if event.event != "message":
                            if event.event != "endpoint" or event.data.strip() != "":
                                self._diag(f"ignored an SSE event of type {event.event[:40]!r}")
                            continue
                        if not event.data:
                            continue
                        try:
                            messages = parse_messages(event.data)
                        except ValueError as exc:
                            self._diag(f"ignored an SSE message that is not JSON-RPC: {exc}")
                            continue
                        for message in messages:
                            await self._deliver(message)
            self._fail(ClosedError(f"the SSE stream from {self._safe_url} ended", server=self._name))
        except ConnectError:
            raise  # only raised before the endpoint arrived: tg.start() hands it to the opener
        except MessageTooLarge as exc:
            error = ClosedError(f"{exc} (maxMessageBytes); stream abandoned", server=self._name)
            if not started:
                raise ConnectError(str(error), server=self._name) from None
            self._fail(error)
        except Exception as exc:
            error = map_http_error(exc, f"GET {self._safe_url}", self._redact, self._name)
            if not started:
                raise ConnectError(str(error), server=self._name) from None
            self._fail(error)

    def shutdown(self) -> None:
        self._closing = True
        if self._failure is None:
            self._failure = ClosedError("transport closed", server=self._name)
        self._feed.close()
        self._inbox.close()


class LegacySSETransport(ClientTransport):
    """The async context manager an ``open_*`` opener returns for kind ``sse``.

    Entering raises ``ConnectError`` when the stream cannot be opened or gives no usable endpoint,
    and ``ConfigError`` for invalid ``server.options``. Exceptions from the body of the
    ``async with`` pass through unchanged (the task group never wraps them).
    """

    async def __aenter__(self) -> LegacySSEStream:
        server = self._check_fresh()
        # validated at config load; a context made by hand (tests, embedding) is checked here
        opts = self._context.options if self._context.options is not None else parse_options(server, SSE_OPTIONS)
        self._client = open_client(server, "sse", opts, self._http_transport, transport_factory)
        self._stream = LegacySSEStream(server, self._context, self._client, opts)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            await self._tg.start(self._stream.run)
        except BaseException:
            await self._close()
            raise
        return self._stream

    async def __aexit__(self, *exc: Any) -> None:
        await self._close()

    async def _close(self) -> None:
        assert self._tg is not None and self._client is not None and self._stream is not None
        self._tg.cancel_scope.cancel()
        self._stream.shutdown()
        try:
            # our tasks never raise, so this only waits for them to finish cancelling
            await self._tg.__aexit__(None, None, None)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_STEP_SECONDS):
                await self._client.aclose()


def open_legacy_sse(
    server: ServerConfig,
    context: TransportContext,
    *,
    http_transport: httpx.AsyncBaseTransport | None = None,
) -> LegacySSETransport:
    """The transport for ``server`` (kind ``sse``): ``async with`` it to get the message stream."""
    return LegacySSETransport(server, context, http_transport)

"""The legacy HTTP+SSE transport (MCP 2024-11-05) as a :class:`kxen_core.MessageStream`.

Entering GETs the SSE URL and waits (at most ``endpointTimeoutSeconds``) for the ``endpoint`` event.
Its URL is resolved against the SSE URL and refused unless scheme, host and port are the same
(a server must not send our credentials elsewhere). Every outgoing message is POSTed there (the
server answers ``202``); server messages, responses included, arrive as ``message`` events on the
one GET stream and go into a bounded queue that ``receive`` reads. When that stream ends, the
transport is closed and ``receive`` raises ``ClosedError``: this protocol has no resumption.

An HTTP error on the POST of a request becomes a JSON-RPC error for that request id (the session
raises ``RemoteError``) or ``HTTPStatusError``; on a notification or response it is a diagnostic.
A ``401`` (or a ``403`` with a ``WWW-Authenticate`` challenge), on the GET or a POST, asks
``kxen_credential_lookup`` again with the challenge and sends once more when that changes the
headers; otherwise it fails with ``AuthRequired``: the opener, the request, and the transport.

Everything HTTP is :mod:`kxen_transport_http.plumbing`, the public API of the ``kxen-transport-http``
distribution: the client, headers and redaction, bounded reads, error mapping, the SSE follower
and the closing sequence.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urljoin, urlsplit

import anyio
import anyio.abc
import httpx
from httpx_sse import ServerSentEvent
from kxen_transport_http.options import SseOptions
from kxen_transport_http.plumbing import (
    BodyError,
    FollowEnd,
    HttpMessageStream,
    HttpTransport,
    MessageTooLarge,
    SseCursor,
    SseFollower,
    TransportFactory,
    check_event_stream,
    encode,
    map_errors,
    messages_in,
    rejected,
    request_headers,
    safe_url,
)

from kxen_core import Message, RequestFailed, ServerConfig, TransportContext
from kxen_core.errors import AuthRequired, ClosedError, ConnectError, KxenError, PluginHookError, TransportError

_DEFAULT_PORTS = {"http": 80, "https": 443}

#: tests and embedding hosts may set this to hand every new client an ``httpx.AsyncBaseTransport``
transport_factory: TransportFactory | None = None


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


class LegacySSEStream(HttpMessageStream):
    """The :class:`~kxen_core.MessageStream` of one HTTP+SSE connection."""

    #: HTTP+SSE (2024-11-05) predates the stateless era: the core sends no era probe over it
    protocol_eras = ("legacy",)

    def __init__(
        self,
        server: ServerConfig,
        context: TransportContext,
        client: httpx.AsyncClient,
        tg: anyio.abc.TaskGroup,
        options: SseOptions,
    ) -> None:
        super().__init__(server, context, client, tg, options)
        self._endpoint = ""
        self._post_errors: map_errors | None = None
        self._started: anyio.abc.TaskStatus[None] | None = None

    # --- MessageStream ------------------------------------------------------------------------

    def send_nowait(self, message: Message) -> bool:
        return False  # every POST is awaited by send()

    async def send(self, message: Message) -> None:
        if self.failure is not None or self._post_errors is None:
            raise self.closed_error()
        method = message.get("method")
        rid = message.get("id")
        body = encode(message)
        try:
            headers = await request_headers(
                self.server, self.context, "POST", self._endpoint, self.redact, memo=self.credentials
            )
        except AuthRequired as exc:  # the credential plugin cannot get a token without a person
            self.fail(exc)
            raise
        headers["Content-Type"] = "application/json"
        self.posts += 1
        try:
            with self._post_errors:
                response = await self.send_request(
                    "POST", self._endpoint, headers, content=body, timeout=self.post_timeout
                )
                try:
                    if 200 <= response.status_code < 300:
                        return
                    error = await rejected(response, rid, self.redact)
                finally:
                    await response.aclose()
        except TransportError as exc:
            self.fail(exc)
            raise self.closed_error()  # noqa: B904 (it carries what failed the transport as its cause)
        except AuthRequired as exc:  # refused for good: the request fails with it, and so does the transport
            if isinstance(method, str) and rid is not None:
                await self.deliver(RequestFailed(rid, exc))
                self.fail(exc)
                return
            self.fail(exc)
            raise
        if isinstance(method, str) and rid is not None:
            await self.deliver(error)
        else:
            self.diag(f"{method or 'response'}: server rejected it: HTTP {response.status_code}")

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "sse",
            "url": self.safe_url,
            "endpoint": safe_url(self._endpoint) if self._endpoint else None,
            "posts": self.posts,
            "received": self.received,
            "closed": str(self.failure) if self.failure is not None else None,
        }

    # --- the SSE stream -------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the stream and wait, bounded, for the endpoint; ``ConnectError`` when there is none."""
        timeout = self.options.endpointTimeoutSeconds
        with anyio.move_on_after(timeout) as waiting:
            await self.tg.start(self._run)
        if waiting.cancelled_caught:
            raise ConnectError(f"GET {self.safe_url}: no endpoint event within {timeout:g} s", server=self.name)

    async def _run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Follow the stream: report started at the endpoint event, then feed messages until it ends."""
        self._started = task_status
        follower = SseFollower(
            limit=self.options.maxMessageBytes, redact=self.redact, diag=self.diag
        )  # no reconnecting
        error: KxenError
        try:
            with map_errors(f"GET {self.safe_url}", self.redact, self.name):
                error = self._ended(
                    await follower.follow(self._connect, SseCursor(), self._on_event, label="SSE stream")
                )
        except (TransportError, AuthRequired, PluginHookError) as exc:
            error = exc
        if not self._endpoint:  # not started: tg.start() hands this to the opener
            if not isinstance(error, (ConnectError, AuthRequired, PluginHookError)):
                error = ConnectError(str(error), server=self.name)
            raise error
        self.fail(error)

    def _ended(self, end: FollowEnd) -> TransportError:
        if isinstance(end.error, MessageTooLarge):
            return ClosedError(f"{end.error} (maxMessageBytes); stream abandoned", server=self.name)
        if isinstance(end.error, BodyError):
            return ClosedError(f"{end.error}; stream abandoned", server=self.name)
        if end.error is not None:
            return ClosedError(f"GET {self.safe_url}: {end.reason}", server=self.name)
        if not self._endpoint:
            return ConnectError(f"GET {self.safe_url}: no endpoint event before the stream ended", server=self.name)
        return ClosedError(f"the SSE stream from {self.safe_url} ended", server=self.name)

    @asynccontextmanager
    async def _connect(self, cursor: SseCursor) -> AsyncIterator[httpx.Response]:
        headers = await request_headers(self.server, self.context, "GET", self.url, self.redact, memo=self.credentials)
        headers["Accept"] = "text/event-stream"
        headers["Cache-Control"] = "no-store"
        response = await self.send_request("GET", self.url, headers)
        try:
            check_event_stream(response)
            yield response
        finally:
            await response.aclose()

    async def _on_event(self, event: ServerSentEvent) -> bool:
        if not self._endpoint:
            if event.event == "endpoint":
                self._endpoint = resolve_endpoint(self.url, event.data, self.name)
                self._post_errors = map_errors(f"POST {safe_url(self._endpoint)}", self.redact, self.name)
                assert self._started is not None
                self._started.started()
            elif event.data:
                self.diag(f"ignored a {event.event[:40]!r} event before the endpoint event")
            return False
        if event.event != "message":
            if event.event != "endpoint" or event.data.strip() != "":
                self.diag(f"ignored an SSE event of type {event.event[:40]!r}")
            return False
        for message in messages_in(event, self.diag):
            await self.deliver(message)
        return False


class LegacySSETransport(HttpTransport[LegacySSEStream]):
    """The async context manager the opener returns for kind ``sse``.

    Entering raises ``ConnectError`` when the stream cannot be opened or gives no usable endpoint,
    and ``ConfigError`` for invalid ``server.options`` when ``context.options`` is not given (see
    :class:`~kxen_transport_http.plumbing.HttpTransport`).
    """

    options_class = SseOptions

    def make_stream(self, client: httpx.AsyncClient, tg: anyio.abc.TaskGroup, options: Any) -> LegacySSEStream:
        return LegacySSEStream(self._server, self._context, client, tg, options)


def open_legacy_sse(
    server: ServerConfig,
    context: TransportContext,
    *,
    http_transport: httpx.AsyncBaseTransport | None = None,
) -> LegacySSETransport:
    """The transport for ``server`` (kind ``sse``): ``async with`` it to get the message stream."""
    return LegacySSETransport(server, context, http_transport, lambda: transport_factory)

"""Streamable HTTP (MCP 2025-03-26 .. 2025-11-25) as a :class:`kxen_core.MessageStream`.

Every outgoing message is one POST to the endpoint. A *request* is POSTed from its own task, so
``send`` (or ``send_nowait``) returns at once and the session's timeout governs the wait; its answer
(a JSON body or an SSE stream) is fed into one bounded queue that ``receive`` reads. Notifications
and responses are POSTed inline and expect ``202``, which keeps them in order.

The rooms, one job each: this module is the stream and the transport; :mod:`._exchange` is one
request (POST, answer, resumption); :mod:`._get_stream` the GET stream; :mod:`._mcp_session` the
session id and protocol version every request carries; :mod:`._modern` the stateless era's headers
(``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``); :mod:`._tasks` where request tasks run.
Everything HTTP both transports share is :mod:`kxen_transport_http.plumbing`.

Hot path (see docs/performance.md, W6): on asyncio a request's task is a plain asyncio task (no
anyio task-group wrapper, see :mod:`._tasks`); when no plugin implements ``kxen_credential_lookup``
the POST headers are built once (again only when the session id or the protocol version changes)
and ``send_nowait`` starts the request without an ``await``; the session's receiver takes each
answer in the request's task as it is read (``set_receiver``: no hop through the queue and the
session's reader task, one event-loop iteration less per request).

* ``Mcp-Session-Id`` is taken from the answer to ``initialize`` and sent on every later request;
  ``MCP-Protocol-Version`` is taken from the initialize result as it passes through and sent after.
* An SSE answer that drops before the response is resumed with ``GET`` + ``Last-Event-ID`` after the
  server's ``retry`` delay, at most ``maxReconnectAttempts`` times in a row.
* An HTTP error (4xx/5xx) for a request becomes a JSON-RPC error for that request id (so the session
  raises ``RemoteError``), or ``HTTPStatusError``; an answer that cannot be used (too large, not
  JSON, lost) fails that request with ``ProtocolError``.
* ``404`` while a session id is known means the server ended the session: the transport closes with
  ``ClosedError("session expired ...")`` so the runtime reconnects (new transport, new initialize,
  no session id). Re-initializing underneath the session is not attempted: it would hide the loss of
  server-side state (subscriptions, log level) from the runtime.
* ``401`` (or ``403`` with a ``WWW-Authenticate`` challenge) on any request, the GET stream
  included, asks ``kxen_credential_lookup`` again with the challenge and sends the request once
  more when that changes the headers; otherwise the request, and the transport, fail with
  ``AuthRequired`` (so does an ``AuthRequired`` the credential plugin raises).
* After ``notifications/initialized`` a GET stream carries server-initiated messages; ``400``/``405``
  mean the server offers none, and it is not retried.
* Leaving the context cancels every task, sends a best-effort ``DELETE`` for the session (2 s) and
  closes the HTTP client, shielded and bounded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import httpx

from kxen_core import Message, RequestFailed, ServerConfig, TransportContext
from kxen_core.errors import AuthRequired, KxenError, PluginHookError, ProtocolError, TransportError

from ._exchange import run_request
from ._get_stream import GetStream
from ._mcp_session import McpSession, SessionExpired
from ._modern import HeaderTooLarge, ModernHeaders
from ._tasks import request_tasks
from .options import HttpOptions
from .plumbing import (
    CLOSE_STEP_SECONDS,
    HttpMessageStream,
    HttpTransport,
    SseCursor,
    SseFollower,
    TransportFactory,
    check_event_stream,
    content_type,
    encode,
    map_errors,
    rejected,
)

#: tests and embedding hosts may set this to hand every new client an ``httpx.AsyncBaseTransport``
transport_factory: TransportFactory | None = None


class StreamableHTTPStream(HttpMessageStream):
    """The :class:`~kxen_core.MessageStream` of one Streamable HTTP connection."""

    def __init__(
        self,
        server: ServerConfig,
        context: TransportContext,
        client: httpx.AsyncClient,
        tg: anyio.abc.TaskGroup,
        options: HttpOptions,
    ) -> None:
        super().__init__(server, context, client, tg, options)
        self.post_url: httpx.URL | str = self.url
        try:
            self.post_url = httpx.URL(self.url)  # parsed once, not on every POST
        except Exception:
            pass  # the POST fails with the same error the string gives (a ConnectError)
        self.post_errors = map_errors(f"POST {self.safe_url}", self.redact, self.name)
        self.mcp = McpSession(server, context, self.redact, self.safe_url, self.diag, self.credentials)
        # the stateless era's headers (MCP 2026-07-28), bounded
        self.modern = ModernHeaders(
            max_value=options.maxHeaderValueBytes, max_total=options.maxMirroredHeaderBytes, server=self.name
        )
        self.follower = SseFollower(
            limit=options.maxMessageBytes,
            redact=self.redact,
            diag=self.diag,
            attempts=options.maxReconnectAttempts,
            default_retry_ms=options.defaultRetryMs,
        )
        self.get_stream = GetStream(self)
        self.resumes = 0
        self._requests = request_tasks(tg)

    # --- MessageStream ------------------------------------------------------------------------

    def send_nowait(self, message: Message) -> bool:
        """Start a request's POST without waiting (the session's hot path); True when it did.

        False (nothing sent) for what ``send`` must do instead: notifications and responses (POSTed
        inline), a request whose headers need the ``kxen_credential_lookup`` hook, a request whose
        mirrored headers pass a bound (``send`` raises ``HeaderTooLarge``), a closed transport.
        """
        if self.failure is not None:
            return False
        method = message.get("method")
        rid = message.get("id")
        if not isinstance(method, str) or rid is None:
            return False
        headers = self.mcp.post_headers_now()
        if headers is None:
            return False
        try:
            headers = self.modern.headers_for(message, headers)
        except HeaderTooLarge:
            return False  # send() raises it, to the caller of that request alone
        self._start_request(method, rid, encode(message), headers)
        return True

    async def send(self, message: Message) -> None:
        if self.failure is not None:
            raise self.closed_error()
        method = message.get("method")
        rid = message.get("id")
        body = encode(message)
        try:
            headers = self.modern.headers_for(message, await self.mcp.post_headers())
        except AuthRequired as error:  # the credential plugin cannot get a token without a person
            self.fail(error)
            raise
        if isinstance(method, str) and rid is not None:
            self._start_request(method, rid, body, headers)
            return
        self.posts += 1
        await self._post_inline(method if isinstance(method, str) else "response", body, headers)
        if method == "notifications/cancelled":
            # the session gave up on that request: stop reading its answer
            params = message.get("params")
            target = params.get("requestId") if isinstance(params, dict) else None
            if isinstance(target, (int, str)):
                self._requests.cancel(target)
        elif method == "notifications/initialized":
            await self.get_stream.open()

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "http",
            "url": self.safe_url,
            "session": self.mcp.id is not None,
            "protocolVersion": self.mcp.protocol_version or self.modern.version,
            "getStream": self.get_stream.state,
            "posts": self.posts,
            "received": self.received,
            "resumes": self.resumes,
            "closed": str(self.failure) if self.failure is not None else None,
        }

    # --- what the rooms share -------------------------------------------------------------------

    async def deliver(self, message: Message | RequestFailed) -> None:
        if self.mcp.init_id is not None and not isinstance(message, RequestFailed):
            self.mcp.note(message)  # the protocol version, from the answer to initialize
        if self.modern.watching:
            self.modern.note(message)  # the tools' x-mcp-header annotations, from tools/list
        await super().deliver(message)

    async def deliver_error(self, rid: Any, message: str) -> None:
        """Fail request ``rid`` locally (the session raises ``ProtocolError``); the connection stays."""
        self.diag(message)
        await self.deliver(RequestFailed(rid, ProtocolError(message, server=self.name)))

    def fail(self, error: KxenError) -> None:
        if isinstance(error, SessionExpired):
            self.mcp.expired = True  # the server already forgot the session: no DELETE
        super().fail(error)

    @asynccontextmanager
    async def open_get(self, cursor: SseCursor) -> AsyncIterator[httpx.Response]:
        """A GET for an SSE stream, resuming after ``cursor.last_id`` when there is one."""
        headers = await self.mcp.headers("GET")
        headers["Accept"] = "text/event-stream"
        if cursor.last_id is not None:
            headers["Last-Event-ID"] = cursor.last_id
        response = await self.send_request("GET", self.url, headers)
        try:
            self.mcp.check(response)
            check_event_stream(response)
            yield response
        finally:
            await response.aclose()

    # --- requests, notifications and responses ----------------------------------------------

    def _start_request(self, method: str, rid: Any, body: bytes, headers: httpx.Headers) -> None:
        self.posts += 1
        if method == "initialize":
            self.mcp.init_id = rid
        self.modern.watch(method, rid)
        self._requests.start(rid, run_request, self, rid, body, headers)

    async def _post_inline(self, label: str, body: bytes, headers: httpx.Headers) -> None:
        try:
            with self.post_errors:
                response = await self.send_request(
                    "POST", self.post_url, headers, content=body, timeout=self.post_timeout
                )
                try:
                    self.mcp.check(response)
                    status = response.status_code
                    if 200 <= status < 300:
                        if status not in (202, 204) and content_type(response):
                            self.diag(f"{label}: server answered HTTP {status} with a body; ignored")
                        return
                    error = await rejected(response, None, self.redact)
                finally:
                    await response.aclose()
        except TransportError as exc:
            self.fail(exc)
            raise self.closed_error()  # noqa: B904 (it carries what failed the transport as its cause)
        except AuthRequired as exc:  # refused for good: so is every later message
            self.fail(exc)
            raise
        text = str(error.error) if isinstance(error, RequestFailed) else error["error"]["message"]
        self.diag(f"{label}: server rejected it: {text}")

    # --- closing ------------------------------------------------------------------------------

    def cancel_tasks(self) -> None:
        self._requests.cancel_all()

    async def join(self) -> None:
        await self._requests.join()

    async def farewell(self) -> None:
        """DELETE the session (best effort, bounded)."""
        if self.mcp.id is None or self.mcp.expired:
            return
        with anyio.move_on_after(CLOSE_STEP_SECONDS):
            try:
                with map_errors(f"DELETE {self.safe_url}", self.redact, self.name):
                    # only the status matters: the body is never read (it could be a decompression bomb)
                    async with self.client.stream(
                        "DELETE", self.url, headers=await self.mcp.headers("DELETE")
                    ) as response:
                        status = response.status_code
                if status not in (200, 202, 204, 404, 405):
                    self.context.diagnostic(f"{self.name}: session DELETE answered HTTP {status}")
            except (TransportError, AuthRequired, PluginHookError) as exc:  # best effort
                self.context.diagnostic(self.redact(f"{self.name}: session DELETE failed: {exc}"))


class StreamableHTTPTransport(HttpTransport[StreamableHTTPStream]):
    """The async context manager the opener returns for kind ``http``: entering makes the client
    and yields the stream; nothing is sent before the first message (see :class:`HttpTransport`)."""

    options_class = HttpOptions

    def make_stream(self, client: httpx.AsyncClient, tg: anyio.abc.TaskGroup, options: Any) -> StreamableHTTPStream:
        return StreamableHTTPStream(self._server, self._context, client, tg, options)


def open_streamable_http(
    server: ServerConfig,
    context: TransportContext,
    *,
    http_transport: httpx.AsyncBaseTransport | None = None,
) -> StreamableHTTPTransport:
    """The transport for ``server`` (kind ``http``): ``async with`` it to get the message stream.

    ``http_transport`` (or the module's ``transport_factory``) replaces the network, e.g. with
    ``httpx.MockTransport``. Invalid ``server.options`` raise ``ConfigError`` on entering when
    ``context.options`` is not given.
    """
    return StreamableHTTPTransport(server, context, http_transport, lambda: transport_factory)

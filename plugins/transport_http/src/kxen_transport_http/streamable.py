"""Streamable HTTP (MCP 2025-03-26 .. 2025-11-25) as a :class:`kxen_core.transport.MessageStream`.

Every outgoing message is one POST to the endpoint. A *request* is POSTed from its own task, so
``send`` (or ``send_nowait``) returns at once and the session's timeout governs the wait; its answer
(a JSON body or an SSE stream) is fed into one bounded queue that ``receive`` reads. Notifications
and responses are POSTed inline and expect ``202``, which keeps them in order.

Hot path (see docs/performance.md, W6): on asyncio a request's task is a plain asyncio task (no anyio
task-group wrapper), tracked and cancelled by the transport itself; when no plugin implements
``kxen_credential_lookup`` the POST headers are built once (again only when the session id or the
protocol version changes) and ``send_nowait`` starts the request without an ``await``; answers go
into the queue and come out of it without a checkpoint unless it is full or empty.

* ``Mcp-Session-Id`` is taken from the answer to ``initialize`` and sent on every later request;
  ``MCP-Protocol-Version`` is taken from the initialize result as it passes through and sent after.
* An SSE answer that drops before the response is resumed with ``GET`` + ``Last-Event-ID`` after the
  server's ``retry`` delay, at most ``maxReconnectAttempts`` times.
* An HTTP error (4xx/5xx) for a request becomes a JSON-RPC error for that request id (so the session
  raises ``RemoteError``), as does an answer that cannot be used (too large, not JSON, lost).
* ``404`` while a session id is known means the server ended the session: the transport closes with
  ``ClosedError("session expired ...")`` so the runtime reconnects (new transport, new initialize,
  no session id). Re-initializing underneath the session is not attempted: it would hide the loss of
  server-side state (subscriptions, log level) from the runtime.
* After ``notifications/initialized`` a GET stream carries server-initiated messages; ``400``/``405``
  mean the server offers none, and it is not retried.
* Leaving the context cancels every task, sends a best-effort ``DELETE`` for the session (2 s) and
  closes the HTTP client, shielded and bounded.
"""

from __future__ import annotations

import asyncio
import re
from contextlib import aclosing
from typing import Any, Callable

import anyio
import anyio.abc
import attrs
import httpx

from kxen_core.config.models import ServerConfig
from kxen_core.errors import ClosedError, ProtocolError, TransportError
from kxen_core.transport import Message, RequestFailed, TransportContext

from .common import (
    StreamFailures,
    ClientTransport,
    open_client,
    CLOSE_STEP_SECONDS,
    ERROR_BODY_LIMIT,
    MAX_SESSION_ID_LENGTH,
    MessageTooLarge,
    Options,
    Redactor,
    config_headers,
    content_type,
    encode,
    error_from_http,
    has_credential_hook,
    iter_events,
    map_http_error,
    parse_messages,
    parse_options,
    read_limited,
    request_headers,
    safe_url,
)

HTTP_OPTIONS = (
    "maxMessageBytes",
    "connectTimeoutSeconds",
    "queueSize",
    "getStream",
    "maxReconnectAttempts",
    "defaultRetryMs",
)
ACCEPT_POST = "application/json, text/event-stream"
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
#: a server's ``retry`` is honoured up to this many milliseconds
MAX_RETRY_MS = 60_000
#: JSON-RPC code of the errors this transport makes up for a request (HTTP status, lost stream)
_VERSION_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

#: tests and embedding hosts may set this to hand every new client an ``httpx.AsyncBaseTransport``
transport_factory: Callable[[ServerConfig], httpx.AsyncBaseTransport | None] | None = None


class _SessionExpired(Exception):
    pass


@attrs.define
class _Cursor:
    """Where an SSE stream got to: what a GET needs to resume it."""

    last_id: str | None = None
    retry_ms: int | None = None


def _answers(message: Message, rid: Any) -> bool:
    return type(message) is dict and "method" not in message and message.get("id") == rid and ("result" in message or "error" in message)


class StreamableHTTPStream(StreamFailures):
    """The :class:`~kxen_core.transport.MessageStream` of one Streamable HTTP connection."""

    def __init__(
        self,
        server: ServerConfig,
        context: TransportContext,
        client: httpx.AsyncClient,
        tg: anyio.abc.TaskGroup,
        opts: Options,
    ) -> None:
        self._server = server
        self._name = server.name
        self._context = context
        self._client = client
        self._tg = tg
        self._opts = opts
        self._url = server.url or ""
        self._post_url: httpx.URL | str = self._url
        try:
            self._post_url = httpx.URL(self._url)  # parsed once, not on every POST
        except Exception:
            pass  # the POST fails with the same error the string gives (a ConnectError)
        self._safe_url = safe_url(self._url)
        self._redact = Redactor()
        self._inline_timeout = httpx.Timeout(
            connect=opts.connectTimeoutSeconds, read=server.timeouts.requestSeconds, write=30.0, pool=30.0
        )
        self._feed, self._inbox = anyio.create_memory_object_stream[Message](opts.queueSize)
        self._session_id: str | None = None
        self._protocol_version: str | None = None
        self._init_id: Any = None
        #: what cancels each request's POST: its asyncio task, or its cancel scope on other backends
        self._in_flight: dict[Any, asyncio.Task | anyio.CancelScope] = {}
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # another anyio backend: requests run in the task group
            self._loop = None
        #: request tasks on asyncio (not in the task group): cancelled and awaited on close
        self._tasks: set[asyncio.Task] = set()
        #: the POST headers while no plugin implements kxen_credential_lookup; None: build them again
        self._fixed_post_headers: httpx.Headers | None = None
        self._failure: TransportError | None = None
        self._closing = False
        self._expired = False
        self._get_state = "off"
        self._posts = self._received = self._resumes = 0

    # --- MessageStream ------------------------------------------------------------------------

    def send_nowait(self, message: Message) -> bool:
        """Start a request's POST without waiting (the session's hot path); True when it did.

        False (nothing sent) for what ``send`` must do instead: notifications and responses (POSTed
        inline), a request whose headers need the ``kxen_credential_lookup`` hook, a closed transport.
        """
        if self._failure is not None:
            return False
        method = message.get("method")
        rid = message.get("id")
        if not isinstance(method, str) or rid is None:
            return False
        headers = self._post_headers_now()
        if headers is None:
            return False
        self._start_request(method, rid, encode(message), headers)
        return True

    async def send(self, message: Message) -> None:
        if self._failure is not None:
            raise self._closed_error()
        method = message.get("method")
        rid = message.get("id")
        body = encode(message)
        headers = self._post_headers_now()
        if headers is None:
            headers = await self._headers("POST")
            headers["Accept"] = ACCEPT_POST
            headers["Content-Type"] = "application/json"
        if isinstance(method, str) and rid is not None:
            self._start_request(method, rid, body, headers)
            return
        self._posts += 1
        await self._post_inline(method if isinstance(method, str) else "response", body, headers)
        if method == "notifications/cancelled":
            # the session gave up on that request: stop reading its answer
            params = message.get("params")
            target = params.get("requestId") if isinstance(params, dict) else None
            handle = self._in_flight.pop(target, None) if isinstance(target, (int, str)) else None
            if handle is not None:
                handle.cancel()  # once: a task's own shielded cleanup is not interrupted again on close
        elif method == "notifications/initialized" and self._opts.getStream and self._get_state == "off":
            self._get_state = "opening"
            self._tg.start_soon(self._get_loop, name="kxen-http-get")

    async def receive(self) -> Message:
        try:
            return self._inbox.receive_nowait()  # no checkpoint while answers are queued
        except anyio.WouldBlock:
            pass
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise self._closed()
        try:
            return await self._inbox.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise self._closed()

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "http",
            "url": self._safe_url,
            "session": self._session_id is not None,
            "protocolVersion": self._protocol_version,
            "getStream": self._get_state,
            "posts": self._posts,
            "received": self._received,
            "resumes": self._resumes,
            "closed": str(self._failure) if self._failure is not None else None,
        }

    # --- plumbing -----------------------------------------------------------------------------

    def _expire(self) -> None:
        self._expired = True
        self._fail(ClosedError(f"session expired (HTTP 404 from {self._safe_url}); reconnect", server=self._name))

    async def _headers(self, method: str) -> httpx.Headers:
        headers = await request_headers(self._server, self._context, method, self._url, self._redact)
        self._add_session_headers(headers)
        return headers

    def _add_session_headers(self, headers: httpx.Headers) -> None:
        if self._session_id is not None:
            headers[SESSION_HEADER] = self._session_id
        if self._protocol_version is not None:
            headers[VERSION_HEADER] = self._protocol_version

    def _post_headers_now(self) -> httpx.Headers | None:
        """The POST headers without asking anyone, or None when a credential plugin must be asked.

        Without such a plugin they are the config's headers, the session's and the fixed ones: the
        same for every POST until the session id or the protocol version changes. httpx copies the
        headers it is given, so one object serves every request.
        """
        if has_credential_hook(self._context):
            return None
        headers = self._fixed_post_headers
        if headers is None:
            headers = config_headers(self._server, self._redact)
            self._add_session_headers(headers)
            headers["Accept"] = ACCEPT_POST
            headers["Content-Type"] = "application/json"
            self._fixed_post_headers = headers
        return headers

    def _start_request(self, method: str, rid: Any, body: bytes, headers: httpx.Headers) -> None:
        self._posts += 1
        if method == "initialize":
            self._init_id = rid
        loop = self._loop
        if loop is None:
            scope = anyio.CancelScope()
            self._in_flight[rid] = scope
            self._tg.start_soon(self._request_task, rid, body, headers, scope, name=f"kxen-http-{rid}")
            return
        task = loop.create_task(self._request_task(rid, body, headers, None), name=f"kxen-http-{rid}")
        self._in_flight[rid] = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _cancel_requests(self) -> None:
        """Cancel the request tasks still running (what cancelling the task group does to its own)."""
        in_flight = set(self._in_flight.values())
        for task in self._tasks:
            if task in in_flight:  # (one that notifications/cancelled cancelled is not cancelled twice)
                task.cancel()

    async def _wait_requests(self) -> None:
        """Wait (bounded) for the cancelled request tasks to finish. Call shielded."""
        tasks = [t for t in self._tasks if not t.done()]
        if tasks:
            with anyio.move_on_after(CLOSE_STEP_SECONDS):
                await asyncio.wait(tasks)

    async def _stream_headers(self, cursor: _Cursor) -> httpx.Headers:
        headers = await self._headers("GET")
        headers["Accept"] = "text/event-stream"
        if cursor.last_id is not None:
            headers["Last-Event-ID"] = cursor.last_id
        return headers

    async def _deliver(self, message: Message) -> None:
        if self._init_id is not None and _answers(message, self._init_id):
            result = message.get("result")
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            if isinstance(version, str) and _VERSION_RE.match(version):
                self._protocol_version = version
                self._fixed_post_headers = None
            self._init_id = None  # answered: stop looking
        self._received += 1
        try:
            self._feed.send_nowait(message)  # no checkpoint unless the queue is full
        except anyio.WouldBlock:
            try:
                await self._feed.send(message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # closed: nobody reads any more

    async def _deliver_error(self, rid: Any, message: str) -> None:
        """Fail request ``rid`` locally (the session raises ``ProtocolError``); the connection stays."""
        self._diag(message)
        await self._deliver(RequestFailed(rid, ProtocolError(message, server=self._name)))

    def _take_session_id(self, response: httpx.Response) -> None:
        value = response.headers.get(SESSION_HEADER)
        if value is None:
            return
        if 0 < len(value) <= MAX_SESSION_ID_LENGTH and all(0x21 <= ord(c) <= 0x7E for c in value):
            self._session_id = value
            self._fixed_post_headers = None
        else:
            self._diag("ignored an Mcp-Session-Id that is not visible ASCII")

    async def _error_body(self, response: httpx.Response) -> bytes:
        try:
            return await read_limited(response, ERROR_BODY_LIMIT)
        except (MessageTooLarge, httpx.HTTPError):
            return b""

    # --- requests -----------------------------------------------------------------------------

    async def _request_task(
        self, rid: Any, body: bytes, headers: httpx.Headers, scope: anyio.CancelScope | None
    ) -> None:
        """POST request ``rid`` and feed its answer. On asyncio it runs in its own task (``scope`` is
        None): cancelling that task stops it; elsewhere ``scope`` does."""
        try:
            if scope is None:
                await self._exchange(rid, body, headers)
            else:
                with scope:
                    await self._exchange(rid, body, headers)
        except _SessionExpired:
            self._expire()
        except MessageTooLarge as exc:
            await self._deliver_error(rid, f"answer too large: {exc} (maxMessageBytes)")
        except Exception as exc:
            self._fail(map_http_error(exc, f"POST {self._safe_url}", self._redact, self._name))
        finally:
            self._in_flight.pop(rid, None)

    async def _exchange(self, rid: Any, body: bytes, headers: httpx.Headers) -> None:
        cursor = await self._post_request(rid, body, headers)
        if cursor is not None:
            await self._resume(rid, cursor)

    async def _post_request(self, rid: Any, body: bytes, headers: httpx.Headers) -> _Cursor | None:
        """POST one request and feed its answer; return a cursor when its SSE stream must be resumed."""
        client = self._client
        # what client.stream() does, without its context-manager generator
        request = client.build_request("POST", self._post_url, content=body, headers=headers)
        response = await client.send(request, stream=True)
        try:
            status = response.status_code
            if status == 404 and self._session_id is not None:
                raise _SessionExpired
            if not 200 <= status < 300:
                error_body = await self._error_body(response)
                await self._deliver(error_from_http(rid, status, response.reason_phrase, error_body, self._redact))
                return None
            if rid == self._init_id:
                self._take_session_id(response)
            ctype = content_type(response)
            if status in (202, 204) or not ctype:
                self._diag(f"request {rid!r} was accepted without an answer (HTTP {status}); waiting for it elsewhere")
                return None
            if ctype == "application/json":
                raw = await read_limited(response, self._opts.maxMessageBytes)
                try:
                    messages = parse_messages(raw)
                except ValueError as exc:
                    await self._deliver_error(rid, f"answer is not JSON-RPC: {exc}")
                    return None
                found = False
                for message in messages:
                    await self._deliver(message)
                    found = found or _answers(message, rid)
                if not found:
                    await self._deliver_error(rid, "the JSON answer did not contain the response")
                return None
            if ctype == "text/event-stream":
                cursor = _Cursor()
                try:
                    if await self._consume(response, cursor, rid):
                        return None
                except httpx.TransportError as exc:
                    # a dropped stream is not a cancellation: resume it below
                    self._diag(f"answer stream for request {rid!r} dropped ({type(exc).__name__})")
                return cursor
            await self._deliver_error(rid, f"answer has an unexpected Content-Type {ctype[:60]!r} (HTTP {status})")
            return None
        finally:
            await response.aclose()

    async def _resume(self, rid: Any, cursor: _Cursor) -> None:
        """GET + Last-Event-ID until the response to ``rid`` arrives, a bounded number of times."""
        attempts = 0
        while True:
            if cursor.last_id is None:
                await self._deliver_error(rid, "the answer stream ended before the response and cannot be resumed")
                return
            if attempts >= self._opts.maxReconnectAttempts:
                await self._deliver_error(rid, f"the answer stream was not resumed after {attempts} attempt(s)")
                return
            attempts += 1
            await anyio.sleep(min(cursor.retry_ms if cursor.retry_ms is not None else self._opts.defaultRetryMs, MAX_RETRY_MS) / 1000)
            self._resumes += 1
            try:
                headers = await self._stream_headers(cursor)
                async with self._client.stream("GET", self._url, headers=headers) as response:
                    status = response.status_code
                    if status == 404 and self._session_id is not None:
                        raise _SessionExpired
                    if status in (400, 404, 405):  # (404 with a session id is handled above)
                        await self._deliver_error(rid, f"the answer stream cannot be resumed (GET: HTTP {status})")
                        return
                    if not 200 <= status < 300 or content_type(response) != "text/event-stream":
                        self._diag(f"resuming request {rid!r}: GET answered HTTP {status}")
                        continue
                    if await self._consume(response, cursor, rid):
                        return
            except httpx.TransportError as exc:
                self._diag(f"resuming request {rid!r}: {type(exc).__name__}")

    async def _consume(self, response: httpx.Response, cursor: _Cursor, want: Any) -> bool:
        """Feed the messages of an SSE stream; True once the response to ``want`` went by."""
        async with aclosing(iter_events(response, self._opts.maxMessageBytes)) as events:
            async for event in events:
                if event.id:
                    cursor.last_id = event.id
                if event.retry is not None:
                    cursor.retry_ms = max(0, event.retry)
                if not event.data:
                    continue  # priming event, or only id/retry
                try:
                    messages = parse_messages(event.data)
                except ValueError as exc:
                    self._diag(f"ignored an SSE event that is not JSON-RPC: {exc}")
                    continue
                found = False
                for message in messages:
                    await self._deliver(message)
                    found = found or (want is not None and _answers(message, want))
                if found:
                    return True
        return False

    # --- notifications and responses ---------------------------------------------------------------

    async def _post_inline(self, label: str, body: bytes, headers: httpx.Headers) -> None:
        try:
            async with self._client.stream(
                "POST", self._post_url, content=body, headers=headers, timeout=self._inline_timeout
            ) as response:
                status = response.status_code
                if status == 404 and self._session_id is not None:
                    raise _SessionExpired
                if 200 <= status < 300:
                    if status not in (202, 204) and content_type(response):
                        self._diag(f"{label}: server answered HTTP {status} with a body; ignored")
                    return
                error = error_from_http(None, status, response.reason_phrase, await self._error_body(response), self._redact)
                text = str(error.error) if isinstance(error, RequestFailed) else error["error"]["message"]
                self._diag(f"{label}: server rejected it: {text}")
        except _SessionExpired:
            self._expire()
            raise self._closed()
        except Exception as exc:
            self._fail(map_http_error(exc, f"POST {self._safe_url}", self._redact, self._name))
            raise self._closed()

    # --- the GET stream -------------------------------------------------------------------------

    async def _get_loop(self) -> None:
        cursor = _Cursor()
        failures = 0
        while self._failure is None:
            received = self._received
            try:
                headers = await self._stream_headers(cursor)
                async with self._client.stream("GET", self._url, headers=headers) as response:
                    status = response.status_code
                    if status == 404 and self._session_id is not None:
                        raise _SessionExpired
                    if status in (400, 404, 405):  # (404 with a session id is handled above)
                        self._get_state = f"unsupported (HTTP {status})"
                        return
                    if not 200 <= status < 300 or content_type(response) != "text/event-stream":
                        self._get_state = f"refused (HTTP {status})"
                        self._diag(f"GET stream refused: HTTP {status}")
                        return
                    self._get_state = "open"
                    await self._consume(response, cursor, None)
                    reason = "ended"
            except _SessionExpired:
                self._expire()
                return
            except MessageTooLarge as exc:
                reason = str(exc)
            except Exception as exc:
                reason = str(map_http_error(exc, "GET stream", self._redact, self._name))
            if self._received > received:
                failures = 0  # it was useful: start counting again
            failures += 1
            if failures > self._opts.maxReconnectAttempts:
                self._get_state = "closed"
                self._diag(f"GET stream {reason}; not reopened after {failures - 1} attempt(s)")
                return
            self._get_state = "reconnecting"
            delay = cursor.retry_ms if cursor.retry_ms is not None else self._opts.defaultRetryMs
            await anyio.sleep(min(delay, MAX_RETRY_MS) / 1000)

    # --- closing ------------------------------------------------------------------------------

    async def _shutdown(self) -> None:
        """Stop feeding, then DELETE the session (best effort, bounded). Call shielded."""
        self._closing = True
        if self._failure is None:
            self._failure = ClosedError("transport closed", server=self._name)
        self._feed.close()
        self._inbox.close()
        if self._session_id is None or self._expired:
            return
        with anyio.move_on_after(CLOSE_STEP_SECONDS):
            try:
                headers = await self._headers("DELETE")
                response = await self._client.delete(self._url, headers=headers)
                if response.status_code not in (200, 202, 204, 404, 405):
                    self._context.diagnostic(f"{self._name}: session DELETE answered HTTP {response.status_code}")
            except Exception as exc:
                self._context.diagnostic(
                    self._redact(str(map_http_error(exc, f"DELETE {self._safe_url}", self._redact, self._name)))
                )


class StreamableHTTPTransport(ClientTransport):
    """The async context manager an ``open_*`` opener returns for kind ``http``.

    Entering validates ``server.options`` (``ConfigError``), makes the one ``httpx.AsyncClient`` and
    the task group, and yields the stream; nothing is sent before the first message. Exceptions from
    the body of the ``async with`` pass through unchanged (the task group never wraps them).
    """

    async def __aenter__(self) -> StreamableHTTPStream:
        server = self._check_fresh()
        # validated at config load; a context made by hand (tests, embedding) is checked here
        opts = self._context.options if self._context.options is not None else parse_options(server, HTTP_OPTIONS)
        self._client = open_client(server, "http", opts, self._http_transport, transport_factory)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._stream = StreamableHTTPStream(server, self._context, self._client, self._tg, opts)
        return self._stream

    async def __aexit__(self, *exc: Any) -> None:
        assert self._tg is not None and self._client is not None and self._stream is not None
        self._tg.cancel_scope.cancel()
        self._stream._cancel_requests()
        try:
            with anyio.CancelScope(shield=True):
                await self._stream._shutdown()
        finally:
            try:
                # our tasks never raise, so this only waits for them to finish cancelling
                try:
                    with anyio.CancelScope(shield=True):
                        await self._stream._wait_requests()
                finally:
                    await self._tg.__aexit__(None, None, None)
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_STEP_SECONDS):
                    await self._client.aclose()


def open_streamable_http(
    server: ServerConfig,
    context: TransportContext,
    *,
    http_transport: httpx.AsyncBaseTransport | None = None,
) -> StreamableHTTPTransport:
    """The transport for ``server`` (kind ``http``): ``async with`` it to get the message stream.

    ``http_transport`` (or the module's ``transport_factory``) replaces the network, e.g. with
    ``httpx.MockTransport``. Invalid ``server.options`` raise ``ConfigError`` on entering.
    """
    return StreamableHTTPTransport(server, context, http_transport)

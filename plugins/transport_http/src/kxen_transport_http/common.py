"""Pieces both HTTP transports share: options, request headers, redaction, error mapping, bounded reads.

Header values (from config or from ``kxen_credential_lookup``) are secrets. They are kept in a
:class:`Redactor` so that any text that leaves the transport -- an exception message, a
diagnostic, a synthesized error -- can be scrubbed of them first; messages are otherwise built from
our own words plus a URL without userinfo, query or fragment.
"""

from __future__ import annotations

import json
from contextlib import aclosing
from typing import Any, AsyncIterator, Callable, Iterable
from urllib.parse import urlsplit, urlunsplit

import attrs
import httpx
from httpx_sse import EventSource, ServerSentEvent

from kxen_core import hookcall
from kxen_core.config.models import ServerConfig
from kxen_core.errors import ClosedError, ConfigError, ConnectError, HTTPStatusError, ProtocolError, TransportError
from kxen_core.transport import CredentialRequest, Message, RequestFailed, TransportContext

MiB = 1024 * 1024
#: how much of an HTTP error body is read to look for a JSON-RPC error in it
ERROR_BODY_LIMIT = 64 * 1024
#: best-effort closing steps (session DELETE, client close) each get at most this long
CLOSE_STEP_SECONDS = 2.0
#: the Mcp-Session-Id value must be visible ASCII; refuse absurdly long ones too
MAX_SESSION_ID_LENGTH = 1024


class MessageTooLarge(Exception):
    """A response body or one SSE event grew past ``maxMessageBytes``."""


# --- options ----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Options:
    """``server.options`` of the ``http`` and ``sse`` kinds (camelCase keys, as in ``mcp.json``)."""

    maxMessageBytes: int = 16 * MiB
    connectTimeoutSeconds: float = 10.0
    queueSize: int = 256
    # http only
    getStream: bool = True
    maxReconnectAttempts: int = 3
    defaultRetryMs: int = 1000
    # sse only
    endpointTimeoutSeconds: float = 10.0


_RULES: dict[str, tuple[type, float, float, str]] = {
    "maxMessageBytes": (int, 1024, 1024 * MiB, "an integer from 1024 to 1073741824"),
    "connectTimeoutSeconds": (float, 0.001, 600, "a number of seconds > 0 and <= 600"),
    "queueSize": (int, 1, 65536, "an integer from 1 to 65536"),
    "getStream": (bool, 0, 1, "true or false"),
    "maxReconnectAttempts": (int, 0, 100, "an integer from 0 to 100"),
    "defaultRetryMs": (int, 0, 600_000, "an integer from 0 to 600000"),
    "endpointTimeoutSeconds": (float, 0.001, 600, "a number of seconds > 0 and <= 600"),
}


def parse_options(server: ServerConfig, allowed: Iterable[str]) -> Options:
    """Validate ``server.options`` (no coercion) and raise one :class:`ConfigError` listing every problem."""
    allowed = set(allowed)
    where = f"{server.source or '(config)'}: mcpServers.{server.name}.options"
    problems: list[str] = []
    values: dict[str, Any] = {}
    for key, value in server.options.items():
        if key not in allowed:
            problems.append(f"{where}: unknown option {key!r} (known: {', '.join(sorted(allowed))})")
            continue
        kind, low, high, rule = _RULES[key]
        if kind is bool:
            ok = isinstance(value, bool)
        elif kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
        else:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= high
            value = float(value) if ok else value
        if not ok:
            problems.append(f"{where}.{key}: must be {rule}")
            continue
        values[key] = value
    if problems:
        raise ConfigError(problems)
    return Options(**values)


# --- URLs, secrets, errors ----------------------------------------------------------------------


def safe_url(url: str) -> str:
    """``url`` without userinfo, query and fragment: what may appear in messages."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port is not None else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "(invalid url)"


class Redactor:
    """Remembers header values seen lately and scrubs them from any text."""

    MAX_VALUES = 64

    def __init__(self) -> None:
        self._values: set[str] = set()

    def remember(self, values: Iterable[str]) -> None:
        for v in values:
            # "Bearer <token>": the token alone is a secret too (servers echo it without the scheme)
            scheme, _, credential = v.partition(" ")
            for secret in (v, credential.strip()) if credential and scheme.isalpha() else (v,):
                if len(secret) >= 4:
                    if len(self._values) >= self.MAX_VALUES:
                        self._values.clear()
                    self._values.add(secret)

    def __call__(self, text: str, limit: int = 300) -> str:
        for v in sorted(self._values, key=len, reverse=True):  # whole values before their parts
            if v in text:
                text = text.replace(v, "***")
        return text if len(text) <= limit else text[:limit] + "..."

    def value(self, value: Any) -> Any:
        """``value`` itself, or its redacted JSON text when a remembered value occurs in it."""
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            return None
        return value if not any(v in text for v in self._values) else self(text, 2000)


def map_http_error(exc: BaseException, where: str, redact: Redactor, server: str) -> TransportError:
    """Turn an httpx (or other) exception into a kxen transport error; the message is redacted."""
    detail = redact(str(exc), 200)
    text = f"{where}: {type(exc).__name__}" + (f": {detail}" if detail else "")
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol, httpx.InvalidURL)):
        return ConnectError(text, server=server)
    if isinstance(exc, (httpx.ReadError, httpx.WriteError, httpx.CloseError, httpx.TimeoutException)):
        return ClosedError(text, server=server)
    return ProtocolError(text, server=server)


# --- headers --------------------------------------------------------------------------------------


def has_credential_hook(context: TransportContext) -> bool:
    """True when some plugin implements ``kxen_credential_lookup`` (asked on every request: cheap)."""
    pm = context.pm
    if pm is None:
        return False
    caller = getattr(pm.hook, "kxen_credential_lookup", None)
    return caller is not None and bool(caller.get_hookimpls())


def config_headers(server: ServerConfig, redact: Redactor) -> httpx.Headers:
    """``server.headers`` as request headers; their values are remembered as secrets."""
    redact.remember(server.headers.values())
    headers = httpx.Headers()
    try:
        for name, value in server.headers.items():
            headers[name] = value
    except UnicodeEncodeError:
        raise ProtocolError("a request header value is not ASCII; it cannot be sent", server=server.name) from None
    return headers


async def request_headers(
    server: ServerConfig,
    context: TransportContext,
    method: str,
    url: str,
    redact: Redactor,
) -> httpx.Headers:
    """``server.headers`` plus what ``kxen_credential_lookup`` adds for this request.

    The hook is not called at all when no plugin implements it.
    """
    extra: Any = None
    if has_credential_hook(context):
        extra = await hookcall.acall_first(
            context.pm, "kxen_credential_lookup", server=server, request=CredentialRequest(method=method, url=url)
        )
    headers = config_headers(server, redact)
    try:
        if isinstance(extra, dict):
            for name, value in extra.items():
                if not isinstance(name, str) or not isinstance(value, str):
                    context.diagnostic(f"{server.name}: ignored a credential header that is not a string pair")
                    continue
                redact.remember((value,))
                headers[name] = value
        elif extra is not None:
            context.diagnostic(f"{server.name}: kxen_credential_lookup answered a {type(extra).__name__}, not a dict")
    except UnicodeEncodeError:
        raise ProtocolError("a request header value is not ASCII; it cannot be sent", server=server.name) from None
    return headers


# --- bodies ---------------------------------------------------------------------------------------


def content_type(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").partition(";")[0].strip().lower()


async def read_limited(response: httpx.Response, limit: int) -> bytes:
    """The whole (decoded) body, or :class:`MessageTooLarge` past ``limit`` bytes."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise MessageTooLarge(f"body of {declared} bytes")
    buf = bytearray()
    async for chunk in response.aiter_bytes():
        buf += chunk
        if len(buf) > limit:
            raise MessageTooLarge(f"body over {limit} bytes")
    return bytes(buf)


def parse_messages(data: str | bytes) -> list[Message]:
    """One JSON-RPC message (or a 2025-03-26 batch) -> list of dicts. Raises ``ValueError``."""
    value = json.loads(data)
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return value
    raise ValueError(f"expected a JSON object, got {type(value).__name__}")


def encode(message: Message) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class _CountingStream(httpx.AsyncByteStream):
    """Counts the bytes of the event being parsed, so one SSE event cannot grow without bound."""

    def __init__(self, inner: Any, limit: int) -> None:
        self._inner = inner
        self._limit = limit
        self.pending = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self.pending += len(chunk)
            if self.pending > self._limit:
                raise MessageTooLarge(f"SSE event over {self._limit} bytes")
            yield chunk
            # a chunk that ends on a blank line ends every event in it (keep-alive comments too)
            if chunk.endswith((b"\n\n", b"\r\n\r\n", b"\r\r")):
                self.pending = 0

    async def aclose(self) -> None:
        await self._inner.aclose()


async def iter_events(response: httpx.Response, limit: int) -> AsyncIterator[ServerSentEvent]:
    """The SSE events of ``response``, each bounded by ``limit`` bytes. Use inside ``aclosing``."""
    counter = _CountingStream(response.stream, limit)
    response.stream = counter
    async with aclosing(EventSource(response).aiter_sse()) as events:
        async for event in events:
            counter.pending = 0
            yield event


def jsonrpc_error(rid: Any, code: int, message: str, data: Any = None) -> Message:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": error}


def error_from_http(rid: Any, status: int, reason: str, body: bytes, redact: Redactor) -> Message | RequestFailed:
    """What request ``rid`` gets for an HTTP error response.

    The server's own JSON-RPC error object is kept when the body holds one (the session raises
    ``RemoteError``); otherwise the request fails locally with ``HTTPStatusError`` -- never a made-up
    JSON-RPC code that could be mistaken for the server's. Texts from the body are redacted.
    """
    data: dict[str, Any] = {"httpStatus": status}
    try:
        value = json.loads(body) if body else None
    except ValueError:
        value = None
    err = value.get("error") if isinstance(value, dict) else None
    if isinstance(err, dict) and isinstance(err.get("code"), int) and isinstance(err.get("message"), str):
        # keep the server's data (e.g. ``supported`` versions); only add the status when it has none
        return jsonrpc_error(rid, err["code"], redact(err["message"], 2000), redact.value(err.get("data", data)))
    text = redact(body.decode("utf-8", "replace").strip(), 500) if body else ""
    message = f"HTTP {status} {reason}".strip() + (f": {text}" if text else "")
    return RequestFailed(rid, HTTPStatusError(message, status=status, body=text))


Diagnostic = Callable[[str], None]


def open_client(
    server: ServerConfig,
    kind: str,
    opts: Any,
    http_transport: httpx.AsyncBaseTransport | None,
    factory: Callable[[ServerConfig], httpx.AsyncBaseTransport | None] | None,
) -> httpx.AsyncClient:
    """The one ``httpx.AsyncClient`` of a transport: no redirects (a redirect must not carry
    credentials elsewhere), bounded connect, an injected ``http_transport`` (tests) or ``factory``."""
    if not server.url or not server.url.startswith(("http://", "https://")):
        raise ConnectError(f"an {kind} server needs an http:// or https:// url", server=server.name)
    if http_transport is None and factory is not None:
        http_transport = factory(server)
    return httpx.AsyncClient(
        transport=http_transport,
        timeout=httpx.Timeout(connect=opts.connectTimeoutSeconds, read=None, write=30.0, pool=30.0),
        follow_redirects=False,
    )


class ClientTransport:
    """What both HTTP transports hold: the server, the context, one ``httpx.AsyncClient`` (an
    injected ``http_transport`` for tests), one task group and the stream; entered once."""

    def __init__(
        self,
        server: ServerConfig,
        context: TransportContext,
        http_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._server = server
        self._context = context
        self._http_transport = http_transport
        self._client: httpx.AsyncClient | None = None
        self._tg: Any = None
        self._stream: Any = None

    def _check_fresh(self) -> ServerConfig:
        if self._client is not None:
            raise RuntimeError("a transport can be entered only once")
        return self._server


class StreamFailures:
    """How both HTTP streams report trouble: redacted diagnostics, one sticky failure that closes
    the feed, and the ``ClosedError`` every later call raises (cause kept, httpx context dropped).

    Expects ``_name``, ``_context``, ``_redact``, ``_closing``, ``_failure`` and ``_feed``.
    """

    _name: str
    _context: TransportContext
    _redact: Redactor
    _closing: bool
    _failure: TransportError | None
    _feed: Any

    def _diag(self, text: str) -> None:
        if not self._closing:
            self._context.diagnostic(self._redact(f"{self._name}: {text}", 500))

    def _closed_error(self) -> ClosedError:
        failure = self._failure or ClosedError("transport closed", server=self._name)
        error = ClosedError(str(failure), server=self._name)
        if not isinstance(failure, ClosedError):
            error.__cause__ = failure
        return error

    def _closed(self) -> ClosedError:
        """Raise this: the cause (a ConnectError/ProtocolError) is kept, the httpx context is not."""
        error = self._closed_error()
        error.__suppress_context__ = True
        return error

    def _fail(self, error: TransportError) -> None:
        if self._failure is None:
            self._failure = error
            self._diag(str(error))
            self._feed.close()

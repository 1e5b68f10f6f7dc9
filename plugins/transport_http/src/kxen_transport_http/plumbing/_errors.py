"""Errors at the boundary: httpx's exceptions become kxen's, HTTP error answers become replies."""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any, Literal

import httpx

from kxen_core import Message, RequestFailed
from kxen_core.errors import (
    AuthRequired,
    ClosedError,
    ConnectError,
    HTTPStatusError,
    PluginHookError,
    ProtocolError,
    TransportError,
)

from ._bodies import BodyError, read_limited
from ._guard import egress_refusal
from ._secrets import Redactor

#: how much of an HTTP error body is read to look for a JSON-RPC error in it
ERROR_BODY_LIMIT = 64 * 1024

_PASSING = (TransportError, AuthRequired, PluginHookError)
_CONNECT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol, httpx.InvalidURL)
_CLOSED = (httpx.ReadError, httpx.WriteError, httpx.CloseError, httpx.TimeoutException)


def describe_exception(exc: BaseException, redact: Redactor) -> str:
    """``"ReadError: detail"`` with the detail redacted and cut short."""
    detail = redact(str(exc), 200)
    return type(exc).__name__ + (f": {detail}" if detail else "")


class map_errors:
    """``with map_errors(where, redact, server):`` -- the one place exceptions become kxen errors.

    Put it at each boundary where a transport's own code meets the network and the credential
    seam: an exception that is already a :class:`~kxen_core.errors.TransportError` (ours, its text
    already safe), an :class:`~kxen_core.errors.AuthRequired` or the
    :class:`~kxen_core.errors.PluginHookError` of a credential plugin passes unchanged, and so does
    cancellation; any other ``Exception`` leaves as

    * :class:`~kxen_core.errors.ConnectError` -- the server could not be reached (connect failed
      or timed out, bad URL or scheme);
    * :class:`~kxen_core.errors.ClosedError` -- the connection broke (read, write, close, timeout);
    * :class:`~kxen_core.errors.ProtocolError` -- anything else.

    Its text is ``"{where}: {type}: {redacted detail}"`` and the original is not chained (its
    message may hold a header value), so a traceback shows no secret. The object holds no state
    per use: one instance may guard every request of a stream, concurrently.
    """

    __slots__ = ("where", "redact", "server")

    def __init__(self, where: str, redact: Redactor, server: str | None) -> None:
        self.where = where
        self.redact = redact
        self.server = server

    def __enter__(self) -> map_errors:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        if exc is None or isinstance(exc, _PASSING) or not isinstance(exc, Exception):
            return False
        raise self.error_for(exc) from None

    def error_for(self, exc: BaseException) -> TransportError:
        """The kxen error ``exc`` becomes at this boundary (without raising it)."""
        refused = egress_refusal(exc)
        if refused is not None:  # the egress rule and its setting, whole (the address is no secret)
            return ConnectError(f"{self.where}: {self.redact(refused, 400)}", server=self.server)
        text = f"{self.where}: {describe_exception(exc, self.redact)}"
        if isinstance(exc, _CONNECT):
            return ConnectError(text, server=self.server)
        if isinstance(exc, _CLOSED):
            return ClosedError(text, server=self.server)
        return ProtocolError(text, server=self.server)


def jsonrpc_error(rid: Any, code: int, message: str, data: Any = None) -> Message:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": error}


def error_from_http(rid: Any, status: int, reason: str, body: bytes, redact: Redactor) -> Message | RequestFailed:
    """What request ``rid`` gets for an HTTP error answer with this ``body``.

    The server's own JSON-RPC error object is kept when the body holds one (the session raises
    ``RemoteError``); otherwise the request fails locally with ``HTTPStatusError`` -- never a made-up
    JSON-RPC code that could be mistaken for the server's. Texts from the body are redacted.
    """
    data: dict[str, Any] = {"httpStatus": status}
    try:
        value = json.loads(body) if body else None
    except (ValueError, RecursionError):  # not JSON, or nested too deeply to decode
        value = None
    err = value.get("error") if isinstance(value, dict) else None
    if isinstance(err, dict) and isinstance(err.get("code"), int) and isinstance(err.get("message"), str):
        # keep the server's data (e.g. ``supported`` versions); only add the status when it has none
        try:
            kept = redact.value(err.get("data", data))
        except RecursionError:  # nested too deeply to check for secrets: dropped
            kept = data
        return jsonrpc_error(rid, err["code"], redact(err["message"], 2000), kept)
    text = redact(body.decode("utf-8", "replace").strip(), 500) if body else ""
    message = f"HTTP {status} {reason}".strip() + (f": {text}" if text else "")
    return RequestFailed(rid, HTTPStatusError(message, status=status, body=text))


async def rejected(response: httpx.Response, rid: Any, redact: Redactor) -> Message | RequestFailed:
    """:func:`error_from_http` for an error ``response``, reading at most ``ERROR_BODY_LIMIT`` of it."""
    try:
        body = await read_limited(response, ERROR_BODY_LIMIT)
    except (BodyError, httpx.HTTPError):  # too large, undecodable, or it broke off: the status says enough
        body = b""
    return error_from_http(rid, response.status_code, response.reason_phrase, body, redact)

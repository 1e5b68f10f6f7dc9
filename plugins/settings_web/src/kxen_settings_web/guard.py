"""The page's lock, in one place in front of every route (an ASGI middleware).

- **Host**: exactly ``127.0.0.1:<port>`` or ``localhost:<port>`` (a DNS-rebinding page that
  reaches the port under another name gets 421 and nothing else).
- **The way in**: ``/?token=<secret>`` (the URL ``kxen settings`` printed) is exchanged for an
  HttpOnly, SameSite=Strict session cookie and a redirect to ``/``, so the secret leaves the
  address bar and the history. Every other request needs that cookie (401 otherwise).
- **State changes** (every method but GET and HEAD) need the page's own ``Origin`` and the CSRF
  token of the page (header ``X-Kxen-CSRF``), a JSON body of at most :data:`MAX_BODY` bytes, read
  within :data:`BODY_SECONDS` (403, 413, 415, 408 otherwise).
- **Every answer** carries a Content-Security-Policy without inline script, ``nosniff``, no
  referrer, no framing and no caching.

A refused request reaches no route: nothing changes.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

import anyio

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: the largest request body taken (an action's JSON; a tool's arguments included)
MAX_BODY = 256 * 1024
#: seconds a request body may take to arrive
BODY_SECONDS = 10.0

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
_SECURITY_NAMES = frozenset(name for name, _ in SECURITY_HEADERS)
SAFE_METHODS = frozenset({"GET", "HEAD"})


class Guard:
    """Wraps the page's ASGI app; ``secret`` is the URL's, ``session`` the cookie's, ``csrf`` the page's."""

    def __init__(self, app: ASGIApp, *, port: int, secret: str, session: str, csrf: str) -> None:
        self.app = app
        self.hosts = frozenset({f"127.0.0.1:{port}", f"localhost:{port}"})
        self.secret, self.session, self.csrf = secret.encode(), session.encode(), csrf.encode()
        self.cookie = f"kxen_settings_{port}"  # cookies do not tell ports apart: one name per page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return  # no lifespan here: the page has nothing to start
        headers = _headers(scope)
        send = _with_headers(send)
        host = headers.get("host", "")
        if host not in self.hosts:
            return await _refuse(send, 421, "this page answers only at http://127.0.0.1:<its port>/")
        method = scope["method"]
        try:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"), max_num_fields=4)
        except ValueError:  # more fields than the way in has: no route takes them
            return await _refuse(send, 400, "too many query fields")
        if scope["path"] == "/" and "token" in query and method in SAFE_METHODS:
            return await self._exchange(send, query["token"][0])
        if not self._has_session(headers):
            return await _refuse(send, 401, "open the URL that kxen settings printed (it holds this run's secret)")
        if method not in SAFE_METHODS:
            if headers.get("origin") != f"http://{host}":
                return await _refuse(send, 403, "a change must come from this page (Origin)")
            if not hmac.compare_digest(headers.get("x-kxen-csrf", "").encode(), self.csrf):
                return await _refuse(send, 403, "a change needs this page's CSRF token")
            if headers.get("content-type", "").split(";")[0].strip() != "application/json":
                return await _refuse(send, 415, "a change is sent as application/json")
            body = await _body(receive, headers)
            if isinstance(body, tuple):
                return await _refuse(send, *body)
            receive = _replay(body, receive)
        await self.app(scope, receive, send)

    def _has_session(self, headers: dict[str, str]) -> bool:
        raw = headers.get("cookie", "")
        try:
            morsel = SimpleCookie(raw).get(self.cookie) if raw else None
        except Exception:  # a malformed cookie header is no session
            return False
        return morsel is not None and hmac.compare_digest(morsel.value.encode(), self.session)

    async def _exchange(self, send: Send, token: str) -> None:
        if not hmac.compare_digest(token.encode(), self.secret):
            return await _refuse(send, 403, "this link is not this run's: open the URL kxen settings printed")
        cookie = f"{self.cookie}={self.session.decode()}; Path=/; HttpOnly; SameSite=Strict"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [(b"location", b"/"), (b"set-cookie", cookie.encode()), (b"content-length", b"0")],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        name = key.decode("latin-1").lower()
        if name in out:  # a repeated Host, Origin or token header is refused as not matching
            out[name] = "\x00"
        else:
            out[name] = value.decode("latin-1")
    return out


def _with_headers(send: Send) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":  # the lock's headers replace a route's own
            kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in _SECURITY_NAMES]
            message["headers"] = [*kept, *SECURITY_HEADERS]
        await send(message)

    return wrapped


async def _body(receive: Receive, headers: dict[str, str]) -> bytes | tuple[int, str]:
    declared = headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
        return 413, f"a request body is at most {MAX_BODY} bytes"
    chunks: list[bytes] = []
    size = 0
    with anyio.move_on_after(BODY_SECONDS) as timer:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return 400, "the request ended early"
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY:
                return 413, f"a request body is at most {MAX_BODY} bytes"
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
    if timer.cancelled_caught:
        return 408, f"the request body did not arrive within {BODY_SECONDS:g} s"
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body read here, then the connection's own messages (its disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _refuse(send: Send, status: int, reason: str) -> None:
    body = json.dumps({"error": reason}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


__all__ = ["CSP", "MAX_BODY", "Guard"]

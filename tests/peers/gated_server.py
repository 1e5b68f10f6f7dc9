"""The SDK peer (tests/peers/sdk_server.py) behind a Bearer-token gate, as a subprocess of the auth tests.

Usage: ``python gated_server.py MODE PORT [--token T] [--deny METHOD] [--need METHOD=SCOPE] [--deny-get]``
with MODE ``stateful`` (Streamable HTTP at ``/mcp``) or ``sse`` (legacy HTTP+SSE at ``/sse``). Binds
127.0.0.1 only. The gate (a small ASGI wrapper around the SDK's own app) answers:

* ``401`` with ``WWW-Authenticate: Bearer error="invalid_token"`` to any request without
  ``Authorization: Bearer T`` (``T`` is given with ``--token``), or with ``Bearer T:S`` for scopes;
* ``401`` to a JSON-RPC request of ``METHOD`` (``--deny``, repeatable): a token that stops working
  after initialize, as when it expired or was revoked;
* ``403`` with ``error="insufficient_scope", scope="S"`` to a request of ``METHOD`` (``--need``)
  unless the token is ``T:S``;
* ``401`` to every GET with ``--deny-get`` (the Streamable HTTP GET stream, the SSE stream).

Every answer of the gate and every request it let through is counted per token in
``GET /gate-stats`` (no auth), so a test can see what was sent with which credential.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn
from sdk_server import mcp

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

#: the most request body the gate reads to find the JSON-RPC method
MAX_BODY = 1 << 20


class Gate:
    def __init__(self, app: App, token: str, deny: set[str], need: dict[str, str], deny_get: bool) -> None:
        self.app, self.token, self.deny, self.need, self.deny_get = app, token, deny, need, deny_get
        self.stats: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == "/gate-stats":
            await _answer(send, 200, json.dumps(dict(self.stats)).encode(), [(b"content-type", b"application/json")])
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        auth = headers.get("authorization", "")
        token, _, granted = auth.removeprefix("Bearer ").partition(":")
        known = auth.startswith("Bearer ") and token == self.token
        body, receive = await _buffered(receive)
        method = _method(body) if scope["method"] == "POST" else None
        label = f"{scope['method']} {method or scope['path']} {auth.removeprefix('Bearer ') or '-'}"
        if not known:
            return await self._refuse(
                send, label, 401, 'Bearer error="invalid_token", error_description="no valid token"'
            )
        if scope["method"] == "GET" and self.deny_get:
            return await self._refuse(send, label, 401, 'Bearer error="invalid_token", error_description="no streams"')
        if method in self.deny:
            return await self._refuse(
                send, label, 401, 'Bearer error="invalid_token", error_description="token expired"'
            )
        wanted = self.need.get(method or "")
        if wanted is not None and granted != wanted:
            challenge = f'Bearer error="insufficient_scope", scope="{wanted}", error_description="needs {wanted}"'
            return await self._refuse(send, label, 403, challenge)
        self.stats[f"ok {label}"] += 1
        await self.app(scope, receive, send)

    async def _refuse(self, send: Send, label: str, status: int, challenge: str) -> None:
        self.stats[f"{status} {label}"] += 1
        await _answer(
            send, status, b"go away", [(b"www-authenticate", challenge.encode()), (b"content-type", b"text/plain")]
        )


async def _answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _buffered(receive: Receive) -> tuple[bytes, Receive]:
    """The request body (bounded) and a ``receive`` that hands it to the app again."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if not message.get("more_body") or size > MAX_BODY:
            break
    body = b"".join(chunks)
    replayed = False

    async def again() -> dict[str, Any]:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, again


def _method(body: bytes) -> str | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return message.get("method") if isinstance(message, dict) and isinstance(message.get("method"), str) else None


def main() -> None:
    argv = sys.argv[1:]
    mode, port = argv[0], int(argv[1])
    token, deny, need, deny_get = "", set(), {}, False
    rest = iter(argv[2:])
    for arg in rest:
        if arg == "--token":
            token = next(rest)
        elif arg == "--deny":
            deny.add(next(rest))
        elif arg == "--need":
            method, _, scope = next(rest).partition("=")
            need[method] = scope
        elif arg == "--deny-get":
            deny_get = True
        else:
            raise SystemExit(f"unknown argument {arg!r}")
    if not token:
        raise SystemExit("--token is required")
    app = mcp.sse_app() if mode == "sse" else mcp.streamable_http_app()
    if mode not in ("sse", "stateful"):
        raise SystemExit(f"unknown mode {mode!r}")
    uvicorn.run(Gate(app, token, deny, need, deny_get), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()

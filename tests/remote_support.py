"""Helpers shared by the remote MCP tests (tests/test_remote_*.py).

Settings snippets, server entries and small helpers; plain HTTP servers written here, run in the
test's own event loop on 127.0.0.1 (a listener that only counts connections, and MCP servers that
answer with an error status echoing the request headers); and :class:`Peers`, behind the ``peers``
fixture of tests/conftest.py, for the real peers the root conftest starts as subprocesses bound to
127.0.0.1: the official Python SDK server (tests/peers/sdk_server.py, Streamable HTTP stateful /
json_response / stateless, and legacy SSE) and server-everything (streamableHttp, sse; preloaded
with tests/peers/loopback_only.cjs so it binds 127.0.0.1 only).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

if sys.version_info < (3, 11):  # pragma: no cover - anyio brings the backport there
    from exceptiongroup import BaseExceptionGroup
import attrs
import pytest
from kxen_testing import text_result

from kxen_core import Runtime
from kxen_core.config import ServerConfig
from kxen_core.runtime.remote_ack import acknowledgement_key

WAIT = 20  # seconds for any one wait on servers

#: the switch alone, as written by hand: it confirms no remote server (:func:`remote_on` adds them)
REMOTE_ON = "# the user's settings\n[mcp]\nremote_enabled = true\nallow_loopback_http = true\n"
REMOTE_OFF = "# the user's settings\n[mcp]\nallow_loopback_http = true\n"
OFF_NOTE = "remote MCP is off"

SDK_TOOLS = {"add", "echo", "boom", "slow", "poll", "roots", "ask_client"}  # tests/peers/sdk_server.py


# --- helpers ----------------------------------------------------------------------------------


#: the http, sse and memory transports (and the core defaults); no installed approval channel
REMOTE_PLUGINS = ("http", "sse", "memory")


def remote_on(*servers: str | Mapping[str, Any] | ServerConfig, settings: str = REMOTE_ON) -> str:
    """The user's ``config.toml`` text ``settings`` with remote MCP on and each of ``servers`` (a
    URL, a server entry, or a loaded :class:`ServerConfig`) confirmed, as ``kxen remote on`` records
    it: ``remote_acknowledged`` lists the key :func:`acknowledgement_key` gives (the canonical URL,
    or ``sha256:`` and a digest for a URL with a query). A URL that took ``${VAR}`` values is keyed
    by its digest too: pass the server as the loader returns it then. Only the servers named are
    confirmed; nothing confirms every one."""
    import tomlkit

    keys = []
    for server in servers:
        if isinstance(server, str):
            server = ServerConfig(url=server)
        elif isinstance(server, Mapping):
            server = ServerConfig(url=server["url"])
        keys.append(acknowledgement_key(server))
    doc = tomlkit.parse(settings)
    if "mcp" not in doc:
        doc["mcp"] = tomlkit.table()
    doc["mcp"]["remote_enabled"] = True
    doc["mcp"]["remote_acknowledged"] = keys
    return tomlkit.dumps(doc)


def remote(url: str, kind: str = "http", **extra: Any) -> dict[str, Any]:
    """A remote server entry whose tools need no approval."""
    return {"url": url, "transport": kind, "defaultToolPolicy": "allow", **extra}


def status_of(rt: Runtime, name: str) -> dict[str, Any]:
    (entry,) = [s for s in rt.status() if s["name"] == name]
    return entry


async def until(predicate: Callable[[], bool], timeout: float = 5) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.01)


def text_of(result: dict[str, Any]) -> str:
    """The text parts of a tool result, one per line."""
    return "\n".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")


def write_project(ws: Path, data: Any) -> Path:
    """Write ``data`` as the whole project file ``.kxen/mcp.json`` (top-level keys included)."""
    (ws / ".kxen").mkdir(exist_ok=True)
    path = ws / ".kxen" / "mcp.json"
    path.write_text(json.dumps(data))
    return path


# --- plain HTTP servers in this event loop ------------------------------------------------------


@attrs.define
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@attrs.define
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/plain"
    stream: Callable[[], AsyncIterator[bytes]] | None = None  # chunks of a streamed (SSE) body


Responder = Callable[[Request], Awaitable[Response]]

REASONS = {
    200: "OK",
    202: "Accepted",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class LocalHTTP:
    """An HTTP/1.1 server on 127.0.0.1 that counts accepted connections and records requests.

    One request per connection (``Connection: close``); ``respond`` answers it (None: close at once).
    """

    def __init__(self, respond: Responder | None = None) -> None:
        self.respond = respond
        self.accepted = 0
        self.requests: list[Request] = []
        self.raw: list[bytes] = []
        self.port = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, conn: anyio.abc.SocketStream) -> None:
        self.accepted += 1
        async with conn:
            if self.respond is None:
                return
            buf = b""
            try:
                while b"\r\n\r\n" not in buf:
                    buf += await conn.receive()
                head, _, body = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                while len(body) < length:
                    body += await conn.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return
            self.raw.append(buf)
            request = Request(method, path, headers, body)
            self.requests.append(request)
            response = await self.respond(request)
            head_lines = [f"HTTP/1.1 {response.status} {REASONS.get(response.status, 'Status')}", "Connection: close"]
            try:
                if response.stream is None:
                    head_lines += [f"Content-Type: {response.content_type}", f"Content-Length: {len(response.body)}"]
                    await conn.send(("\r\n".join(head_lines) + "\r\n\r\n").encode() + response.body)
                    return
                head_lines += [
                    "Content-Type: text/event-stream",
                    "Cache-Control: no-store",
                    "Transfer-Encoding: chunked",
                ]
                await conn.send(("\r\n".join(head_lines) + "\r\n\r\n").encode())
                async for chunk in response.stream():
                    await conn.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                await conn.send(b"0\r\n\r\n")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return


@asynccontextmanager
async def local_http(respond: Responder | None = None) -> AsyncIterator[LocalHTTP]:
    server = LocalHTTP(respond)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    server.port = listener.extra(anyio.abc.SocketAttribute.local_port)
    try:
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, server._handle)
            try:
                yield server
            finally:
                tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:  # the test body's own failure: show it plainly
            raise group.exceptions[0] from None
        raise
    finally:
        close = getattr(respond, "close", None)
        if close is not None:
            close()


def mcp_result(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """What a minimal MCP server with one tool ``ping_tool`` answers."""
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "local-http", "version": "0"},
        }
    if method == "tools/list":
        return {"tools": [{"name": "ping_tool", "description": "answers pong", "inputSchema": {"type": "object"}}]}
    if method == "tools/call":
        return text_result("pong")
    return {}


def echo_of(request: Request) -> str:
    return "\n".join(f"{k}: {v}" for k, v in request.headers.items())


def failing_body(request: Request, rid: Any, as_jsonrpc: bool) -> tuple[bytes, str]:
    """An error body that echoes every request header (values included)."""
    if as_jsonrpc:
        error = {
            "code": -32001,
            "message": f"not allowed; you sent:\n{echo_of(request)}",
            "data": {"headers": request.headers},
        }
        return json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode(), "application/json"
    return f"not allowed; you sent:\n{echo_of(request)}".encode(), "text/plain"


def streamable_responder(fail_on: str, status: int, as_jsonrpc: bool) -> Responder:
    """Streamable HTTP with JSON answers; ``fail_on`` (a method) is answered with ``status``."""

    async def respond(request: Request) -> Response:
        if request.method == "GET":
            return Response(405)
        if request.method == "DELETE":
            return Response(200)
        message = json.loads(request.body)
        if "id" not in message or "method" not in message:
            return Response(202)
        if message["method"] == fail_on:
            body, ctype = failing_body(request, message["id"], as_jsonrpc)
            return Response(status, body, ctype)
        result = mcp_result(message["method"], message.get("params") or {})
        return Response(
            200, json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode(), "application/json"
        )

    return respond


def legacy_sse_responder(fail_on: str, status: int, as_jsonrpc: bool) -> Responder:
    """Legacy HTTP+SSE: GET /sse streams, POST /messages answers 202 and replies on the stream.
    ``fail_on`` is a method, or ``"connect"`` for the GET itself."""
    send, receive = anyio.create_memory_object_stream[bytes](100)

    async def stream() -> AsyncIterator[bytes]:
        yield b"event: endpoint\ndata: /messages?session=1\n\n"
        async for chunk in receive:
            yield chunk

    async def respond(request: Request) -> Response:
        if request.method == "GET":
            if fail_on == "connect":
                body, ctype = failing_body(request, None, as_jsonrpc)
                return Response(status, body, ctype)
            return Response(200, stream=stream)
        message = json.loads(request.body)
        if "id" not in message or "method" not in message:
            return Response(202)
        if message["method"] == fail_on:
            body, ctype = failing_body(request, message["id"], as_jsonrpc)
            return Response(status, body, ctype)
        result = mcp_result(message["method"], message.get("params") or {})
        reply = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
        await send.send(f"event: message\ndata: {reply}\n\n".encode())
        return Response(202)

    def close() -> None:
        send.close()
        receive.close()

    respond.close = close  # type: ignore[attr-defined]
    return respond


# --- real peers as subprocesses on 127.0.0.1 (root conftest fixtures; `peers` in tests/conftest.py) ---


class Peers:
    """Starts peers on free 127.0.0.1 ports; each returns ``(url, transport kind)``."""

    def __init__(self, sdk_peer: Callable[..., str], request: pytest.FixtureRequest) -> None:
        self._sdk_peer = sdk_peer
        self._request = request

    def sdk(self, mode: str, *flags: str) -> tuple[str, str]:
        """The SDK server: mode stateful | json | stateless | sse."""
        return self._sdk_peer(mode, *flags), ("sse" if mode == "sse" else "http")

    def everything(self, mode: str) -> tuple[str, str]:
        """server-everything: mode streamableHttp | sse."""
        port = self._request.getfixturevalue("everything_peer")(mode)
        if mode == "sse":
            return f"http://127.0.0.1:{port}/sse", "sse"
        return f"http://127.0.0.1:{port}/mcp", "http"

#!/usr/bin/env python3
"""The benchmark's Streamable HTTP peer: a minimal MCP server over HTTP/1.1, standard library only.

The HTTP counterpart of ``server.py`` and just as lean: asyncio streams on 127.0.0.1, keep-alive,
one ``application/json`` answer with ``Content-Length`` per POST, no SSE, no SDK. The faster the
peer, the more of the client's own cost a ratio to the raw floor shows.

* ``POST /mcp`` with one JSON-RPC message:
  - ``initialize`` answers with a new ``Mcp-Session-Id`` header;
  - every later message must carry that session id (``400`` without one, ``404`` for an unknown one)
    and, if it sends ``MCP-Protocol-Version``, a supported one (``400`` otherwise);
  - notifications and responses get ``202 Accepted`` with an empty body;
  - requests: ``ping``, ``tools/list`` (paged through ``nextCursor``), ``tools/call`` (``echo``
    returns its ``text``; ``tool_<i>`` returns its own name); other methods get ``-32601``.
* ``GET /mcp`` gets ``405`` (no server-initiated stream); ``DELETE /mcp`` ends the session
  (``200``, or ``404`` for an unknown session id).
* With ``--bearer TOKEN`` (opt-in; off for every workload but W9) every ``/mcp`` request must carry
  ``Authorization: Bearer TOKEN``: any other gets ``401`` with ``WWW-Authenticate: Bearer``.
  ``GET /bench/auth`` answers ``{"authorized": {method: count}, "refused": count}``: the JSON-RPC
  requests that carried the token, by method, and the requests refused for want of it.
* Request lines and headers are bounded (``MAX_HEAD`` bytes, ``MAX_HEADERS`` lines), so are bodies
  (``MAX_BODY``; ``Content-Length`` is required, chunked bodies are refused with ``411``). A
  malformed request gets ``400`` and the connection is closed.

Usage: ``http_server.py [--port P] [--tools N] [--page-size P] [--bearer TOKEN]``. It listens on 127.0.0.1 (port 0,
the default, picks a free one), prints the port it got on one line of stdout, and serves until its
stdin reaches EOF (so it never outlives the benchmark that started it).
"""

import asyncio
import json
import os
import secrets
import sys

# run with -I (no script directory on sys.path): find the stdio peer beside this file
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server import make_tools  # noqa: E402

MAX_HEAD = 16 * 1024  # request line + headers
MAX_HEADERS = 100
MAX_BODY = 4 * 1024 * 1024
PROTOCOL_VERSIONS = frozenset({"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"})

REASONS = {
    200: "OK",
    202: "Accepted",
    401: "Unauthorized",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    505: "HTTP Version Not Supported",
}


class BadRequest(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


class Server:
    def __init__(self, n_tools: int, page_size: int, catalog: str = "", bearer: str = "") -> None:
        self.tools = make_tools(n_tools, catalog)
        self.page_size = page_size
        self.sessions: set[str] = set()
        self.dumps = json.JSONEncoder(separators=(",", ":")).encode
        #: the Authorization value every /mcp request must carry ("": none required)
        self.authorization = f"Bearer {bearer}" if bearer else ""
        self.authorized: dict[str, int] = {}
        self.refused = 0

    # --- HTTP -------------------------------------------------------------------------------------

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return  # the client closed between requests (or mid-head)
                except asyncio.LimitOverrunError:
                    raise BadRequest(431, "request head too large") from None
                method, path, headers, keep_alive = self.parse_head(head)
                if "transfer-encoding" in headers:
                    raise BadRequest(411, "a Content-Length body is required")
                length = headers.get("content-length", "0")
                if not length.isdigit() or len(length) > 10:  # isdigit: no sign, no spaces
                    raise BadRequest(400, "bad Content-Length")
                n = int(length)
                if n > MAX_BODY:
                    raise BadRequest(413, "body too large")
                body = await reader.readexactly(n) if n else b""
                try:
                    status, extra, payload = self.handle(method, path, headers, body)
                except (AttributeError, TypeError, ValueError):  # e.g. params that are not an object
                    status, extra, payload = 400, "", self.error_body(None, -32602, "invalid params")
                self.respond(writer, status, extra, payload, keep_alive)
                await writer.drain()
                if not keep_alive:
                    return
        except BadRequest as exc:
            self.respond(writer, exc.status, "", self.error_body(None, -32600, str(exc)), False)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @staticmethod
    def parse_head(head: bytes) -> tuple[str, str, dict[str, str], bool]:
        lines = head.decode("latin-1").split("\r\n")  # latin-1: any byte decodes
        parts = lines[0].split(" ")
        if len(parts) != 3:
            raise BadRequest(400, "bad request line")
        method, target, version = parts
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            raise BadRequest(505, "HTTP/1.x only")
        if len(lines) - 3 > MAX_HEADERS:  # the head ends with two empty strings
            raise BadRequest(431, "too many header lines")
        headers: dict[str, str] = {}
        for line in lines[1:-2]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise BadRequest(400, "bad header line")
            name = name.lower()
            value = value.strip()
            if name in headers:
                if name in ("content-length", "mcp-session-id", "transfer-encoding"):
                    raise BadRequest(400, f"repeated {name}")
                headers[name] += ", " + value
            else:
                headers[name] = value
        connection = headers.get("connection", "").lower()
        keep_alive = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        return method, target.partition("?")[0], headers, keep_alive

    def respond(self, writer: asyncio.StreamWriter, status: int, extra: str, payload: bytes, keep_alive: bool) -> None:
        head = (
            f"HTTP/1.1 {status} {REASONS[status]}\r\n"
            f"{extra}"
            + ("Content-Type: application/json\r\n" if payload else "")
            + f"Content-Length: {len(payload)}\r\n"
            + ("" if keep_alive else "Connection: close\r\n")
            + "\r\n"
        )
        writer.write(head.encode("latin-1") + payload)

    # --- MCP --------------------------------------------------------------------------------------

    def error_body(self, rid: object, code: int, message: str) -> bytes:
        return self.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}).encode()

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, str, bytes]:
        """(status, extra header lines, JSON body or b"") for one request."""
        if path == "/bench/auth" and method == "GET" and self.authorization:
            return 200, "", self.dumps({"authorized": self.authorized, "refused": self.refused}).encode()
        if path != "/mcp":
            return 404, "", b""
        if self.authorization and headers.get("authorization") != self.authorization:
            self.refused += 1
            return 401, "WWW-Authenticate: Bearer\r\n", b""
        if method == "GET":
            return 405, "Allow: POST, DELETE\r\n", b""
        sid = headers.get("mcp-session-id")
        if method == "DELETE":
            if sid is not None and sid in self.sessions:
                self.sessions.discard(sid)
                return 200, "", b""
            return (404 if sid is not None else 400), "", b""
        if method != "POST":
            return 405, "Allow: POST, DELETE\r\n", b""
        try:
            msg = json.loads(body)
        except ValueError:
            return 400, "", self.error_body(None, -32700, "parse error")
        if type(msg) is not dict:
            return 400, "", self.error_body(None, -32600, "one JSON-RPC message per POST")
        rid = msg.get("id")
        rpc_method = msg.get("method")
        if self.authorization and isinstance(rpc_method, str) and rid is not None:
            self.authorized[rpc_method] = self.authorized.get(rpc_method, 0) + 1
        if rpc_method == "initialize" and rid is not None:
            params = msg.get("params") or {}
            version = params.get("protocolVersion")
            new_sid = secrets.token_hex(16)
            self.sessions.add(new_sid)
            result = {
                "protocolVersion": version if version in PROTOCOL_VERSIONS else "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "kxen-bench-http", "version": "0.1.0"},
            }
            reply = self.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()
            return 200, f"Mcp-Session-Id: {new_sid}\r\n", reply
        if sid is None:
            return 400, "", self.error_body(rid, -32600, "missing Mcp-Session-Id")
        if sid not in self.sessions:
            return 404, "", self.error_body(rid, -32001, "session not found")
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in PROTOCOL_VERSIONS:
            return 400, "", self.error_body(rid, -32600, "unsupported MCP-Protocol-Version")
        if rid is None or rpc_method is None:
            return 202, "", b""  # a notification or a response: accepted, nothing to answer
        params = msg.get("params") or {}
        if rpc_method == "tools/call":
            name = params.get("name")
            if name == "echo":
                result = {"content": [{"type": "text", "text": (params.get("arguments") or {}).get("text", "")}]}
            elif isinstance(name, str) and name.startswith("tool_"):
                result = {"content": [{"type": "text", "text": name}]}
            else:
                return 200, "", self.error_body(rid, -32602, "unknown tool")
        elif rpc_method == "tools/list":
            start = int(params.get("cursor") or 0)
            end = start + self.page_size
            result = {"tools": self.tools[start:end]}
            if end < len(self.tools):
                result["nextCursor"] = str(end)
        elif rpc_method == "ping":
            result = {}
        else:
            return 200, "", self.error_body(rid, -32601, "method not found")
        return 200, "", self.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()


async def main() -> None:
    argv = sys.argv[1:]
    port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 0
    n_tools = int(argv[argv.index("--tools") + 1]) if "--tools" in argv else 0
    page_size = int(argv[argv.index("--page-size") + 1]) if "--page-size" in argv else 100
    catalog = argv[argv.index("--catalog") + 1] if "--catalog" in argv else ""
    bearer = argv[argv.index("--bearer") + 1] if "--bearer" in argv else ""
    app = Server(n_tools, page_size, catalog, bearer)
    server = await asyncio.start_server(app.connection, "127.0.0.1", port, limit=MAX_HEAD)
    sys.stdout.write(f"{server.sockets[0].getsockname()[1]}\n")
    sys.stdout.flush()
    loop = asyncio.get_running_loop()
    # serve until stdin reaches EOF: the benchmark closes it (or dies)
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    async with server:
        while await stdin.read(4096):
            pass


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass

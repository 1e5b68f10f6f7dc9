"""Benchmark clients. Every client is an adapter with the same small interface:

    client = sides.ADAPTERS[transport][side](spec, pipelined=...)
    await client.start()                      # spawn/connect + initialize (+ notifications/initialized)
    result = await client.call(tool, args)    # one tools/call; returns the JSON-RPC ``result``
    tools = await client.list_tools()         # every page of tools/list, validated and deduplicated
    got = await client.read(uri)              # one resources/read (stdio; W10): the result, or the
                                              # agent's bounded view on the Runtime side
    await client.close()

``side`` is ``raw`` (the floor) or ``session`` (kxen's Session over its transport); the public
Runtime path (``kxen``) is in ``adapters_runtime.py``, the SDK's client in ``adapters_sdk.py``, and
``sides.py`` maps each transport and side to its adapter. ``transport`` is ``stdio`` (the
floor: plain asyncio + json, nothing else) or ``http`` (Streamable HTTP against ``http_server.py``;
the floor: one ``httpx.AsyncClient.post`` + ``json.loads`` per request).

Both sides of one transport start *exactly* the same child: for stdio the raw floor uses the
command, args, cwd and environment that kxen's ``resolve_launch`` computes for the same
``ServerConfig``; for http both start ``http_server.py`` the same way (``HttpPeer``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any, Protocol

import attrs

BENCH_DIR = Path(__file__).resolve().parent
SERVER = BENCH_DIR / "server.py"
HTTP_SERVER = BENCH_DIR / "http_server.py"
PROTOCOL_VERSION = "2025-11-25"
LINE_LIMIT = 32 * 1024 * 1024  # the same line bound as kxen's stdio transport


class Client(Protocol):
    name: str

    async def start(self) -> None: ...

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]: ...

    async def list_tools(self) -> list[dict[str, Any]]: ...

    async def close(self) -> None: ...


@attrs.frozen(kw_only=True)
class ServerSpec:
    """The peer to start: the bench server with these extra arguments."""

    name: str = "bench"
    tools: int = 0
    page_size: int = 100
    catalog: str = ""  # a JSON file of real tool definitions, repeated under distinct names (W4r)
    #: the HTTP peer requires ``Authorization: Bearer <bearer>`` (W9); "": no authorization
    bearer: str = attrs.field(default="", repr=False)
    resource_chars: int = 0  # the stdio peer serves one text resource of this many characters (W10)

    def _catalog_args(self) -> list[str]:
        return ["--catalog", self.catalog] if self.catalog else []

    def args(self) -> list[str]:
        # -I -S: the peer is stdlib only; skipping site keeps its start-up (the W1 floor) minimal
        return (
            ["-I", "-S", str(SERVER), "--tools", str(self.tools), "--page-size", str(self.page_size)]
            + self._catalog_args()
            + (["--resource-chars", str(self.resource_chars)] if self.resource_chars else [])
        )

    def auth_headers(self) -> dict[str, str]:
        """The static header of the sides that send the token themselves (none without ``bearer``)."""
        return {"Authorization": f"Bearer {self.bearer}"} if self.bearer else {}

    def server_config(self) -> Any:
        from kxen_core.config.models import ServerConfig

        return ServerConfig(name=self.name, command=sys.executable, args=self.args())

    def http_args(self) -> list[str]:
        return (
            ["-I", "-S", str(HTTP_SERVER), "--tools", str(self.tools), "--page-size", str(self.page_size)]
            + self._catalog_args()
            + (["--bearer", self.bearer] if self.bearer else [])
        )

    def launch(self) -> tuple[str, list[str], Path, dict[str, str]]:
        """(command, args, cwd, env) exactly as kxen's stdio transport starts the process: the
        launch the core resolves, with the environment the transport gives the child."""
        from kxen_transport_stdio.transport import child_env

        from kxen_core.launch.resolve import resolve_launch

        launch = resolve_launch(self.server_config(), Path.cwd())
        assert launch.command is not None
        return launch.command, list(launch.args), Path(launch.cwd), child_env(launch.env)


class BenchError(AssertionError):
    """A workload's result was wrong (a benchmark that does not verify measures nothing)."""


async def cold_start(client: Client) -> None:
    """A cold start as W1 and W5 time it: ``start()`` and the first tools/list (a Runtime lists
    while it starts: its adapter says ``lists_on_start``)."""
    await client.start()
    if not getattr(client, "lists_on_start", False):
        tools = await client.list_tools()
        if not tools:
            raise BenchError(f"{client.name}: the first tools/list is empty")


# --- the raw floor -------------------------------------------------------------------------------


class RawStdioClient:
    """asyncio.create_subprocess_exec, write a line, readline, json.loads: nothing else.

    ``pipelined=False`` (sequential workloads): lock-step, the caller reads its own reply.
    ``pipelined=True`` (concurrent workloads): one reader task and a pending map of futures by id.
    """

    name = "raw"

    def __init__(self, spec: ServerSpec, *, pipelined: bool = False) -> None:
        self.spec = spec
        self.pipelined = pipelined
        self._launch = spec.launch()
        self._proc: asyncio.subprocess.Process | None = None
        self._next_id = 0
        self._pending: dict[int, asyncio.Future] = {}
        self._reader_task: asyncio.Task | None = None
        self._dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    async def start(self) -> None:
        command, args, cwd, env = self._launch
        self._proc = await asyncio.create_subprocess_exec(
            command,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            cwd=str(cwd),
            env=env,
            limit=LINE_LIMIT,
            start_new_session=True,  # as kxen launches; also measurably faster here for many spawns
        )
        self._w = self._proc.stdin
        self._r = self._proc.stdout
        init = await self._lockstep(
            "initialize",
            {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
        )
        if init.get("protocolVersion") != PROTOCOL_VERSION:
            raise BenchError(f"raw: unexpected initialize result {init!r}")
        self._w.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        await self._w.drain()
        if self.pipelined:
            self._reader_task = asyncio.get_running_loop().create_task(self._reader())

    async def _lockstep(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        self._next_id += 1
        rid = self._next_id
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self._w.write((self._dumps(msg) + "\n").encode())
        await self._w.drain()
        while True:
            line = await self._r.readline()
            if not line:
                raise BenchError("raw: server closed its stdout")
            reply = json.loads(line)
            if reply.get("id") == rid and "method" not in reply:
                break
        if "result" not in reply:
            raise BenchError(f"raw: {method} failed: {reply.get('error')!r}")
        return reply["result"]

    async def _reader(self) -> None:
        pending = self._pending
        readline = self._r.readline
        loads = json.loads
        try:
            while True:
                line = await readline()
                if not line:
                    break
                reply = loads(line)
                fut = pending.pop(reply.get("id"), None)
                if fut is not None and not fut.done():
                    fut.set_result(reply)
        finally:
            for fut in pending.values():
                if not fut.done():
                    fut.set_exception(BenchError("raw: server closed its stdout"))
            pending.clear()

    async def _pipelined(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        self._next_id += 1
        rid = self._next_id
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self._w.write((self._dumps(msg) + "\n").encode())
        await self._w.drain()
        reply = await fut
        if "result" not in reply:
            raise BenchError(f"raw: {method} failed: {reply.get('error')!r}")
        return reply["result"]

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        if self.pipelined:
            return await self._pipelined(method, params)
        return await self._lockstep(method, params)

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.request("tools/call", {"name": tool, "arguments": arguments})

    async def read(self, uri: str) -> dict[str, Any]:
        return await self.request("resources/read", {"uri": uri})

    async def list_tools(self) -> list[dict[str, Any]]:
        # the floor's validation and dedupe: an object with a non-empty string name, first one wins
        seen: dict[str, dict[str, Any]] = {}
        cursor = None
        while True:
            page = await self.request("tools/list", {"cursor": cursor} if cursor is not None else None)
            for tool in page["tools"]:
                if type(tool) is dict:
                    name = tool.get("name")
                    if type(name) is str and name and name not in seen:
                        seen[name] = tool
            cursor = page.get("nextCursor")
            if cursor is None:
                return list(seen.values())

    async def close(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        with contextlib.suppress(Exception):
            self._w.close()
        try:
            await asyncio.wait_for(proc.wait(), 2.0)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
        if self._reader_task is not None:
            with contextlib.suppress(BaseException):
                await self._reader_task


# --- kxen ----------------------------------------------------------------------------------------

_PM = None


def plugin_manager() -> Any:
    """One host plugin manager (every installed plugin), as a Runtime would have."""
    global _PM
    if _PM is None:
        from kxen_core.plugins.manager import make_plugin_manager

        _PM = make_plugin_manager()
    return _PM


class KxenStdioClient:
    """kxen_core.protocol.session.Session over kxen_transport_stdio.StdioTransport, without a Runtime (the
    "kxen session" column: what the layers under the Runtime cost). ``list_tools`` is
    ``kxen_core.protocol.catalog.fetch_catalog`` with the ``kxen_catalog_page`` judge, as a server lists."""

    name = "session"

    def __init__(self, spec: ServerSpec, *, pipelined: bool = False) -> None:
        from kxen_core.launch.resolve import resolve_launch
        from kxen_core.transport import TransportContext

        self.spec = spec
        self.server = spec.server_config()
        # what a Runtime hands the stdio opener: the launch the core resolved once
        self.context = TransportContext(workspace=Path.cwd(), launch=resolve_launch(self.server, Path.cwd()))
        self.pm = plugin_manager()
        self.session: Any = None
        self._stack: contextlib.AsyncExitStack | None = None

    def classes(self) -> tuple[type, type]:
        """(Session, StdioTransport): a subclass may return a variant's, to A/B a change in one run."""
        from kxen_transport_stdio.transport import StdioTransport

        from kxen_core.protocol.session import Session

        return Session, StdioTransport

    async def start(self) -> None:
        Session, StdioTransport = self.classes()
        await _open_session(self, StdioTransport(self.server, self.context), Session, "kxen")

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.session.request("tools/call", {"name": tool, "arguments": arguments})

    async def read(self, uri: str) -> dict[str, Any]:
        return await self.session.request("resources/read", {"uri": uri})

    async def list_tools(self) -> list[dict[str, Any]]:
        from kxen_core.hookcall import acall_all
        from kxen_core.protocol.catalog import fetch_catalog

        session, pm, server = self.session, self.pm, self.server

        async def fetch(cursor: str | None) -> dict[str, Any]:
            return await session.request("tools/list", {"cursor": cursor} if cursor is not None else None)

        async def judge(page: Any) -> list[tuple[str, Any]]:
            answers = await acall_all(pm, "kxen_catalog_page", server=server, kind="tools", page=page)
            return [(plugin, v) for plugin, verdicts in answers for v in verdicts]

        catalog = await fetch_catalog("tools", fetch, judge=judge)
        if not catalog.complete:
            raise BenchError(f"kxen session: catalog incomplete: {catalog.diagnostics[:3]}")
        return catalog.items

    async def close(self) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.__aexit__(None, None, None)


# --- Streamable HTTP (W6) ------------------------------------------------------------------------


class HttpPeer:
    """``http_server.py`` in its own process on 127.0.0.1: the same peer for both sides.

    It prints its ephemeral port on stdout and serves until its stdin is closed.
    """

    def __init__(self, proc: asyncio.subprocess.Process, port: int) -> None:
        self.proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"

    @classmethod
    async def start(cls, spec: ServerSpec) -> HttpPeer:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *spec.http_args(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=None,  # a crashing peer should say why
            start_new_session=True,
        )
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), 10.0)  # type: ignore[union-attr]
            port = int(line)
        except BaseException:
            proc.kill()
            await proc.wait()
            raise
        return cls(proc, port)

    async def auth_stats(self) -> dict[str, Any]:
        """What a peer started with ``bearer`` counted (``GET /bench/auth``): the JSON-RPC requests
        that carried the token, by method, and the requests it refused (401)."""
        import httpx

        async with httpx.AsyncClient() as client:
            response = await client.get(f"http://127.0.0.1:{self.port}/bench/auth")
        if response.status_code != 200:
            raise BenchError(f"the HTTP peer keeps no authorization counts (HTTP {response.status_code})")
        stats: dict[str, Any] = json.loads(response.content)
        return stats

    async def close(self) -> None:
        proc = self.proc
        with contextlib.suppress(Exception):
            proc.stdin.close()  # type: ignore[union-attr]
        try:
            await asyncio.wait_for(proc.wait(), 2.0)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()


class RawHttpClient:
    """The Streamable HTTP floor: one ``httpx.AsyncClient`` (the httpx kxen's plugin uses, default
    limits and timeouts), one ``await client.post(...)`` then ``json.loads(response.content)`` per
    request, lock-step: the caller reads its own answer. Nothing else (no SSE, no GET stream).

    ``pipelined`` changes nothing: concurrent callers simply share the client's connection pool.
    """

    name = "raw"

    def __init__(self, spec: ServerSpec, *, pipelined: bool = False) -> None:
        self.spec = spec
        self._peer: HttpPeer | None = None
        self._client: Any = None
        self._next_id = 0
        self._dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
        self._headers: dict[str, str] = {}

    async def start(self) -> None:
        import httpx

        self._peer = await HttpPeer.start(self.spec)
        self._url = self._peer.url
        self._client = httpx.AsyncClient()
        try:
            self._headers = {
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                **self.spec.auth_headers(),
            }
            init_msg = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
            response = await self._client.post(self._url, content=self._dumps(init_msg).encode(), headers=self._headers)
            init = json.loads(response.content).get("result") or {}
            session_id = response.headers.get("mcp-session-id")
            if response.status_code != 200 or init.get("protocolVersion") != PROTOCOL_VERSION or not session_id:
                raise BenchError(f"raw http: unexpected initialize answer {response.status_code} {init!r}")
            self._headers["Mcp-Session-Id"] = session_id
            self._headers["MCP-Protocol-Version"] = PROTOCOL_VERSION
            response = await self._client.post(
                self._url, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers=self._headers
            )
            if response.status_code != 202:
                raise BenchError(f"raw http: notifications/initialized answered HTTP {response.status_code}")
        except BaseException:
            await self.close()
            raise

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next_id += 1
        rid = self._next_id
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        response = await self._client.post(self._url, content=self._dumps(msg).encode(), headers=self._headers)
        reply = json.loads(response.content)
        if reply.get("id") != rid or "result" not in reply:
            raise BenchError(f"raw http: {method} failed: HTTP {response.status_code} {str(reply)[:200]}")
        return reply["result"]

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.request("tools/call", {"name": tool, "arguments": arguments})

    list_tools = RawStdioClient.list_tools

    async def close(self) -> None:
        client, self._client = self._client, None
        peer, self._peer = self._peer, None
        try:
            if client is not None:
                if "Mcp-Session-Id" in self._headers:  # as kxen does on close: end the session
                    with contextlib.suppress(Exception):
                        await client.delete(self._url, headers=self._headers)
                await client.aclose()
        finally:
            if peer is not None:
                await peer.close()


class KxenHttpClient(KxenStdioClient):
    """kxen_core.protocol.session.Session over the ``http`` plugin's Streamable HTTP transport, opened as its
    ``kxen_transport_open`` hook opens it, with the context a Runtime gives it (its plugin manager
    included, so the credential seam is exercised as in real use)."""

    def __init__(self, spec: ServerSpec, *, pipelined: bool = False) -> None:
        super().__init__(spec, pipelined=pipelined)
        from kxen_core.transport import TransportContext

        self.context = TransportContext(workspace=Path.cwd(), pm=self.pm)
        self._peer: HttpPeer | None = None

    def opener(self) -> Any:
        """A subclass may return a variant's ``open_streamable_http``, to A/B a change in one run."""
        from kxen_transport_http.streamable import open_streamable_http

        return open_streamable_http

    async def start(self) -> None:
        from kxen_core.config.models import ServerConfig
        from kxen_core.protocol.session import Session

        self._peer = await HttpPeer.start(self.spec)
        self.server = ServerConfig(
            name=self.spec.name, url=self._peer.url, transport="http", headers=self.spec.auth_headers()
        )
        await _open_session(self, self.opener()(self.server, self.context), Session, "kxen http")

    async def close(self) -> None:
        peer, self._peer = self._peer, None
        try:
            await super().close()
        finally:
            if peer is not None:
                await peer.close()


async def _open_session(client: Any, transport: Any, session_class: Any, label: str) -> None:
    """Enter ``transport`` and a Session on it into ``client._stack``, initialize, check the version.

    On failure ``client.close()`` undoes whatever was entered.
    """
    stack = contextlib.AsyncExitStack()
    await stack.__aenter__()
    client._stack = stack
    try:
        stream = await stack.enter_async_context(transport)
        client.session = await stack.enter_async_context(
            session_class(
                stream,
                server=client.server.name,
                request_timeout=client.server.timeouts.requestSeconds,
                initialize_timeout=client.server.timeouts.initializeSeconds,
            )
        )
        init = await client.session.initialize()
    except BaseException:
        await client.close()
        raise
    if init.protocol_version != PROTOCOL_VERSION:
        raise BenchError(f"{label}: unexpected protocol version {init.protocol_version!r}")

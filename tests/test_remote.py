"""Remote MCP through the Runtime: the user's switch, URL rules, privacy, catalog validation, secrets.

Real peers run as subprocesses bound to 127.0.0.1: the official Python SDK server
(tests/peers/sdk_server.py, Streamable HTTP stateful / json_response / stateless, and legacy
SSE) and server-everything (streamableHttp, sse; preloaded with tests/peers/loopback_only.cjs
so it binds 127.0.0.1 only), started by the root conftest's fixtures. The rest use small HTTP servers written here, in the test's own event
loop, on 127.0.0.1: a listener that only counts connections, and MCP servers that answer with an
error status echoing the request headers.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import anyio
import anyio.abc

if sys.version_info < (3, 11):  # pragma: no cover - anyio brings the backport there
    from exceptiongroup import BaseExceptionGroup
import attrs
import httpx
import pytest

from kxen_core import Runtime
from kxen_core.cli import main as kxen_main
from kxen_core.config import load_config
from kxen_core.errors import (
    ApprovalDenied,
    ClosedError,
    ConfigError,
    HTTPStatusError,
    KxenError,
    RemoteError,
    ServerNotReady,
    UnknownTool,
)
from kxen_core.plugins import make_plugin_manager
from kxen_testing import Channel, mem, running, text_result

pytestmark = pytest.mark.anyio

WAIT = 20  # seconds for any one wait on servers

REMOTE_ON = "# the user's settings\n[mcp]\nremote_enabled = true\nallow_loopback_http = true\n"
REMOTE_OFF = "# the user's settings\n[mcp]\nallow_loopback_http = true\n"
OFF_NOTE = "remote MCP is off"

SDK_TOOLS = {"add", "echo", "boom", "slow", "poll", "roots"}  # tests/peers/sdk_server.py


# --- helpers ----------------------------------------------------------------------------------


#: the http, sse and memory transports (and the core defaults); no installed approval channel
REMOTE_PLUGINS = ("http", "sse", "memory")


def remote(url: str, kind: str = "http", **extra: Any) -> dict[str, Any]:
    return {"url": url, "transport": kind, "defaultToolPolicy": "allow", **extra}


def status_of(rt: Runtime, name: str) -> dict[str, Any]:
    (entry,) = [s for s in rt.status() if s["name"] == name]
    return entry


async def until(predicate: Callable[[], bool], timeout: float = 5) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.01)


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

REASONS = {200: "OK", 202: "Accepted", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error", 503: "Service Unavailable"}


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
                head_lines += ["Content-Type: text/event-stream", "Cache-Control: no-store", "Transfer-Encoding: chunked"]
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
        error = {"code": -32001, "message": f"not allowed; you sent:\n{echo_of(request)}", "data": {"headers": request.headers}}
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
        return Response(200, json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode(), "application/json")

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


# --- real peers as subprocesses on 127.0.0.1 (the shared fixtures in the root conftest) ------------


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


@pytest.fixture
def peers(sdk_peer: Callable[..., str], request: pytest.FixtureRequest) -> Peers:
    return Peers(sdk_peer, request)


# --- 1. remote off (the default) ------------------------------------------------------------------


async def test_remote_off_connects_nothing(kxen_home, ws, fakes):
    """Off by default: http and sse servers are ``disabled`` with a note and never dialled, not even
    after a reload; no approval is asked; a local server next to them works."""
    fakes.add("local", tools={"echo": lambda a: text_result(a.get("text", ""))})
    channel = Channel(approved=True)
    async with local_http() as listener:
        kxen_home.write_settings(REMOTE_OFF)  # loopback http allowed, remote not turned on
        kxen_home.write_servers(
            {
                "web": remote(f"{listener.base}/mcp"),
                "legacy": remote(f"{listener.base}/sse", "sse"),
                "plain": {"url": f"{listener.base}/mcp"},  # transport defaults to http for a url
                "local": mem("local", defaultToolPolicy="allow"),
            }
        )
        async with running(kxen_home, ws, channel, allow=REMOTE_PLUGINS) as rt:
            for name, kind in (("web", "http"), ("legacy", "sse"), ("plain", "http")):
                s = status_of(rt, name)
                assert (s["state"], s["transport"], s["error"], s["tools"]) == ("disabled", kind, None, 0)
                assert OFF_NOTE in s["note"] and "remote_enabled = true" in s["note"]
                with pytest.raises(ServerNotReady, match="disabled"):
                    await rt.call_tool(f"{name}__anything", {})
            assert status_of(rt, "local")["state"] == "ready"
            assert {t["server"] for t in rt.tools()} == {"local"}
            await anyio.sleep(0.3)
            await rt.reload()
            with anyio.fail_after(WAIT):
                assert await rt.wait_ready()
            assert status_of(rt, "web")["state"] == "disabled"
            await anyio.sleep(0.3)
        assert listener.accepted == 0
    assert load_config(kxen_home.path, ws).settings.mcp.remote_enabled is False
    assert channel.requests == []


# --- 2. remote on: real peers -----------------------------------------------------------------------


@attrs.frozen
class Profile:
    """The same checks for every peer, in that peer's tool names."""

    echo: tuple[str, dict[str, Any]]
    echo_text: str
    add: tuple[str, dict[str, Any]]
    sum_text: str
    structured: tuple[str, dict[str, Any]]
    structured_ok: Callable[[Any], bool]
    failing: tuple[str, dict[str, Any]]
    tools: set[str]
    exact_tools: bool


SDK_PROFILE = Profile(
    echo=("echo", {"text": "hé 👋"}),
    echo_text="hé 👋",
    add=("add", {"a": 2, "b": 40}),
    sum_text="42",
    structured=("add", {"a": 2, "b": 3}),
    structured_ok=lambda sc: sc == {"result": 5},
    failing=("boom", {}),
    tools=SDK_TOOLS,
    exact_tools=True,
)
EVERYTHING_PROFILE = Profile(
    echo=("echo", {"message": "hé 👋"}),
    echo_text="hé 👋",
    add=("get-sum", {"a": 2, "b": 40}),
    sum_text="42",
    structured=("get-structured-content", {"location": "New York"}),
    structured_ok=lambda sc: isinstance(sc, dict) and bool(sc),
    failing=("get-sum", {"a": "not a number", "b": 1}),
    tools={"echo", "get-sum", "get-structured-content"},
    exact_tools=False,
)

REAL_PEERS = [
    pytest.param(("sdk", "stateful"), id="sdk-stateful"),
    pytest.param(("sdk", "json"), id="sdk-json_response"),
    pytest.param(("sdk", "stateless"), id="sdk-stateless_http"),
    pytest.param(("sdk", "sse"), id="sdk-sse"),
    pytest.param(("everything", "streamableHttp"), id="everything-streamableHttp"),
    pytest.param(("everything", "sse"), id="everything-sse"),
]


def start_peer(peers: Peers, which: tuple[str, str]) -> tuple[tuple[str, str], Profile]:
    family, mode = which
    if family == "sdk":
        return peers.sdk(mode), SDK_PROFILE
    return peers.everything(mode), EVERYTHING_PROFILE


def text_of(result: dict[str, Any]) -> str:
    return "\n".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")


@pytest.mark.peer
@pytest.mark.parametrize("which", REAL_PEERS)
async def test_remote_on_real_peer(kxen_home, ws, peers, which):
    (url, kind), profile = start_peer(peers, which)
    kxen_home.write_settings(REMOTE_ON)
    kxen_home.write_servers({"r": remote(url, kind)})
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert (s["state"], s["transport"], s["phase"], s["error"], s["note"]) == ("ready", kind, None, None, None)
        names = {t["name"] for t in rt.tools("r")}
        assert s["tools"] == len(names) > 0
        assert names == profile.tools if profile.exact_tools else profile.tools <= names
        assert {t["qualifiedName"] for t in rt.tools("r")} == {f"r__{n}" for n in names}
        assert s["transportInfo"]["kind"] == kind and s["transportInfo"]["url"] == url
        assert not [d for d in s["diagnostics"] if "rejected" in d], s["diagnostics"]

        with anyio.fail_after(WAIT):
            echoed = await rt.call_tool(f"r__{profile.echo[0]}", profile.echo[1])
            summed = await rt.call_tool(profile.add[0], profile.add[1], server="r")
            structured = await rt.call_tool(f"r__{profile.structured[0]}", profile.structured[1])
            failed = await rt.call_tool(f"r__{profile.failing[0]}", profile.failing[1])
        assert profile.echo_text in text_of(echoed) and not echoed.get("isError")
        assert profile.sum_text in text_of(summed) and not summed.get("isError")
        assert profile.structured_ok(structured.get("structuredContent")), structured
        assert failed.get("isError") is True

        # several calls in flight at once, each gets its own answer
        results: dict[int, str] = {}

        async def call(i: int) -> None:
            r = await rt.call_tool(f"r__{profile.add[0]}", {"a": i, "b": 1000})
            results[i] = text_of(r)

        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as tg:
                for i in range(6):
                    tg.start_soon(call, i)
        assert {i: str(1000 + i) in t for i, t in results.items()} == {i: True for i in range(6)}
    assert status_of(rt, "r")["state"] == "stopped"


# --- 3. the settings API: turning remote off and on ----------------------------------------------------


@pytest.mark.peer
@pytest.mark.parametrize("mode", ["stateful", "sse"])
async def test_turning_remote_off_wakes_pending_calls(kxen_home, ws, peers, fakes, mode):
    """``set_remote_enabled(False)`` while a slow remote call is pending: the call fails at once with
    ClosedError, the remote server is ``disabled``, the local server keeps running untouched."""
    url, kind = peers.sdk(mode)
    fake = fakes.add("local", tools={"echo": lambda a: text_result(a.get("text", ""))})
    kxen_home.write_settings(REMOTE_ON)
    kxen_home.write_servers(
        {"r": remote(url, kind, timeouts={"requestSeconds": 120}), "local": mem("local", defaultToolPolicy="allow")}
    )
    channel = Channel(approved=False)  # turning off needs no approval: a "no" channel must not matter
    async with running(kxen_home, ws, channel, allow=REMOTE_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready"
        assert status_of(rt, "local")["state"] == "ready"
        local_before = rt.servers["local"]
        outcome: dict[str, Any] = {}

        async def slow_call() -> None:
            try:
                outcome["result"] = await rt.call_tool("r__slow", {"seconds": 60})
            except BaseException as exc:
                outcome["error"] = exc
                outcome["at"] = anyio.current_time()
                if not isinstance(exc, Exception):
                    raise

        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(slow_call)
                session = rt.servers["r"].session
                assert session is not None
                await until(lambda: any(p.method == "tools/call" for p in session._pending.values()))
                await anyio.sleep(0.5)  # let the server start sleeping
                started = anyio.current_time()
                assert await rt.set_remote_enabled(False) is False
                switched = anyio.current_time()
        assert "result" not in outcome
        error = outcome["error"]
        # ClosedError is the contract. The SDK answers the notifications/cancelled kxen sends while
        # stopping with a -32800 error, which can win the race against ClosedError: a core bug,
        # pinned down deterministically by test_stopping_wakes_pending_calls_with_closed_error.
        if isinstance(error, RemoteError):
            assert error.code == -32800, repr(error)
        else:
            assert isinstance(error, ClosedError), repr(error)
            assert "'r'" in str(error)
        assert outcome["at"] - started < 5, "the pending call was not woken at once"
        assert switched - started < 10
        s = status_of(rt, "r")
        assert (s["state"], s["error"]) == ("disabled", None)
        assert OFF_NOTE in s["note"]
        assert rt.servers["local"] is local_before  # not restarted
        assert status_of(rt, "local")["state"] == "ready"
        assert fake.connections == 1
        with anyio.fail_after(WAIT):
            assert text_of(await rt.call_tool("local__echo", {"text": "still here"})) == "still here"
        with pytest.raises(ServerNotReady, match="disabled"):
            await rt.call_tool("r__add", {"a": 1, "b": 2})
    assert channel.requests == []
    settings = (kxen_home.path / "config.toml").read_text()
    assert "remote_enabled = false" in settings
    assert "allow_loopback_http = true" in settings and "# the user's settings" in settings


@pytest.mark.peer
async def test_turning_remote_on_needs_approval(kxen_home, ws, peers):
    url, kind = peers.sdk("stateful")
    kxen_home.write_settings(REMOTE_OFF)
    kxen_home.write_servers({"r": remote(url, kind)})
    before = (kxen_home.path / "config.toml").read_bytes()

    # no approval channel: denied, nothing written, still off
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
        with anyio.fail_after(WAIT), pytest.raises(ApprovalDenied, match="remote MCP stays off"):
            await rt.set_remote_enabled(True)
        assert status_of(rt, "r")["state"] == "disabled"
        assert rt.config.settings.mcp.remote_enabled is False
    assert (kxen_home.path / "config.toml").read_bytes() == before

    # a channel that says no: the same
    no = Channel(approved=False, reason="the test says so")
    async with running(kxen_home, ws, no, allow=REMOTE_PLUGINS) as rt:
        with anyio.fail_after(WAIT), pytest.raises(ApprovalDenied, match="the test says so"):
            await rt.set_remote_enabled(True)
        assert status_of(rt, "r")["state"] == "disabled"
    assert (kxen_home.path / "config.toml").read_bytes() == before
    (request,) = no.requests
    assert (request.kind, request.server) == ("remote_enable", "*")
    assert request.details == {"remote servers": ["r"]}

    # a channel that says yes: on, written to user settings, and the server connects
    yes = Channel(approved=True)
    async with running(kxen_home, ws, yes, allow=REMOTE_PLUGINS) as rt:
        with anyio.fail_after(WAIT):
            assert await rt.set_remote_enabled(True) is True
            assert await rt.wait_ready()
            result = await rt.call_tool("r__add", {"a": 20, "b": 22})
        assert status_of(rt, "r")["state"] == "ready"
        assert status_of(rt, "r")["tools"] == len(SDK_TOOLS)
        assert result["structuredContent"] == {"result": 42}
    assert [r.kind for r in yes.requests] == ["remote_enable"]
    settings = load_config(kxen_home.path, ws).settings.mcp
    assert settings.remote_enabled is True and settings.allow_loopback_http is True
    assert "# the user's settings" in (kxen_home.path / "config.toml").read_text()


async def test_kxen_remote_command_switches_user_settings(kxen_home, ws, fakes, capsys):
    """``kxen remote on|off`` writes the user setting (the typed command is the decision); a
    Runtime started afterwards dials the remote server only while it is on."""
    fakes.add("local", tools={})
    kxen_home.write_settings(REMOTE_OFF)
    async with local_http() as listener:
        kxen_home.write_servers({"r": remote(f"{listener.base}/mcp"), "local": mem("local", defaultToolPolicy="allow")})
        assert kxen_main(["--home", str(kxen_home.path), "remote", "on"]) == 0
        assert "remote MCP is on" in capsys.readouterr().out
        assert load_config(kxen_home.path, ws).settings.mcp.remote_enabled is True
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
            assert status_of(rt, "r")["state"] == "failed"  # it dialled; this listener hangs up
        assert listener.accepted >= 1
        dialled = listener.accepted

        assert kxen_main(["--home", str(kxen_home.path), "remote", "off"]) == 0
        assert load_config(kxen_home.path, ws).settings.mcp.remote_enabled is False
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
            assert status_of(rt, "r")["state"] == "disabled"
            await anyio.sleep(0.2)
        assert listener.accepted == dialled
    text = (kxen_home.path / "config.toml").read_text()
    assert "allow_loopback_http = true" in text and "# the user's settings" in text


# --- 4. a project can never turn remote on ----------------------------------------------------------


def write_project(ws: Path, data: Any) -> Path:
    (ws / ".kxen").mkdir(exist_ok=True)
    path = ws / ".kxen" / "mcp.json"
    path.write_text(json.dumps(data))
    return path


def trusted_settings(ws: Path, extra: str = "") -> str:
    return f"trusted_workspaces = [{json.dumps(str(ws.resolve()))}]\n" + REMOTE_OFF + extra


async def test_project_remote_entry_stays_disabled_while_remote_is_off(kxen_home, ws, fakes):
    fakes.add("local", tools={"echo": lambda a: text_result("user entry")})
    async with local_http() as listener:
        kxen_home.write_settings(trusted_settings(ws))
        kxen_home.write_servers({"shadowed": mem("local", defaultToolPolicy="allow")})
        write_project(
            ws,
            {
                "mcpServers": {
                    "proj": {"url": f"{listener.base}/mcp"},
                    "projsse": {"url": f"{listener.base}/sse", "transport": "sse"},
                    "shadowed": {"url": f"{listener.base}/mcp"},
                }
            },
        )
        # a settings file inside the workspace is no user setting: ignored
        (ws / ".kxen" / "config.toml").write_text("[mcp]\nremote_enabled = true\nallow_loopback_http = true\n")
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
            assert rt.problems == []
            assert rt.config.trusted is True
            assert rt.config.settings.mcp.remote_enabled is False
            for name in ("proj", "projsse"):
                s = status_of(rt, name)
                assert (s["scope"], s["state"]) == ("project", "disabled")
                assert OFF_NOTE in s["note"]
            # the project entry may not start, so the user's entry of that name stands in
            s = status_of(rt, "shadowed")
            assert (s["scope"], s["transport"], s["state"]) == ("user", "memory", "ready")
            assert "project entry is not used" in s["note"] and OFF_NOTE in s["note"]
            await anyio.sleep(0.3)
        assert listener.accepted == 0


async def test_project_file_cannot_hold_settings(kxen_home, ws):
    async with local_http() as listener:
        kxen_home.write_settings(trusted_settings(ws))
        pfile = write_project(
            ws,
            {
                "mcp": {"remote_enabled": True, "allow_loopback_http": True},
                "mcpServers": {"proj": {"url": f"{listener.base}/mcp"}},
            },
        )
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
            assert rt.config.settings.mcp.remote_enabled is False
            assert "proj" not in rt.servers  # the file is rejected whole
            assert any(p.startswith(f"{pfile}: (top level): unknown key(s): mcp") for p in rt.problems), rt.problems
            await anyio.sleep(0.2)
        assert listener.accepted == 0


async def test_project_remote_entry_starts_once_the_user_turns_remote_on(kxen_home, ws):
    """Remote off was the only thing keeping a trusted project's remote entry from dialling."""
    channel = Channel(approved=True)
    async with local_http() as listener:
        kxen_home.write_settings(trusted_settings(ws))
        write_project(ws, {"mcpServers": {"proj": {"url": f"{listener.base}/mcp"}}})
        async with running(kxen_home, ws, channel, allow=REMOTE_PLUGINS) as rt:
            assert status_of(rt, "proj")["state"] == "disabled"
            await anyio.sleep(0.2)
            assert listener.accepted == 0
            with anyio.fail_after(WAIT):
                assert await rt.set_remote_enabled(True) is True
                assert await rt.wait_ready()
            assert status_of(rt, "proj")["state"] == "failed"  # it dialled; this listener hangs up
            assert listener.accepted >= 1
            dialled = listener.accepted
            with anyio.fail_after(WAIT):
                assert await rt.set_remote_enabled(False) is False
            assert status_of(rt, "proj")["state"] == "disabled"
            await anyio.sleep(0.2)
            assert listener.accepted == dialled


# --- 5. URL rules at load time ---------------------------------------------------------------------------


NOT_HTTPS = "must be https:// (plain http:// only for loopback hosts)"
USERINFO = "must not carry a username or password"
NEEDS_LOOPBACK_SETTING = "plain http:// to a loopback host needs [mcp] allow_loopback_http = true in user settings"

BAD_URLS = [
    ("http://example.com/mcp", True, NOT_HTTPS),
    ("http://10.0.0.1:8080/mcp", True, NOT_HTTPS),
    ("http://0.0.0.0:8080/mcp", True, NOT_HTTPS),
    ("http://127.0.0.1.nip.io/mcp", True, NOT_HTTPS),
    ("http://localhost.example.com/mcp", True, NOT_HTTPS),
    ("https://alice:hunter2-pass@example.com/mcp", True, USERINFO),
    ("https://alice@example.com/mcp", True, USERINFO),
    ("http://bob:hunter2-pass@127.0.0.1:8080/mcp", True, USERINFO),
    ("http://127.0.0.1:8080/mcp", False, NEEDS_LOOPBACK_SETTING),
    ("http://localhost:8080/mcp", False, NEEDS_LOOPBACK_SETTING),
    ("http://[::1]:8080/mcp", False, NEEDS_LOOPBACK_SETTING),
    ("ftp://example.com/mcp", True, "must be an https:// URL"),
]


def loopback_settings(allow: bool) -> str:
    return f"[mcp]\nallow_loopback_http = {'true' if allow else 'false'}\n"


@pytest.mark.parametrize("kind", ["http", "sse"])
@pytest.mark.parametrize(("url", "allow", "rule"), BAD_URLS)
async def test_bad_remote_url_is_a_config_error(kxen_home, ws, kind, url, allow, rule):
    kxen_home.write_settings(loopback_settings(allow))
    servers = kxen_home.write_servers({"good": remote("https://mcp.example.com/mcp"), "r": remote(url, kind)})
    with pytest.raises(ConfigError) as info:
        load_config(kxen_home.path, ws)
    assert info.value.problems == [f"{servers}: mcpServers.r.url: {rule}"]
    assert "hunter2" not in str(info.value)
    # the Runtime refuses the same config before starting anything
    with pytest.raises(ConfigError):
        async with Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=REMOTE_PLUGINS)):
            pytest.fail("entered a runtime with an invalid config")


@pytest.mark.parametrize(
    ("url", "allow", "rule"),
    [
        ("http://auth.example.com/.well-known/oauth-authorization-server", True, NOT_HTTPS),
        ("http://127.0.0.1:9000/.well-known/oauth-authorization-server", False, NEEDS_LOOPBACK_SETTING),
        ("https://user:hunter2-pass@auth.example.com/meta", True, USERINFO),
    ],
)
def test_bad_oauth_metadata_url_is_a_config_error(kxen_home, ws, url, allow, rule):
    kxen_home.write_settings(loopback_settings(allow))
    servers = kxen_home.write_servers(
        {"r": remote("https://mcp.example.com/mcp", oauth={"clientId": "kxen", "authorizationServerMetadataUrl": url})}
    )
    with pytest.raises(ConfigError) as info:
        load_config(kxen_home.path, ws)
    assert info.value.problems == [f"{servers}: mcpServers.r.oauth.authorizationServerMetadataUrl: {rule}"]
    assert "hunter2" not in str(info.value)


def test_every_url_problem_is_listed_at_once(kxen_home, ws):
    kxen_home.write_settings(loopback_settings(False))
    servers = kxen_home.write_servers(
        {
            "a": remote("http://example.com/mcp", oauth={"authorizationServerMetadataUrl": "http://example.com/m"}),
            "b": remote("http://127.0.0.1:1/sse", "sse"),
        }
    )
    with pytest.raises(ConfigError) as info:
        load_config(kxen_home.path, ws)
    assert sorted(info.value.problems) == sorted(
        [
            f"{servers}: mcpServers.a.url: {NOT_HTTPS}",
            f"{servers}: mcpServers.a.oauth.authorizationServerMetadataUrl: {NOT_HTTPS}",
            f"{servers}: mcpServers.b.url: {NEEDS_LOOPBACK_SETTING}",
        ]
    )


@pytest.mark.parametrize(
    ("url", "allow"),
    [
        ("https://mcp.example.com/mcp", False),
        ("https://mcp.example.com:8443/a/b?x=1", False),
        ("http://127.0.0.1:8080/mcp", True),
        ("http://127.1.2.3:8080/mcp", True),
        ("http://localhost:8080/mcp", True),
        ("http://LOCALHOST:8080/mcp", True),
        ("http://[::1]:8080/mcp", True),
    ],
)
def test_good_remote_urls_load(kxen_home, ws, url, allow):
    kxen_home.write_settings(loopback_settings(allow))
    kxen_home.write_servers({"r": remote(url), "s": remote(url, "sse")})
    config = load_config(kxen_home.path, ws)
    assert config.servers["r"].url == url and config.servers["s"].is_remote


def test_project_url_rules_follow_the_users_settings(kxen_home, ws):
    """A project entry gets the same URL rules, judged by the user's settings; its file is rejected
    whole (the user's servers still load)."""
    kxen_home.write_settings(f"trusted_workspaces = [{json.dumps(str(ws.resolve()))}]\n")
    kxen_home.write_servers({"mine": remote("https://mcp.example.com/mcp")})
    pfile = write_project(
        ws,
        {
            "mcpServers": {
                "loop": {"url": "http://127.0.0.1:8080/mcp"},
                "plain": {"url": "http://example.com/sse", "transport": "sse"},
            }
        },
    )
    config = load_config(kxen_home.path, ws)
    assert set(config.servers) == {"mine"}
    assert sorted(config.project_problems) == sorted(
        [f"{pfile}: mcpServers.loop.url: {NEEDS_LOOPBACK_SETTING}", f"{pfile}: mcpServers.plain.url: {NOT_HTTPS}"]
    )


# --- 6. privacy: no roots for remote servers ------------------------------------------------------------


@pytest.mark.peer
@pytest.mark.parametrize("mode", ["stateful", "json", "sse"])
async def test_remote_server_gets_no_roots(kxen_home, ws, peers, mode):
    """The SDK tool asks kxen for its roots (``roots/list``) and reports what the client declared."""
    url, kind = peers.sdk(mode)
    kxen_home.write_settings(REMOTE_ON)
    kxen_home.write_servers({"r": remote(url, kind)})
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("r__roots", {})
    assert not result.get("isError"), result
    text = text_of(result)
    seen = json.loads(text)
    assert seen["error"] is None
    assert seen["roots"] == []  # kxen answered roots/list with an empty list
    assert "roots" not in (seen["capabilities"] or {})  # and declared no roots capability
    assert str(ws) not in text and ws.name not in text


@pytest.mark.peer
async def test_everything_sees_no_roots_capability(kxen_home, ws, peers):
    """server-everything registers ``get-roots-list`` only for a client that declared roots."""
    url, kind = peers.everything("streamableHttp")
    kxen_home.write_settings(REMOTE_ON)
    kxen_home.write_servers({"r": remote(url, kind)})
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
        names = {t["name"] for t in rt.tools("r")}
        assert "echo" in names
        assert "get-roots-list" not in names


async def test_remote_requests_never_carry_the_workspace(kxen_home, ws):
    async with local_http(streamable_responder("never", 500, False)) as server:
        kxen_home.write_settings(REMOTE_ON)
        kxen_home.write_servers({"r": remote(f"{server.base}/mcp")})
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
            assert status_of(rt, "r")["state"] == "ready"
            with anyio.fail_after(WAIT):
                assert text_of(await rt.call_tool("r__ping_tool", {})) == "pong"
        initialize = next(json.loads(r.body) for r in server.requests if r.body and b'"initialize"' in r.body)
        assert initialize["params"]["capabilities"] == {}
        for raw in server.raw:
            assert str(ws).encode() not in raw and ws.name.encode() not in raw


# --- 7. remote catalog validation --------------------------------------------------------------------------


CATALOG_LIMITS = "\n[mcp.remote_catalog]\nmax_description_chars = 100\n"


@pytest.mark.peer
@pytest.mark.parametrize("mode", ["stateful", "sse"])
async def test_remote_catalog_rejects_bad_tools_keeps_good_ones(kxen_home, ws, peers, mode):
    url, kind = peers.sdk(mode, "--bad-tools")
    kxen_home.write_settings(REMOTE_ON + CATALOG_LIMITS)
    kxen_home.write_servers({"r": remote(url, kind)})
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert s["state"] == "ready"
        assert {t["name"] for t in rt.tools("r")} == SDK_TOOLS
        assert s["tools"] == len(SDK_TOOLS)
        diags = "\n".join(s["diagnostics"])
        assert "item 'bad.name' rejected by kxen.remote-catalog: tool names must match ^[A-Za-z0-9_-]{1,64}$" in diags
        assert "item 'remote_ref' rejected by kxen.remote-catalog: inputSchema has a non-local $ref" in diags
        assert "item 'wordy' rejected by kxen.remote-catalog: description is longer than 100 characters" in diags
        with anyio.fail_after(WAIT):
            assert (await rt.call_tool("r__add", {"a": 1, "b": 2}))["structuredContent"] == {"result": 3}
        for bad in ("bad.name", "remote_ref", "wordy"):
            with pytest.raises(UnknownTool):
                await rt.call_tool(bad, {}, server="r")


def deep_schema(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"x": node}}
    return node


#: (tool definition, the rule its rejection names, or None when it must be kept)
CATALOG_ITEMS: list[tuple[dict[str, Any], str | None]] = [
    ({"name": "ok_tool", "description": "fine", "inputSchema": {"type": "object"}}, None),
    ({"name": "a" * 64, "inputSchema": {"type": "object"}}, None),
    ({"name": "local-ref", "inputSchema": {"type": "object", "$defs": {"s": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/s"}}}}, None),
    ({"name": "b" * 65, "inputSchema": {"type": "object"}}, "tool names must match ^[A-Za-z0-9_-]{1,64}$"),
    ({"name": "has space", "inputSchema": {"type": "object"}}, "tool names must match ^[A-Za-z0-9_-]{1,64}$"),
    ({"name": "dotted.name", "inputSchema": {"type": "object"}}, "tool names must match ^[A-Za-z0-9_-]{1,64}$"),
    ({"name": "long_desc", "description": "d" * 101, "inputSchema": {"type": "object"}}, "description is longer than 100 characters"),
    ({"name": "no_schema"}, "inputSchema must be an object"),
    ({"name": "array_schema", "inputSchema": {"type": "array"}}, 'inputSchema must be an object schema ("type": "object")'),
    ({"name": "big_schema", "inputSchema": {"type": "object", "description": "x" * 2000}}, "inputSchema is larger than 1024 bytes"),
    ({"name": "deep_schema", "inputSchema": deep_schema(12)}, "inputSchema nests deeper than 8"),
    ({"name": "remote_ref", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "https://evil.example/s.json"}}}}, "inputSchema has a non-local $ref"),
    ({"name": "relative_ref", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "other.json#/a"}}}}, "inputSchema has a non-local $ref"),
    ({"name": "dynamic_ref", "inputSchema": {"type": "object", "items": [{"$dynamicRef": "https://evil.example/s"}]}}, "inputSchema has a non-local $dynamicRef"),
]
MOCK_LIMITS = "\n[mcp.remote_catalog]\nmax_description_chars = 100\nmax_schema_bytes = 1024\nmax_schema_depth = 8\n"


def mock_mcp(tools: list[dict[str, Any]]) -> httpx.MockTransport:
    """Streamable HTTP with JSON answers, served by httpx.MockTransport (no network)."""

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method != "POST":
            return httpx.Response(405)
        message = json.loads(request.content)
        if "id" not in message or "method" not in message:
            return httpx.Response(202)
        method = message["method"]
        result = {"tools": tools} if method == "tools/list" else mcp_result(method, message.get("params") or {})
        if method == "tools/call":
            result = text_result(f"called {message['params']['name']}")
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "result": result})

    return httpx.MockTransport(handle)


async def test_remote_catalog_rules_item_by_item(kxen_home, ws, fakes, monkeypatch):
    """Every rule through the http plugin's injectable transport; the bounds come from
    ``[mcp.remote_catalog]``; a local (memory) server with the same items keeps them all."""
    from kxen_transport_http import streamable

    tools = [item for item, _ in CATALOG_ITEMS]
    monkeypatch.setattr(streamable, "transport_factory", lambda server: mock_mcp(tools))
    fakes.add("local", tools={}, tool_defs=tools)
    kxen_home.write_settings(REMOTE_ON + MOCK_LIMITS)
    kxen_home.write_servers({"r": remote("https://mcp.example.test/mcp"), "local": mem("local", defaultToolPolicy="allow")})
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert s["state"] == "ready"
        kept = {item["name"] for item, rule in CATALOG_ITEMS if rule is None}
        assert {t["name"] for t in rt.tools("r")} == kept
        assert s["tools"] == len(kept)
        for item, rule in CATALOG_ITEMS:
            if rule is None:
                continue
            name = item["name"]
            matching = [d for d in s["diagnostics"] if f"item {name[:80]!r} rejected" in d]
            assert len(matching) == 1, (name, s["diagnostics"])
            assert rule in matching[0], (rule, matching[0])
        with anyio.fail_after(WAIT):
            assert text_of(await rt.call_tool("r__local-ref", {})) == "called local-ref"
        # the remote rules are for remote servers: the same items from a local server are kept
        assert status_of(rt, "local")["tools"] == len(CATALOG_ITEMS)


# --- 8. header values never leak -----------------------------------------------------------------------------


SECRETS = {"Authorization": "Bearer tok-AAAA1111-very-secret", "X-Api-Key": "key-BBBB2222-very-secret"}


def texts_of_error(exc: BaseException) -> str:
    parts = ["".join(traceback.format_exception(exc)), repr(exc), repr(exc.args)]
    for attr in ("body", "data", "message", "reason", "error"):
        if hasattr(exc, attr):
            parts.append(repr(getattr(exc, attr)))
    return "\n".join(parts)


def assert_no_secret(where: str, text: str) -> None:
    for value in SECRETS.values():
        assert value not in text, f"a header value leaked into {where}: {text[:2000]}"


LEAK_CASES = [
    pytest.param("http", "initialize", 401, False, id="http-initialize-401-text"),
    pytest.param("http", "initialize", 500, True, id="http-initialize-500-jsonrpc"),
    pytest.param("http", "tools/call", 500, False, id="http-call-500-text"),
    pytest.param("http", "tools/call", 401, True, id="http-call-401-jsonrpc"),
    pytest.param("sse", "connect", 401, False, id="sse-connect-401-text"),
    pytest.param("sse", "initialize", 500, True, id="sse-initialize-500-jsonrpc"),
    pytest.param("sse", "tools/call", 500, False, id="sse-call-500-text"),
    pytest.param("sse", "tools/call", 401, True, id="sse-call-401-jsonrpc"),
]


@pytest.mark.parametrize(("kind", "fail_on", "status", "as_jsonrpc"), LEAK_CASES)
async def test_header_values_never_leak(kxen_home, ws, caplog, kind, fail_on, status, as_jsonrpc):
    caplog.set_level(logging.DEBUG)
    responder = (streamable_responder if kind == "http" else legacy_sse_responder)(fail_on, status, as_jsonrpc)
    async with local_http(responder) as server:
        kxen_home.write_settings(REMOTE_ON)
        path = "/mcp" if kind == "http" else "/sse"
        kxen_home.write_servers({"r": remote(f"{server.base}{path}", kind, headers=SECRETS)})
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
            # the server did get the headers, and echoed them back
            assert any(r.headers.get("x-api-key") == SECRETS["X-Api-Key"] for r in server.requests)
            s = status_of(rt, "r")
            if fail_on == "tools/call":
                assert s["state"] == "ready"
                with anyio.fail_after(WAIT), pytest.raises(KxenError) as info:
                    await rt.call_tool("r__ping_tool", {})
                assert isinstance(info.value, RemoteError if as_jsonrpc else HTTPStatusError)
                if isinstance(info.value, HTTPStatusError):
                    assert info.value.status == status
                else:
                    assert info.value.code == -32001
            else:
                assert s["state"] == "failed" and s["phase"] in ("transport", "initialize")
                assert s["error"]
                with pytest.raises(ServerNotReady) as info:
                    await rt.call_tool("r__ping_tool", {})
            assert_no_secret("the error", texts_of_error(info.value))
            assert_no_secret("status()", json.dumps(rt.status()))
            assert_no_secret("status() of every server", repr(rt.status()))
    assert_no_secret("the log", caplog.text)


# --- known bugs, pinned down (strict xfail) ------------------------------------------------------------------


def cancel_answering_responder(cancel_delay: float, answer_cancel: bool) -> Responder:
    """Streamable HTTP; a tools/call is answered on an SSE stream that stays open (a slow tool).
    A notifications/cancelled is answered, like the Python SDK does, with a -32800 error for the
    cancelled request on its stream (if ``answer_cancel``), and its own POST gets 202 only after
    ``cancel_delay`` seconds."""
    streams: dict[Any, Any] = {}
    channels: list[Any] = []

    async def respond(request: Request) -> Response:
        if request.method == "GET":
            return Response(405)
        if request.method == "DELETE":
            return Response(200)
        message = json.loads(request.body)
        method = message.get("method")
        if method == "notifications/cancelled":
            rid = message["params"]["requestId"]
            if answer_cancel and rid in streams:
                error = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32800, "message": "Request cancelled"}}
                await streams[rid].send(f"event: message\ndata: {json.dumps(error)}\n\n".encode())
            await anyio.sleep(cancel_delay)
            return Response(202)
        if "id" not in message or method is None:
            return Response(202)
        if method == "tools/call":
            send, receive = anyio.create_memory_object_stream[bytes](10)
            channels.extend((send, receive))
            streams[message["id"]] = send

            async def stream() -> AsyncIterator[bytes]:
                async for chunk in receive:
                    yield chunk

            return Response(200, stream=stream)
        result = mcp_result(method, message.get("params") or {})
        return Response(200, json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode(), "application/json")

    def close() -> None:
        for channel in channels:
            channel.close()

    respond.close = close  # type: ignore[attr-defined]
    respond.streams = streams  # type: ignore[attr-defined]
    return respond


SESSION_ACLOSE_BUG = (
    "kxen_core/session.py Session.aclose: it awaits _send_cancelled() for every pending request before "
    "_fail_all(ClosedError); meanwhile a reply (the server's answer to the cancellation) completes the call, "
    "and each cancel send may take CANCEL_SEND_SECONDS before anyone is woken"
)


async def test_stopping_wakes_pending_calls_with_closed_error(kxen_home, ws):
    """Turning remote off while a call is pending: the call must fail with ClosedError even when the
    server answers the cancellation kxen sends on the way out (as the Python SDK does, -32800)."""
    responder = cancel_answering_responder(cancel_delay=0.3, answer_cancel=True)
    async with local_http(responder) as server:
        kxen_home.write_settings(REMOTE_ON)
        kxen_home.write_servers({"r": remote(f"{server.base}/mcp")})
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
            errors: list[BaseException] = []

            async def call() -> None:
                try:
                    await rt.call_tool("r__ping_tool", {})
                except KxenError as exc:
                    errors.append(exc)

            with anyio.fail_after(WAIT):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    await until(lambda: len(responder.streams) == 1)  # type: ignore[attr-defined]
                    await rt.set_remote_enabled(False)
            assert status_of(rt, "r")["state"] == "disabled"
    (error,) = errors
    assert isinstance(error, ClosedError), repr(error)


async def test_stopping_wakes_every_pending_call_at_once(kxen_home, ws):
    """A server slow to accept the cancellations must not delay waking the pending calls: with
    three calls pending, all fail within a second of turning remote off, not one second each."""
    responder = cancel_answering_responder(cancel_delay=5, answer_cancel=False)
    async with local_http(responder) as server:
        kxen_home.write_settings(REMOTE_ON)
        kxen_home.write_servers({"r": remote(f"{server.base}/mcp")})
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
            woken: list[float] = []

            async def call() -> None:
                with pytest.raises(ClosedError):
                    await rt.call_tool("r__ping_tool", {})
                woken.append(anyio.current_time())

            with anyio.fail_after(WAIT):
                async with anyio.create_task_group() as tg:
                    for _ in range(3):
                        tg.start_soon(call)
                    await until(lambda: len(responder.streams) == 3)  # type: ignore[attr-defined]
                    started = anyio.current_time()
                    tg.start_soon(rt.set_remote_enabled, False)
            assert len(woken) == 3
            assert max(woken) - started < 1.0, [round(t - started, 2) for t in woken]


REDACT_TOKEN_BUG = (
    "plugins/transport_http/src/kxen_transport_http/common.py Redactor.remember: only whole header values "
    "are scrubbed, so the credential of 'Bearer <token>' echoed without its scheme stays in errors"
)


async def test_a_bearer_token_echoed_without_its_scheme_never_leaks(kxen_home, ws):
    token = "tok-CCCC3333-very-secret"

    async def respond(request: Request) -> Response:
        if request.method == "GET":
            return Response(405)
        got = request.headers.get("authorization", "").partition(" ")[2]
        return Response(401, f"invalid token {got}".encode())

    async with local_http(respond) as server:
        kxen_home.write_settings(REMOTE_ON)
        kxen_home.write_servers({"r": remote(f"{server.base}/mcp", headers={"Authorization": f"Bearer {token}"})})
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
            assert status_of(rt, "r")["state"] == "failed"
            assert token not in json.dumps(rt.status())


HEADER_VALUE_BUG = (
    "kxen_core/config/models.py check_server_shape accepts header values with control characters; h11 then "
    "fails with 'Illegal header value b\"...\\n\"' whose escaped repr the transport's Redactor does not match"
)


async def test_a_header_value_with_a_newline_never_leaks(kxen_home, ws):
    """A pasted token with a trailing newline: refused at load time, or at least never shown."""
    secret = "Bearer tok-DDDD4444-very-secret\n"
    async with local_http(streamable_responder("never", 500, False)) as server:
        kxen_home.write_settings(REMOTE_ON)
        kxen_home.write_servers({"r": remote(f"{server.base}/mcp", headers={"Authorization": secret})})
        try:
            async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
                shown = json.dumps(rt.status())
        except ConfigError as exc:
            shown = str(exc)
            assert "mcpServers.r.headers.Authorization" in shown
    assert "tok-DDDD4444-very-secret" not in shown


OFF_SWITCH_BUG = (
    "kxen_core/runtime.py Runtime.set_remote_enabled: writes remote_enabled = false, then reload() raises "
    "ConfigError on any unrelated user-config problem before _replace(), so the running remote servers are "
    "never stopped; turning remote off must stop them even when the rest of the config cannot be loaded"
)


async def test_turning_remote_off_stops_remote_servers_even_with_a_config_problem(kxen_home, ws):
    async with local_http(streamable_responder("never", 500, False)) as server:
        kxen_home.write_settings(REMOTE_ON)
        kxen_home.write_servers({"r": remote(f"{server.base}/mcp")})
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
            assert status_of(rt, "r")["state"] == "ready"
            # meanwhile the user made a typo in another entry
            kxen_home.write_servers({"r": remote(f"{server.base}/mcp"), "typo": {"comand": "x"}})
            with anyio.fail_after(WAIT):
                try:
                    await rt.set_remote_enabled(False)
                except ConfigError:
                    pass  # reporting the typo is fine; leaving remote running is not
            assert "remote_enabled = false" in (kxen_home.path / "config.toml").read_text()
            assert status_of(rt, "r")["state"] != "ready"
            with pytest.raises(ServerNotReady):
                await rt.call_tool("r__ping_tool", {})


ALREADY_ON_BUG = (
    "kxen_core/runtime.py Runtime.set_remote_enabled(True) asks for approval even when remote MCP is already "
    "on, and a missing channel raises ApprovalDenied('remote MCP stays off') while remote servers run"
)


async def test_turning_remote_on_when_it_is_on_is_a_no_op(kxen_home, ws):
    async with local_http(streamable_responder("never", 500, False)) as server:
        kxen_home.write_settings(REMOTE_ON)
        kxen_home.write_servers({"r": remote(f"{server.base}/mcp")})
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:  # no approval channel
            with anyio.fail_after(WAIT):
                assert await rt.set_remote_enabled(True) is True
            assert status_of(rt, "r")["state"] == "ready"

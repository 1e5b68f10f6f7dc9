"""Both protocol eras against real peers: the official Python SDK server (``mcp`` 2.3.0 speaks both
on one endpoint) over stdio and Streamable HTTP, probed (``auto``: the stateless era) and pinned to
the handshake era, must behave the same; server-everything (handshake era only) answers the probe
with an error and kxen falls back to ``initialize``. The fakes' version: tests/test_era.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from kxen_testing import running
from remote_support import (
    REMOTE_PLUGINS,
    SDK_TOOLS,
    WAIT,
    Request,
    Response,
    local_http,
    remote,
    remote_on,
    status_of,
    text_of,
)

from kxen_core.errors import InvalidArguments, RequestTimeout

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
SDK_SERVER = Path(__file__).parent / "peers" / "sdk_server.py"
STDIO_PLUGINS = ("stdio",)


def sdk_stdio(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(SDK_SERVER), "stdio"], "defaultToolPolicy": "allow", **extra}


def era_entry(entry: dict[str, Any], era: str) -> dict[str, Any]:
    return entry if era == "auto" else {**entry, "protocolEra": era}


async def same_behaviour(rt: Any, name: str) -> None:
    """What a host sees of the SDK server, whatever the era: its catalog, results, errors, a timeout
    that cancels the call and leaves the server ready, concurrent calls."""
    assert {t["name"] for t in rt.tools(name)} == SDK_TOOLS
    with anyio.fail_after(WAIT):
        summed = await rt.call_tool(f"{name}__add", {"a": 2, "b": 40})
        echoed = await rt.call_tool(f"{name}__echo", {"text": "hé 👋"})
        failed = await rt.call_tool(f"{name}__boom", {})
    assert text_of(summed) == "42" and summed["structuredContent"] == {"result": 42}
    assert text_of(echoed) == "hé 👋" and not echoed.get("isError")
    assert failed.get("isError") is True and "boom" in text_of(failed)
    with pytest.raises(RequestTimeout):
        await rt.call_tool(f"{name}__slow", {"seconds": 30}, timeout=0.5)
    results: dict[int, str] = {}

    async def call(i: int) -> None:
        results[i] = text_of(await rt.call_tool(f"{name}__add", {"a": i, "b": 1000}))

    with anyio.fail_after(WAIT):
        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon(call, i)
    assert results == {i: str(1000 + i) for i in range(6)}
    assert status_of(rt, name)["state"] == "ready"


@pytest.mark.peer
@pytest.mark.parametrize("era, expect", [("auto", ("modern", MODERN)), ("legacy", ("legacy", "2025-11-25"))])
async def test_sdk_stdio_in_both_eras(kxen_home, ws, era, expect):
    kxen_home.write_servers({"p": era_entry(sdk_stdio(), era)})
    async with running(kxen_home, ws, allow=STDIO_PLUGINS, wait=WAIT) as rt:
        row = status_of(rt, "p")
        assert (row["state"], row["era"], row["protocolVersion"]) == ("ready", *expect)
        await same_behaviour(rt, "p")


@pytest.mark.peer
@pytest.mark.parametrize("mode", ["stateful", "json", "stateless"])
@pytest.mark.parametrize(
    "era, expect", [("auto", ("modern", MODERN)), ("modern", ("modern", MODERN)), ("legacy", ("legacy", "2025-11-25"))]
)
async def test_sdk_streamable_http_in_both_eras(kxen_home, ws, peers, mode, era, expect):
    url, kind = peers.sdk(mode)
    kxen_home.write_settings(remote_on(url))
    kxen_home.write_servers({"r": era_entry(remote(url, kind), era)})
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS, wait=WAIT) as rt:
        row = status_of(rt, "r")
        assert (row["state"], row["era"], row["protocolVersion"]) == ("ready", *expect)
        assert row["transportInfo"]["session"] is (expect[0] == "legacy" and mode != "stateless")
        await same_behaviour(rt, "r")


@pytest.mark.peer
@pytest.mark.parametrize("transport", ["stdio", "streamableHttp"])
async def test_everything_is_probed_and_falls_back_to_initialize(kxen_home, ws, peers, everything_js, transport):
    if transport == "stdio":
        kxen_home.write_servers(
            {"e": {"command": "node", "args": [everything_js, "stdio"], "defaultToolPolicy": "allow"}}
        )
        allow: tuple[str, ...] = STDIO_PLUGINS
    else:
        url, kind = peers.everything("streamableHttp")
        kxen_home.write_settings(remote_on(url))
        kxen_home.write_servers({"e": remote(url, kind)})
        allow = REMOTE_PLUGINS
    async with running(kxen_home, ws, allow=allow, wait=WAIT) as rt:
        row = status_of(rt, "e")
        assert (row["state"], row["era"], row["protocolVersion"]) == ("ready", "legacy", "2025-11-25")
        assert rt.servers["e"].session.era_note.startswith("server/discover: error")
        with anyio.fail_after(WAIT):
            summed = await rt.call_tool("e__get-sum", {"a": 2, "b": 40})
        assert "42" in text_of(summed)


@pytest.mark.peer
async def test_everything_pinned_modern_fails_with_its_answer(kxen_home, ws, peers):
    url, kind = peers.everything("streamableHttp")
    kxen_home.write_settings(remote_on(url))
    kxen_home.write_servers({"e": remote(url, kind, protocolEra="modern")})
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS, wait=WAIT) as rt:
        row = status_of(rt, "e")
        assert (row["state"], row["phase"]) in {("failed", "initialize")}
        assert "server/discover" in row["error"] and "-32000" in row["error"]


@pytest.mark.peer
@pytest.mark.parametrize("mode", ["stateful", "json"])
async def test_the_stateless_era_declares_no_roots_to_a_remote_server(kxen_home, ws, peers, mode):
    """The SDK tool reports the capabilities kxen declared in ``_meta`` (no ``roots`` for a remote
    server); a stateless-era server has no way to ask the client mid-call but input-required."""
    url, kind = peers.sdk(mode)
    kxen_home.write_settings(remote_on(url))
    kxen_home.write_servers({"r": remote(url, kind)})
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS, wait=WAIT) as rt:
        assert status_of(rt, "r")["era"] == "modern"
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("r__roots", {})
    seen = json.loads(text_of(result))
    assert seen["capabilities"] == {} and seen["roots"] is None
    assert str(ws) not in text_of(result)


async def test_a_remote_endpoint_is_probed_once_per_runtime(kxen_home, ws):
    """A restart (a new connection to the same endpoint) sends no second probe: the era is known."""

    async def respond(request: Request) -> Response:
        if request.method != "POST":
            return Response(405)
        message = json.loads(request.body)
        if "id" not in message:
            return Response(202)
        method, rid = message["method"], message["id"]
        if method == "server/discover":
            error = {"code": -32601, "message": "Method not found"}
            return Response(200, json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode(), "application/json")
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "x"},
            }
        else:
            result = {"tools": []}
        return Response(200, json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode(), "application/json")

    async with local_http(respond) as server:
        kxen_home.write_settings(remote_on(f"{server.base}/mcp"))
        kxen_home.write_servers({"r": remote(f"{server.base}/mcp")})
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS, wait=WAIT) as rt:
            assert status_of(rt, "r")["era"] == "legacy"
            await rt.restart("r")
            with anyio.fail_after(WAIT):
                assert await rt.wait_ready()
            assert status_of(rt, "r")["state"] == "ready"
        methods = [json.loads(r.body).get("method") for r in server.requests if r.method == "POST"]
    assert methods.count("server/discover") == 1
    assert methods.count("initialize") == 2


@pytest.mark.peer
@pytest.mark.parametrize("mode", ["stateless", "json"])
async def test_sdk_mirrored_headers_are_checked_by_the_server_and_bounded_by_kxen(kxen_home, ws, peers, mode):
    """The SDK server's ``tag`` mirrors ``region`` into ``Mcp-Param-Region`` and checks it against
    the body (the scripted twin: plugins/transport_http/tests/test_http_header_bounds.py). A region the
    header can carry is mirrored and accepted; 120,000 characters is over kxen's bound: the call
    fails before it is sent (the server would have answered 431) with the header, the size and the
    option named, and the server stays ready."""
    url, kind = peers.sdk(mode, "--header-tool")
    kxen_home.write_settings(remote_on(url))
    kxen_home.write_servers({"r": remote(url, kind)})
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS, wait=WAIT) as rt:
        assert status_of(rt, "r")["era"] == "modern"
        with anyio.fail_after(WAIT):
            fine = await rt.call_tool("r__tag", {"region": "eu-west-1 ✓"})  # not ASCII: sent in base64
            with pytest.raises(InvalidArguments) as refused:
                await rt.call_tool("r__tag", {"region": "r" * 120_000})
            again = await rt.call_tool("r__tag", {"region": "a" * 4000})
        assert status_of(rt, "r")["state"] == "ready"
    assert text_of(fine) == "region of 11 characters" and not fine.get("isError"), fine
    assert "a 120,000-byte Mcp-Param-Region header" in str(refused.value)
    assert "options.maxHeaderValueBytes of server 'r'" in str(refused.value)
    assert text_of(again) == "region of 4000 characters", again

"""Remote MCP against real peers (the official Python SDK server over every HTTP transport, and
server-everything), and privacy: a remote server gets no roots and never sees the workspace."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import attrs
import pytest
from kxen_testing import running
from remote_support import (
    REMOTE_PLUGINS,
    SDK_TOOLS,
    WAIT,
    Peers,
    local_http,
    remote,
    remote_on,
    status_of,
    streamable_responder,
    text_of,
)

pytestmark = pytest.mark.anyio


# --- remote on: real peers -----------------------------------------------------------------------


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


@pytest.mark.peer
@pytest.mark.parametrize("which", REAL_PEERS)
async def test_remote_on_real_peer(kxen_home, ws, peers, which):
    (url, kind), profile = start_peer(peers, which)
    kxen_home.write_settings(remote_on(url))
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


# --- privacy: no roots for remote servers ------------------------------------------------------------


@pytest.mark.peer
@pytest.mark.parametrize("mode", ["stateful", "json", "sse"])
async def test_remote_server_gets_no_roots(kxen_home, ws, peers, mode):
    """The SDK tool asks kxen for its roots (``roots/list``) and reports what the client declared.
    A server request needs the handshake era (the stateless era's twin: test_era_peers.py)."""
    url, kind = peers.sdk(mode)
    kxen_home.write_settings(remote_on(url))
    kxen_home.write_servers({"r": remote(url, kind, protocolEra="legacy")})
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("r__roots", {})
    assert not result.get("isError"), result
    text = text_of(result)
    seen = json.loads(text)
    assert seen["roots"] is None  # roots was not declared: roots/list is a method kxen does not offer
    assert "-32601" in seen["error"] or "Method not found" in seen["error"], seen["error"]
    assert "roots" not in (seen["capabilities"] or {})  # and declared no roots capability
    assert str(ws) not in text and ws.name not in text


@pytest.mark.peer
async def test_everything_sees_no_roots_capability(kxen_home, ws, peers):
    """server-everything registers ``get-roots-list`` only for a client that declared roots."""
    url, kind = peers.everything("streamableHttp")
    kxen_home.write_settings(remote_on(url))
    kxen_home.write_servers({"r": remote(url, kind)})
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
        names = {t["name"] for t in rt.tools("r")}
        assert "echo" in names
        assert "get-roots-list" not in names


async def test_remote_requests_never_carry_the_workspace(kxen_home, ws):
    async with local_http(streamable_responder("never", 500, False)) as server:
        kxen_home.write_settings(remote_on(f"{server.base}/mcp"))
        kxen_home.write_servers({"r": remote(f"{server.base}/mcp")})
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
            assert status_of(rt, "r")["state"] == "ready"
            with anyio.fail_after(WAIT):
                assert text_of(await rt.call_tool("r__ping_tool", {})) == "pong"
        initialize = next(json.loads(r.body) for r in server.requests if r.body and b'"initialize"' in r.body)
        assert initialize["params"]["capabilities"] == {}
        for raw in server.raw:
            assert str(ws).encode() not in raw and ws.name.encode() not in raw

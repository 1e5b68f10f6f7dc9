"""Tool catalogs and server traffic against real peers over stdio: server-everything (node) and the
official Python SDK server (tests/peers/sdk_server.py). The fake-server twins are in
tests/test_server_traffic.py and tests/test_tool_output.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from kxen_testing import Answers, running

from kxen_core.protocol.progress import Progress

pytestmark = [pytest.mark.anyio, pytest.mark.peer]

WAIT = 60
STDIO = ("stdio", "memory")
SDK_SERVER = Path(__file__).parent / "peers" / "sdk_server.py"
#: what kxen declares to a local server without sampling or elicitation handlers
PLAIN_CAPS = {"roots": {"listChanged": False}}


async def until(predicate: Any, timeout: float = WAIT) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.02)


def raw_tools(argv: list[str], capabilities: dict[str, Any]) -> list[dict[str, Any]]:
    """``tools/list`` as a minimal client of our own sees it: initialize, initialized, list, stop."""
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    ) as proc:
        watchdog = threading.Timer(WAIT, proc.kill)  # bounded: a silent server is killed, reads end
        watchdog.start()
        try:
            assert proc.stdin is not None and proc.stdout is not None

            def send(message: dict[str, Any]) -> None:
                proc.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]

            send(lines[0])
            for _ in range(1000):  # initialize's answer (then the rest), notifications, requests, the list
                line = proc.stdout.readline()
                if not line:
                    break
                message = json.loads(line)
                if message.get("id") == 1 and "method" not in message:
                    send(lines[1])
                    send(lines[2])
                if message.get("id") == 2 and "method" not in message:
                    return message["result"]["tools"]
            raise AssertionError("no tools/list answer")
        finally:
            watchdog.cancel()
            proc.kill()


def as_sent(tool: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in tool.items() if k not in ("server", "qualifiedName", "policy")}  # what kxen adds


@pytest.fixture
def everything(everything_js: str) -> dict[str, Any]:
    return {
        "command": "node",
        "args": [everything_js, "stdio"],
        "defaultToolPolicy": "allow",
        "timeouts": {"requestSeconds": 30},
    }


async def test_everything_tools_keep_what_the_server_sent(kxen_home, tmp_path, everything):
    raw = raw_tools([everything["command"], *everything["args"]], PLAIN_CAPS)
    assert any("outputSchema" in t for t in raw) and all("title" in t and "annotations" in t for t in raw)
    async with running(kxen_home, tmp_path, servers={"ev": everything}, allow=STDIO, wait=WAIT) as rt:
        await until(lambda: {t["name"] for t in raw} <= {t["name"] for t in rt.tools("ev")})
        mine = {t["name"]: t for t in rt.tools("ev")}
        for tool in raw:
            assert as_sent(mine[tool["name"]]) == tool, tool["name"]
            assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", mine[tool["name"]]["qualifiedName"])
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("ev__get-structured-content", {"location": "Chicago"})
        assert not result.get("isError") and result["structuredContent"], result  # it matches its outputSchema


async def test_everything_progress_reaches_the_callback(kxen_home, tmp_path, everything):
    seen: list[Progress] = []
    async with running(kxen_home, tmp_path, servers={"ev": everything}, allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            result = await rt.call_tool(
                "ev__trigger-long-running-operation", {"duration": 1, "steps": 4}, on_progress=seen.append
            )
    assert not result.get("isError"), result
    assert seen and seen[-1].progress == 4 and seen[-1].total == 4
    assert [p.progress for p in seen] == sorted({p.progress for p in seen})


def fill(request: Any) -> dict[str, Any]:
    """An elicitation answer built from the requested schema (the everything server checks it)."""
    content: dict[str, Any] = {}
    for key, prop in request.requested_schema.get("properties", {}).items():
        if prop.get("type") == "string" and "enum" not in prop and "oneOf" not in prop and "format" not in prop:
            content[key] = "Kxen Tester" if key == "name" else "text"
        elif prop.get("type") == "boolean":
            content[key] = True
    return {"action": "accept", "content": content}


SAMPLED = {
    "role": "assistant",
    "content": {"type": "text", "text": "sampled by the kxen host"},
    "model": "kxen-test-model",
    "stopReason": "endTurn",
}


async def test_everything_burst_ends_with_the_full_set_and_the_hooks_answer(kxen_home, tmp_path, everything):
    """With sampling and elicitation handlers the server registers more tools after initialize and
    says so with a burst of list_changed: the catalog ends with all of them, and its sampling and
    elicitation tools get the handlers' answers."""
    answers = Answers(sampling=SAMPLED, elicitation=fill)
    wanted = {"get-roots-list", "trigger-sampling-request", "trigger-elicitation-request", "simulate-research-query"}
    async with running(kxen_home, tmp_path, answers, servers={"ev": everything}, allow=STDIO, wait=WAIT) as rt:
        await until(lambda: wanted <= {t["name"] for t in rt.tools("ev")})
        # the full set: what any client is offered (a raw one declaring nothing) plus the tools for
        # what kxen declared, and nothing else
        plain = {t["name"] for t in raw_tools([everything["command"], *everything["args"]], {})}
        assert {t["name"] for t in rt.tools("ev")} == plain | wanted
        with anyio.fail_after(WAIT):
            sampled = await rt.call_tool("ev__trigger-sampling-request", {"prompt": "hello", "maxTokens": 5})
            elicited = await rt.call_tool("ev__trigger-elicitation-request", {})
    assert "sampled by the kxen host" in sampled["content"][0]["text"], sampled
    assert "Kxen Tester" in json.dumps(elicited), elicited
    sampling, elicitation = answers.requests
    assert sampling.server == "ev" and "hello" in json.dumps(sampling.params["messages"])
    assert elicitation.message and "name" in elicitation.requested_schema["properties"]


async def test_everything_without_handlers_offers_no_sampling_and_a_passing_handler_declines(
    kxen_home, tmp_path, everything
):
    async with running(kxen_home, tmp_path, servers={"ev": everything}, allow=STDIO, wait=WAIT) as rt:
        await until(lambda: "get-roots-list" in {t["name"] for t in rt.tools("ev")})
        names = {t["name"] for t in rt.tools("ev")}
    assert not names & {"trigger-sampling-request", "trigger-elicitation-request"}  # nothing declared, nothing offered
    passing = Answers(sampling=None, elicitation=None)
    async with running(kxen_home, tmp_path, passing, servers={"ev": everything}, allow=STDIO, wait=WAIT) as rt:
        await until(lambda: "trigger-sampling-request" in {t["name"] for t in rt.tools("ev")})
        with anyio.fail_after(WAIT):
            sampled = await rt.call_tool("ev__trigger-sampling-request", {"prompt": "hello", "maxTokens": 5})
            elicited = await rt.call_tool("ev__trigger-elicitation-request", {})
    assert sampled.get("isError") is True and "declined" in json.dumps(sampled), sampled
    assert "decline" in json.dumps(elicited).lower(), elicited
    assert len(passing.requests) == 2


async def test_sdk_server_requests_undeclared_get_method_not_found_declared_keep_their_refusal(kxen_home, tmp_path):
    """The SDK server sends sampling and elicitation requests whatever kxen declared (the fake twin:
    test_server_traffic.py): undeclared, each gets JSON-RPC's -32601; declared with a hook that
    passes, each gets the revision's own refusal (-1 for sampling, a decline for elicitation)."""
    pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK (a dev dependency) is not installed")
    # server requests need the handshake era (the SDK speaks both; the stateless one has none)
    entry = {
        "command": sys.executable,
        "args": [str(SDK_SERVER), "stdio"],
        "defaultToolPolicy": "allow",
        "protocolEra": "legacy",
    }

    async def asked(rt: Any) -> dict[str, Any]:
        seen = {}
        with anyio.fail_after(WAIT):
            for method in ("sampling", "elicitation"):
                result = await rt.call_tool("sdk__ask_client", {"method": method})
                assert not result.get("isError"), result
                seen[method] = json.loads(result["content"][0]["text"])
        return seen

    async with running(kxen_home, tmp_path, servers={"sdk": entry}, allow=STDIO, wait=WAIT) as rt:
        undeclared = await asked(rt)
    for method, seen in undeclared.items():
        assert seen["result"] is None, seen
        assert seen["error"]["code"] == -32601, (method, seen)
    passing = Answers(sampling=None, elicitation=None)
    async with running(kxen_home, tmp_path, passing, servers={"sdk": entry}, allow=STDIO, wait=WAIT) as rt:
        declared = await asked(rt)
    assert declared["sampling"]["result"] is None and declared["sampling"]["error"]["code"] == -1
    assert declared["elicitation"] == {"result": {"action": "decline"}, "error": None}
    assert len(passing.requests) == 2


async def test_sdk_server_tool_with_an_output_schema(kxen_home, tmp_path):
    pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK (a dev dependency) is not installed")
    entry = {"command": sys.executable, "args": [str(SDK_SERVER), "stdio"], "defaultToolPolicy": "allow"}
    raw = {t["name"]: t for t in raw_tools([entry["command"], *entry["args"]], PLAIN_CAPS)}
    assert "outputSchema" in raw["add"]
    async with running(kxen_home, tmp_path, servers={"sdk": entry}, allow=STDIO, wait=WAIT) as rt:
        mine = {t["name"]: t for t in rt.tools("sdk")}
        with anyio.fail_after(WAIT):
            added = await rt.call_tool("sdk__add", {"a": 2, "b": 3})
    assert {name: as_sent(t) for name, t in mine.items()} == raw
    assert added["structuredContent"] == {"result": 5} and not added.get("isError")


NOISY = Path(__file__).parent / "hostile" / "noisy_server.py"


async def test_a_hostile_local_server_gets_item_rules_safe_names_and_bounded_floods(kxen_home, tmp_path):
    """Over stdio, like any local server: bad items are skipped one by one, every name the model
    sees is provider-safe, and floods of progress and 100 KB log messages stay bounded."""
    entry = {"command": sys.executable, "args": [str(NOISY), "20000", "2000"], "defaultToolPolicy": "allow"}
    seen: list[Progress] = []
    async with running(kxen_home, tmp_path, servers={"h": entry}, allow=STDIO, wait=WAIT) as rt:
        tools = {t["name"]: t for t in rt.tools("h")}
        assert set(tools) == {"flood", "dotted.name", "n" * 128}
        assert tools["flood"]["title"] == "Flood" and tools["flood"]["annotations"] == {"readOnlyHint": True}
        for t in tools.values():
            assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", t["qualifiedName"]), t["qualifiedName"]
        diags = "\n".join(rt.servers["h"].diagnostics)
        for bad, rule in [
            ("n" * 129, "tool names must match"),
            ("has space", "tool names must match"),
            ("emoji_\U0001f600", "tool names must match"),
            ("esc\x1b[2J", "tool names must match"),
            ("huge_description", "description is longer than 4096 characters"),
            ("remote_ref", "inputSchema has a non-local $ref"),
            ("array_schema", 'inputSchema must be an object schema ("type": "object")'),
        ]:
            assert f"item {bad[:80]!r} rejected by kxen.tool-catalog: {rule}" in diags, bad
        long_name = tools["n" * 128]["qualifiedName"]
        with anyio.fail_after(WAIT):
            assert (await rt.call_tool(long_name, {}))["content"][0]["text"] == "called " + "n" * 128
            flood = await rt.call_tool("h__flood", {}, on_progress=seen.append)
        assert flood["content"][0]["text"] == "called flood"
        server = rt.servers["h"]
        assert server.server_log.received >= 4000 and len(server.server_log.entries) == 100
        assert all(len(e["text"]) < 2100 for e in server.server_log.entries)
        assert server.progress.unmatched >= 200 and not server.progress._routes
        assert server.state == "ready"
    assert seen and seen[-1].progress == 20000 and len(seen) <= 20000


@pytest.mark.parametrize("mode", ["streamableHttp", "sse"])
async def test_everything_progress_over_http_transports(kxen_home, tmp_path, peers, mode):
    from remote_support import REMOTE_PLUGINS, remote, remote_on

    url, kind = peers.everything(mode)
    kxen_home.write_settings(remote_on(url))
    seen: list[Progress] = []
    async with running(kxen_home, tmp_path, servers={"ev": remote(url, kind)}, allow=REMOTE_PLUGINS, wait=WAIT) as rt:
        tools = {t["name"]: t for t in rt.tools("ev")}
        assert tools["echo"]["title"] == "Echo Tool" and tools["echo"]["annotations"]["readOnlyHint"] is True
        with anyio.fail_after(WAIT):
            result = await rt.call_tool(
                "ev__trigger-long-running-operation", {"duration": 1, "steps": 3}, on_progress=seen.append
            )
    assert not result.get("isError"), result
    assert seen and seen[-1].progress == 3 and seen[-1].total == 3


# --- the older server-everything (2025.9.25, pinned as server-everything-old) ------------------------


@pytest.fixture
def everything_old(npm_peers: Path) -> dict[str, Any]:
    script = npm_peers / "server-everything-old" / "dist" / "index.js"
    if not script.is_file():
        pytest.skip(f"{script} is missing (npm ci in tests/peers)")
    return {
        "command": "node",
        "args": [str(script), "stdio"],
        "defaultToolPolicy": "allow",
        "timeouts": {"requestSeconds": 30},
    }


async def outcome(rt: Any, name: str, args: dict[str, Any]) -> str:
    """A call's result or JSON-RPC error, as text (the older server turns a declined request into
    an error of the call)."""
    from kxen_core.errors import RemoteError

    with anyio.fail_after(WAIT):
        try:
            return json.dumps(await rt.call_tool(name, args))
        except RemoteError as exc:
            return f"RemoteError: {exc}"


async def test_everything_old_tools_progress_and_undeclared_sampling(kxen_home, tmp_path, everything_old):
    """Its ``sampleLLM`` sends ``sampling/createMessage`` whatever the client declared: without a
    sampling hook kxen declared none, so the request gets -32601, not a decline."""
    raw = raw_tools([everything_old["command"], *everything_old["args"]], PLAIN_CAPS)
    seen: list[Progress] = []
    async with running(kxen_home, tmp_path, servers={"old": everything_old}, allow=STDIO, wait=WAIT) as rt:
        mine = {t["name"]: t for t in rt.tools("old")}
        for tool in raw:
            assert as_sent(mine[tool["name"]]) == tool, tool["name"]
        assert "outputSchema" in mine["structuredContent"] and "startElicitation" not in mine
        with anyio.fail_after(WAIT):
            structured = await rt.call_tool("old__structuredContent", {"location": "Paris"})
            await rt.call_tool("old__longRunningOperation", {"duration": 1, "steps": 3}, on_progress=seen.append)
        assert not structured.get("isError") and structured["structuredContent"], structured
        refused = await outcome(rt, "old__sampleLLM", {"prompt": "hi", "maxTokens": 5})
    assert "-32601" in refused and "Method not found: sampling/createMessage" in refused, refused
    assert seen and seen[-1].progress == 3


async def test_everything_old_sampling_elicitation_and_subscription(kxen_home, tmp_path, everything_old):
    answers = Answers(
        sampling=SAMPLED, elicitation={"action": "accept", "content": {"color": "teal", "number": 7, "pets": "cats"}}
    )
    updates: list[str] = []
    async with running(kxen_home, tmp_path, answers, servers={"old": everything_old}, allow=STDIO, wait=WAIT) as rt:
        await until(lambda: "startElicitation" in {t["name"] for t in rt.tools("old")})
        sampled = await outcome(rt, "old__sampleLLM", {"prompt": "hi", "maxTokens": 5})
        elicited = await outcome(rt, "old__startElicitation", {})
        # it sends resources/updated for subscribed URIs on its own, every few seconds
        async with await rt.subscribe("old", "test://static/resource/1", updates.append):
            await until(lambda: updates)
    assert "sampled by the kxen host" in sampled, sampled
    assert "teal" in elicited and "cats" in elicited, elicited
    assert updates[0] == "test://static/resource/1"

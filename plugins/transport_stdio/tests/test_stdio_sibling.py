"""A server run as ``python /path/server.py`` imports its sibling modules, and its environment is
exactly the documented one: the host allowlist plus the entry's ``env``, no interpreter switch.

The servers here live outside the workspace (the common layout: ``~/mcp/weather/server.py`` with
its ``helper.py`` next to it), so nothing of them is the workspace's and no approval is needed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from kxen_testing import running
from kxen_transport_stdio import ENV_PASSTHROUGH
from stdio_support import STDIO

from kxen_core.cli import command as cli

#: a 30-line stdlib MCP server whose tools come from its sibling module
SERVER = r"""
import json, os, sys
from helper import forecast

TOOLS = [{"name": n, "inputSchema": {"type": "object"}} for n in ("forecast", "environ")]

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

for line in sys.stdin:
    msg = json.loads(line)
    rid, method = msg.get("id"), msg.get("method")
    if rid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": msg["params"]["protocolVersion"],
              "capabilities": {"tools": {}}, "serverInfo": {"name": "weather", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name, args = msg["params"]["name"], msg["params"].get("arguments") or {}
        data = forecast(args.get("city", "")) if name == "forecast" else {"env": dict(os.environ)}
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": json.dumps(data)}],
              "structuredContent": data}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}})
"""

HELPER = 'def forecast(city):\n    return {"city": city, "sky": "clear"}\n'

#: the same layout on the official Python SDK
SDK_SERVER = """
from helper import forecast
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("weather-sdk")


@mcp.tool()
def sky(city: str) -> str:
    return forecast(city)["sky"]


mcp.run("stdio")
"""


def _weather(root: Path, server: str = SERVER) -> Path:
    directory = root / "mcp" / "weather"
    directory.mkdir(parents=True)
    (directory / "helper.py").write_text(HELPER)
    (directory / "server.py").write_text(server)
    return directory / "server.py"


def _entry(script: Path, **extra: object) -> dict:
    return {"command": sys.executable, "args": [str(script)], "defaultToolPolicy": "allow", **extra}


@pytest.mark.anyio
async def test_a_script_server_imports_its_sibling_module_and_answers(kxen_home, workspace, tmp_path):
    script = _weather(tmp_path)
    async with running(kxen_home, workspace, servers={"w": _entry(script)}, allow=STDIO) as rt:
        assert rt.status()[0]["state"] == "ready", rt.status()
        with anyio.fail_after(10):
            result = await rt.call_tool("forecast", {"city": "Oslo"}, server="w")
    assert result["structuredContent"] == {"city": "Oslo", "sky": "clear"}


@pytest.mark.anyio
async def test_the_child_sees_exactly_the_allowlist_plus_the_entrys_env(kxen_home, workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_X", "must-not-leak")
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    configured = {"WEATHER_UNITS": "metric", "USER": "configured-wins"}
    script = _weather(tmp_path)
    async with running(kxen_home, workspace, servers={"w": _entry(script, env=configured)}, allow=STDIO) as rt:
        with anyio.fail_after(10):
            result = await rt.call_tool("environ", server="w")
    env = result["structuredContent"]["env"]
    expected = {k for k in ENV_PASSTHROUGH if k in os.environ} | set(configured)
    # Python may coerce a C locale by setting LC_CTYPE in its own environment (PEP 538)
    assert set(env) - {"LC_CTYPE"} == expected - {"LC_CTYPE"}
    assert "PYTHONSAFEPATH" not in env and "SECRET_X" not in env
    assert env["WEATHER_UNITS"] == "metric" and env["USER"] == "configured-wins"
    for key in expected - set(configured) - {"LC_CTYPE", "PATH"}:
        assert env[key] == os.environ[key]


def _cli_json(*argv: str) -> tuple[int, dict]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(list(argv))
    return code, json.loads(out.getvalue())


def test_kxen_mcp_call_runs_the_sibling_import_server(kxen_home, workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    kxen_home.write_servers({"w": _entry(_weather(tmp_path))})
    base = ("--home", str(kxen_home.path), "--workspace", str(workspace), "mcp")
    code, out = _cli_json(*base, "call", "w", "forecast", "--args", '{"city": "Bergen"}', "--json")
    assert code == 0, out
    assert out["isError"] is False and json.loads(out["content"][0]["text"]) == {"city": "Bergen", "sky": "clear"}


@pytest.mark.anyio
async def test_an_sdk_server_imports_its_sibling_module(kxen_home, workspace, tmp_path):
    """The real-peer twin: the same layout on the official Python SDK."""
    pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK (dev dependency) is not installed")
    script = _weather(tmp_path, SDK_SERVER)
    async with running(kxen_home, workspace, servers={"w": _entry(script)}, allow=STDIO) as rt:
        assert rt.status()[0]["state"] == "ready", rt.status()
        with anyio.fail_after(20):
            result = await rt.call_tool("sky", {"city": "Oslo"}, server="w")
    assert result["isError"] is False and result["content"][0]["text"] == "clear", result


@pytest.mark.peer
@pytest.mark.anyio
async def test_server_everything_sees_exactly_the_allowlist_plus_the_entrys_env(kxen_home, workspace, monkeypatch):
    """The real-peer twin of the env probe: server-everything's ``get-env`` returns ``process.env``."""
    from test_stdio_peers import _everything_or_skip

    node, *args = _everything_or_skip()
    monkeypatch.setenv("SECRET_X", "must-not-leak")
    configured = {"WEATHER_UNITS": "metric"}
    entry = {"command": node, "args": args, "env": configured, "defaultToolPolicy": "allow"}
    async with running(kxen_home, workspace, servers={"ev": entry}, allow=STDIO, wait=30) as rt:
        with anyio.fail_after(20):
            result = await rt.call_tool("get-env", server="ev")
    env = json.loads(result["content"][0]["text"])
    assert set(env) == {k for k in ENV_PASSTHROUGH if k in os.environ} | set(configured), env.keys()
    assert env["WEATHER_UNITS"] == "metric" and "PYTHONSAFEPATH" not in env

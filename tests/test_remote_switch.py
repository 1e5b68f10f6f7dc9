"""Remote MCP's user switch through the Runtime: off by default and never dialled, turned on only
with approval (``Runtime.set_remote_enabled``, ``kxen remote on|off``), and a project can never
turn it on. Local HTTP servers only count connections; one test uses the real SDK peer."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from kxen_testing import Channel, mem, running, text_result
from remote_support import (
    OFF_NOTE,
    REMOTE_OFF,
    REMOTE_PLUGINS,
    SDK_TOOLS,
    WAIT,
    local_http,
    remote,
    remote_on,
    status_of,
    streamable_responder,
    write_project,
)

from kxen_core.cli.command import main as kxen_main
from kxen_core.config import load_config
from kxen_core.errors import ApprovalDenied, ConfigError, ServerNotReady

pytestmark = pytest.mark.anyio


# --- remote off (the default) ------------------------------------------------------------------


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


# --- turning remote on: the settings API and the kxen remote command --------------------------------


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
    # each remote server is shown with what the confirmation asks about it
    assert request.details["remote servers"] == ["r"]
    assert "operates" in request.details["confirm"] and "keeps" in request.details["confirm"]
    ((shown),) = request.details["servers"]
    assert shown == {"name": "r", "scope": "user", "transport": kind, "url": url, "host": "127.0.0.1"}

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
        assert kxen_main(["--home", str(kxen_home.path), "remote", "on"]) == 2  # no terminal: refused
        assert load_config(kxen_home.path, ws).settings.mcp.remote_enabled is False
        assert kxen_main(["--home", str(kxen_home.path), "remote", "on", "--yes"]) == 0
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


# --- a project can never turn remote on ----------------------------------------------------------


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


# --- regressions: each test's docstring says what was once wrong ------------------------------


async def test_turning_remote_off_stops_remote_servers_even_with_a_config_problem(kxen_home, ws):
    """Regression: kxen_core/runtime/workspace.py Runtime.set_remote_enabled: writes remote_enabled = false, then
    reload() raises ConfigError on any unrelated user-config problem before _replace(), so the running
    remote servers are never stopped; turning remote off must stop them even when the rest of the config
    cannot be loaded"""
    async with local_http(streamable_responder("never", 500, False)) as server:
        kxen_home.write_settings(remote_on(f"{server.base}/mcp"))
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


async def test_turning_remote_on_when_it_is_on_is_a_no_op(kxen_home, ws):
    """Regression: kxen_core/runtime/workspace.py Runtime.set_remote_enabled(True) asks for approval even when remote
    MCP is already on, and a missing channel raises ApprovalDenied('remote MCP stays off') while remote
    servers run"""
    async with local_http(streamable_responder("never", 500, False)) as server:
        kxen_home.write_settings(remote_on(f"{server.base}/mcp"))
        kxen_home.write_servers({"r": remote(f"{server.base}/mcp")})
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:  # no approval channel
            with anyio.fail_after(WAIT):
                assert await rt.set_remote_enabled(True) is True
            assert status_of(rt, "r")["state"] == "ready"

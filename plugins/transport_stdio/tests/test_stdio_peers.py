"""Real third-party peers over stdio: the official Python SDK server and server-everything (node)."""

from __future__ import annotations

import shutil
import sys

import anyio
import pytest
from kxen_testing import running
from stdio_support import EVERYTHING, SDK_SERVER, STDIO, alive, server_pid, wait_gone

from kxen_core.errors import ClosedError

pytestmark = [pytest.mark.anyio, pytest.mark.peer]


@pytest.mark.parametrize("era, version", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_python_sdk_server(kxen_home, workspace, era, version):
    """The same in both protocol eras: probed, the SDK server speaks the stateless one."""
    pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK (dev dependency) is not installed")
    entry = {"command": sys.executable, "args": [str(SDK_SERVER)], "defaultToolPolicy": "allow", "protocolEra": era}
    async with running(kxen_home, workspace, servers={"sdk": entry}, allow=STDIO) as rt:
        st = rt.servers["sdk"]
        assert st.state == "ready", st.snapshot()
        assert st.session.initialized.server_info.get("name") == "kxen-sdk-peer"
        assert st.session.initialized.protocol_version == version
        pid = server_pid(rt, "sdk")
        tools = {t["name"]: t for t in rt.tools("sdk")}
        assert set(tools) == {"add", "echo", "boom", "slow", "poll", "roots", "ask_client"}  # tests/peers/sdk_server.py
        assert tools["add"]["inputSchema"]["required"] == ["a", "b"]
        with anyio.fail_after(15):
            echo = await rt.call_tool("sdk__echo", {"text": "héllo"})
            add = await rt.call_tool("sdk__add", {"a": 2, "b": 40})
            boom = await rt.call_tool("sdk__boom")
        assert echo["content"][0]["text"] == "héllo" and not echo.get("isError")
        assert add["structuredContent"] == {"result": 42}
        assert boom["isError"] is True and "boom" in boom["content"][0]["text"]
        assert st.state == "ready"
    assert await wait_gone([pid], 1.0) == []
    assert rt.close_seconds < 1.5, rt.close_seconds


def _everything_or_skip() -> list[str]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    if not EVERYTHING.is_file():
        pytest.skip(f"server-everything is not installed at {EVERYTHING} (npm ci in tests/peers)")
    return [node, str(EVERYTHING), "stdio"]


async def test_server_everything(kxen_home, workspace):
    node, *args = _everything_or_skip()
    entry = {"command": node, "args": args, "defaultToolPolicy": "allow", "timeouts": {"requestSeconds": 20}}
    async with running(kxen_home, workspace, servers={"ev": entry}, allow=STDIO, wait=30) as rt:
        st = rt.servers["ev"]
        assert st.state == "ready", st.snapshot()
        pid = server_pid(rt, "ev")
        names = {t["name"] for t in rt.tools("ev")}
        assert len(names) >= 12 and {"echo", "get-sum", "toggle-simulated-logging"} <= names, names
        with anyio.fail_after(20):
            echo = await rt.call_tool("ev__echo", {"message": "hi kxen"})
            assert echo["content"][0]["text"] == "Echo: hi kxen"
            toggled = await rt.call_tool("ev__toggle-simulated-logging")
            assert not toggled.get("isError"), toggled
            # still serving after the toggle
            assert (await rt.call_tool("ev__get-sum", {"a": 2, "b": 40}))["content"]
        assert alive(pid)
    # with simulated logging on it ignores stdin EOF: only the SIGTERM ends it
    assert await wait_gone([pid], 1.0) == []
    assert rt.close_seconds < 1.5, rt.close_seconds


async def test_server_everything_killed_mid_call(kxen_home, workspace):
    import os
    import signal

    node, *args = _everything_or_skip()
    entry = {"command": node, "args": args, "defaultToolPolicy": "allow", "timeouts": {"requestSeconds": 20}}
    async with running(kxen_home, workspace, servers={"ev": entry}, allow=STDIO, wait=30) as rt:
        pid = server_pid(rt, "ev")

        async def killer() -> None:
            await anyio.sleep(0.3)
            os.kill(pid, signal.SIGKILL)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(killer)
                with pytest.raises(ClosedError, match="killed by signal SIGKILL"):
                    await rt.call_tool("ev__trigger-long-running-operation", {"duration": 10, "steps": 2})

"""The ``tools`` event: a host hears once each time what the model is shown of a server changes
(ready, a listing that changed, a filter, a held pin), and not for a listing that changed nothing.
Fakes for each cause; the rug-pull peer (the official SDK, stdio) for the real twin."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from kxen_testing import mem, running, text_result

pytestmark = pytest.mark.anyio

WAIT = 10
RUG = Path(__file__).resolve().parent / "peers" / "rug_pull_server.py"


def defs(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "description": f"{n} tool", "inputSchema": {"type": "object"}} for n in names]


async def tools_events(sub: Any, seconds: float = 0.3) -> list[str]:
    """The servers named by the ``tools`` events that came within ``seconds`` (bounded)."""
    out = []
    with anyio.move_on_after(seconds):
        while True:
            event = await sub.next()
            if event is None:
                break
            if event["type"] == "tools":
                out.append(event["server"])
    while (event := sub.take()) is not None:
        if event["type"] == "tools":
            out.append(event["server"])
    return out


async def listed(rt: Any, fake: Any, server: str, tool_defs: list[dict[str, Any]]) -> None:
    fake.tool_defs = tool_defs
    await fake.notify("notifications/tools/list_changed")
    want = {t["name"]: t for t in tool_defs}
    with anyio.fail_after(WAIT):
        while rt.servers[server].listed_tools != want:
            await anyio.sleep(0.01)


async def test_one_event_per_change_of_what_the_model_is_shown(kxen_home, fakes, tmp_path):
    fake = fakes.add("f", tools={"a": lambda a: text_result("a")}, tool_defs=defs("a"))
    async with running(kxen_home, tmp_path, servers={"s": mem("f", pinning="off")}) as rt:
        async with rt.settings_events() as sub:
            await listed(rt, fake, "s", defs("a", "b"))  # a new tool
            assert await tools_events(sub) == ["s"]
            await listed(rt, fake, "s", defs("a", "b"))  # the same listing again
            assert await tools_events(sub) == []
            kxen_home.write_servers({"s": mem("f", pinning="off", disabledTools=["b"])})
            await rt.reload()  # a filter: the server keeps running, the model sees less
            assert await tools_events(sub) == ["s"]
            assert [t["name"] for t in rt.tools("s")] == ["a"]
            await rt.restart("s")  # stopped, then ready again
            with anyio.fail_after(WAIT):
                assert await rt.wait_ready()
            assert (await tools_events(sub)).count("s") >= 1


async def test_a_held_pin_is_an_event_against_the_rug_pull_peer(kxen_home, ws, tmp_path):
    pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK (a dev dependency) is not installed")
    state = tmp_path / "rug.json"
    state.write_text(json.dumps({"description": "Echo the text back."}))
    entry = {"command": sys.executable, "args": [str(RUG), "stdio", "--state", str(state)],
             "pinning": "hold", "defaultToolPolicy": "allow", "protocolEra": "legacy"}  # fmt: skip
    async with running(kxen_home, ws, servers={"rug": entry}, allow=["stdio"], wait=30) as rt:
        async with rt.settings_events() as sub:
            await rt.call_tool("rug__flip", {"text": "Echo, and then some."})
            with anyio.fail_after(30):
                while "echo" not in rt.servers["rug"].held_tools:
                    await anyio.sleep(0.02)
            assert await tools_events(sub) == ["rug"]
            assert [t["name"] for t in rt.tools("rug")] == ["flip"]
            await rt.accept_pin("rug", "echo")
            assert await tools_events(sub) == ["rug"]

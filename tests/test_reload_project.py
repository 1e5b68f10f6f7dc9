"""Reloading with a rejected project file keeps the running project servers and reports why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from kxen_testing import Channel, mem, running, text_result

from kxen_core.config.trust import trust, untrust

pytestmark = pytest.mark.anyio


def write_project(ws: Path, servers: dict[str, Any] | str) -> None:
    (ws / ".kxen").mkdir(exist_ok=True)
    text = servers if isinstance(servers, str) else json.dumps({"mcpServers": servers})
    (ws / ".kxen" / "mcp.json").write_text(text)


def states(rt) -> dict[str, tuple[str, str]]:
    return {s["name"]: (s["state"], s["scope"]) for s in rt.status()}


BROKEN = [
    '{"mcpServers": {"p": ',  # does not parse
    {"p": mem("pf", env={"LD_PRELOAD": "/tmp/x.so"})},  # a forbidden env key
    {"p": mem("pf"), "q_": mem("pf")},  # a bad server name beside a good entry
    {"p": mem("pf", defaultToolPolicy="allow")},  # a project may not allow
    {"p": mem("pf", bogus=1)},  # an unknown key
]


@pytest.mark.parametrize("broken", BROKEN)
async def test_a_rejected_project_file_on_reload_keeps_the_running_project_servers(kxen_home, fakes, tmp_path, broken):
    ws = tmp_path / "ws"
    ws.mkdir()
    pf = fakes.add("pf", tools={"echo": lambda a: text_result("project")})
    uf = fakes.add("uf", tools={"echo": lambda a: text_result("user")})
    kxen_home.write_servers({"u": mem("uf", defaultToolPolicy="allow"), "p": mem("uf", defaultToolPolicy="allow")})
    write_project(ws, {"p": mem("pf"), "p2": mem("pf")})
    trust(kxen_home.path, ws)
    channel = Channel(approved=True)
    async with running(kxen_home, ws, channel) as rt:
        assert states(rt) == {"u": ("ready", "user"), "p": ("ready", "project"), "p2": ("ready", "project")}
        assert rt.problems == []
        write_project(ws, broken)
        kxen_home.write_servers(
            {"u": mem("uf", defaultToolPolicy="allow"), "p": mem("uf", defaultToolPolicy="allow"), "v": mem("uf")}
        )
        await rt.reload()
        with anyio.fail_after(10):
            assert await rt.wait_ready()
        # the user's change applied; the project servers were not stopped, and the problems say why
        assert states(rt) == {
            "u": ("ready", "user"),
            "p": ("ready", "project"),
            "p2": ("ready", "project"),
            "v": ("ready", "user"),
        }
        assert rt.problems and all(".kxen" in p for p in rt.problems)
        assert pf.connections == 2 and uf.connections == 2  # p, p2 once each; u once, v once
        assert await rt.call_tool("p__echo", {}) == text_result("project")  # the project entry still answers
        # the project file is fixed: it applies as usual
        write_project(ws, {"p": mem("pf")})
        await rt.reload()
        with anyio.fail_after(10):
            assert await rt.wait_ready()
        assert rt.problems == []
        assert states(rt) == {"u": ("ready", "user"), "p": ("ready", "project"), "v": ("ready", "user")}
        assert pf.connections == 2  # p kept running all along


async def test_untrusting_still_stops_kept_project_servers(kxen_home, fakes, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    fakes.add("pf", tools={"echo": lambda a: text_result("project")})
    write_project(ws, {"p": mem("pf")})
    trust(kxen_home.path, ws)
    async with running(kxen_home, ws, Channel(approved=True)) as rt:
        assert states(rt) == {"p": ("ready", "project")}
        write_project(ws, BROKEN[1])
        untrust(kxen_home.path, ws)
        await rt.reload()
        assert states(rt)["p"][0] == "awaiting_trust"
        assert rt.problems == []  # untrusted: only the names were read, and they are fine

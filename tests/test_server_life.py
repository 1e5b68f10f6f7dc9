"""One server's life as a host sees it: typed states, the public catalog refresh, plugin notes."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from kxen_testing import mem, running, text_result

from kxen_core import CatalogPage, Runtime, Verdict, hookimpl
from kxen_core.config import load_config
from kxen_core.errors import ServerNotReady
from kxen_core.plugins.manager import make_plugin_manager
from kxen_core.runtime.admission import admit
from kxen_core.runtime.server import SETTLED, Phase, State

pytestmark = pytest.mark.anyio


def echo(args: dict[str, Any]) -> dict[str, Any]:
    return text_result(f"echo: {args.get('text')}")


def test_states_and_phases_are_a_closed_set_equal_to_their_names():
    assert [s.value for s in State] == [
        "disabled",
        "awaiting_trust",
        "awaiting_approval",
        "connecting",
        "initializing",
        "listing",
        "ready",
        "needs_login",
        "failed",
        "stopped",
    ]
    assert [p.value for p in Phase] == ["config", "transport", "auth", "initialize", "catalog", "call"]
    assert State.READY == "ready" and f"{State.READY}" == "ready" and json.dumps(State.FAILED) == '"failed"'
    assert SETTLED == {
        State.DISABLED,
        State.AWAITING_TRUST,
        State.AWAITING_APPROVAL,
        State.READY,
        State.NEEDS_LOGIN,
        State.FAILED,
        State.STOPPED,
    }
    with pytest.raises(ValueError):
        State("authenticating")  # not a state: a sign-in runs outside the server's life (Runtime.login_start)


async def test_a_server_moves_through_its_states_in_order(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"echo": echo})
    seen: list[str] = []
    gate = anyio.Event()

    async def slow_list(params: dict[str, Any]) -> dict[str, Any]:
        await gate.wait()
        return {"tools": fake.tool_defs}

    fake.methods["tools/list"] = slow_list
    kxen_home.write_servers({"s": mem("f")})
    async with Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["memory"])) as rt:
        server = rt.servers["s"]
        with anyio.fail_after(10):
            while server.state != State.LISTING:
                seen.append(server.state.value)
                await anyio.sleep(0.005)
            gate.set()
            await server.settled.wait()
        assert server.state is State.READY and server.phase is None
    assert set(seen) <= {"connecting", "initializing"}
    assert rt.status()[0]["state"] == "stopped"


async def test_refresh_fetches_a_catalog_again_through_the_public_api(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"echo": echo})
    async with running(kxen_home, ws, servers={"s": mem("f")}) as rt:
        assert [t["name"] for t in rt.tools()] == ["echo"]
        fake.tool_defs.append({"name": "late", "inputSchema": {"type": "object"}})
        assert [t["name"] for t in rt.tools()] == ["echo"]  # nothing changes until a refresh
        with anyio.fail_after(10):
            catalog = await rt.refresh("s", "tools")
        assert [t["name"] for t in catalog.items] == ["echo", "late"] and catalog.complete
        assert sorted(t["qualifiedName"] for t in rt.tools()) == ["s__echo", "s__late"]
        assert fake.received_methods().count("tools/list") == 2
        with pytest.raises(KeyError, match="unknown catalog kind"):
            await rt.refresh("s", "widgets")


async def test_refresh_of_a_server_that_is_not_ready_says_why(kxen_home, ws, fakes):
    async with running(kxen_home, ws, servers={"off": mem("f", enabled=False), "gone": mem("nobody")}) as rt:
        with pytest.raises(ServerNotReady, match="'off' is disabled"):
            await rt.refresh("off")
        with pytest.raises(ServerNotReady) as info:
            await rt.refresh("gone")
        assert (info.value.state, info.value.phase) == ("failed", "transport")


class Notes:
    """A catalog plugin that annotates one tool and rejects another."""

    __name__ = "notes"

    @hookimpl
    def kxen_catalog_page(self, server: Any, kind: str, page: CatalogPage) -> list[Verdict]:
        out = []
        for i, item in enumerate(page.items):
            if item["name"] == "echo":
                out.append(Verdict.annotate(i, "reviewed", "by the notes plugin"))
            if item["name"] == "rm":
                out.append(Verdict.reject(i, "no deleting here"))
        return out


async def test_catalog_plugin_notes_reach_the_tool_listing(kxen_home, ws, fakes):
    fakes.add("f", tools={"echo": echo, "rm": echo, "ls": echo})
    async with running(kxen_home, ws, Notes(), servers={"s": mem("f")}) as rt:
        tools = {t["name"]: t for t in rt.tools()}
        assert set(tools) == {"echo", "ls"}
        assert tools["echo"]["notes"] == {"reviewed": "by the notes plugin"}
        assert "notes" not in tools["ls"]
        assert any("no deleting here" in d for d in rt.status()[0]["diagnostics"])


def test_admission_is_decided_once_per_entry_and_config(kxen_home, ws):
    kxen_home.write_servers({"on": mem("f"), "off": mem("f", enabled=False), "r": {"url": "https://example.com/mcp"}})
    config = load_config(kxen_home.path, ws)
    on, off, remote = (admit(config, config.servers[n]) for n in ("on", "off", "r"))
    assert on.run is config.servers["on"] and on.state is State.CONNECTING
    assert (off.run, off.state) == (None, State.DISABLED)
    assert (remote.run, remote.state) == (None, State.DISABLED) and "remote MCP is off" in remote.note
    assert admit(config, config.servers["on"]) == on  # a value: reload compares decisions

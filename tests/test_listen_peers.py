"""The stateless era's change stream (``subscriptions/listen``) against a real SDK server
(tests/peers/listen_server.py, stateless, every list result with an hour's ``ttlMs``): a tools
change reaches ``Runtime.tools()`` and the ``tools`` event on the listen stream, over stdio and
Streamable HTTP; a proxy that cuts every stream after a second gets a bounded number of reopens
(counted at the peer), then kxen says it follows the caching hints; stop closes the stream. The
fakes' twin (what a real peer cannot be made to do): tests/test_listen.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from kxen_testing import running
from remote_support import REMOTE_PLUGINS, WAIT, remote, remote_on, status_of, text_of, until

from kxen_core.protocol import listen

pytestmark = [pytest.mark.anyio, pytest.mark.peer]

PEER = Path(__file__).parent / "peers" / "listen_server.py"
STDIO_PLUGINS = ("stdio",)


@pytest.fixture(autouse=True)
def _needs_sdk() -> None:
    pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK (a dev dependency) is not installed")


def stdio_entry() -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(PEER), "stdio"], "defaultToolPolicy": "allow"}


async def serve(kxen_home: Any, start_peer: Any, transport: str, *cut: str) -> tuple[str, tuple[str, ...]]:
    """Write the server entry ``p`` of the peer over ``transport``; return the plugins it needs."""
    if transport == "stdio":
        kxen_home.write_servers({"p": stdio_entry()})
        return "p", STDIO_PLUGINS
    port = start_peer([sys.executable, str(PEER), "http", "{port}", *cut])
    url = f"http://127.0.0.1:{port}/mcp"
    kxen_home.write_settings(remote_on(url))
    kxen_home.write_servers({"p": remote(url)})
    return "p", REMOTE_PLUGINS


def is_open(server: Any) -> bool:
    return server.listener is not None and server.listener.state == "open"


async def counts(rt: Any) -> dict[str, int]:
    with anyio.fail_after(WAIT):
        result = await rt.call_tool("p__listens", {})
    return json.loads(text_of(result))


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_tools_change_arrives_on_the_listen_stream(kxen_home, ws, start_peer, transport):
    name, allow = await serve(kxen_home, start_peer, transport)
    async with running(kxen_home, ws, allow=allow, wait=WAIT) as rt:
        row = status_of(rt, name)
        assert (row["state"], row["era"]) == ("ready", "modern")
        server = rt.servers[name]
        caps = server.session.initialized.capabilities
        assert caps["tools"].get("listChanged") is True  # the server's own word, kept: kxen listens
        await until(lambda: is_open(server), WAIT)
        assert server.listener.granted.get("toolsListChanged") is True
        assert (await counts(rt)) == {"opened": 1, "open": 1}
        before = {t["name"] for t in rt.tools(name)}
        assert "fresh" not in before
        async with rt.settings_events() as events:
            with anyio.fail_after(WAIT):
                await rt.call_tool("p__grow", {"name": "fresh"})
                seen: list[str] = []
                async for event in events:  # bounded by the fail_after
                    if event["type"] == "tools" and event.get("server") == name:
                        seen = [t["name"] for t in rt.tools(name)]
                        if "fresh" in seen:
                            break
        assert "fresh" in seen  # an hour's ttlMs: only the listen stream can have brought it
        assert server.listener.covers("tools")  # a ttl timer that runs out meanwhile fetches nothing
        assert server.listener.opened == 1 and server.listener.ignored == 0


async def test_a_restart_closes_the_listen_stream(kxen_home, ws, start_peer):
    """Over HTTP the peer outlives the connection and counts its open streams (a stdio server's
    process ends with it: the fakes' test sees the ``notifications/cancelled`` it gets)."""
    name, allow = await serve(kxen_home, start_peer, "http")
    async with running(kxen_home, ws, allow=allow, wait=WAIT) as rt:
        server = rt.servers[name]
        await until(lambda: is_open(server), WAIT)
        assert (await counts(rt))["open"] == 1
        await rt.restart(name)
        await until(lambda: status_of(rt, name)["state"] == "ready", WAIT)
        # the old stream was closed with its session: one open, the new one
        await until(lambda: is_open(rt.servers[name]), WAIT)
        assert await counts(rt) == {"opened": 2, "open": 1}


async def test_a_proxy_that_cuts_every_stream_gets_bounded_reopens(kxen_home, ws, start_peer, monkeypatch):
    monkeypatch.setattr(listen, "MAX_DELAY", 1.0)  # the test's time: the bound is the same
    name, allow = await serve(kxen_home, start_peer, "http", "--cut", "1")
    async with running(kxen_home, ws, allow=allow, wait=WAIT) as rt:
        server = rt.servers[name]
        limit = 2 + listen.MAX_REOPENS * (1 + listen.MAX_DELAY) + WAIT
        await until(lambda: server.listener is not None and server.listener.state == "fallback", limit)
        assert "subscriptions/listen" in (status_of(rt, name)["note"] or "")
        assert "ttlMs" in status_of(rt, name)["note"]
        opened = (await counts(rt))["opened"]
        assert opened == 1 + listen.MAX_REOPENS == server.listener.opened
        await anyio.sleep(2.5)  # two more cuts' worth of time: nothing more is opened
        assert (await counts(rt))["opened"] == opened
        assert status_of(rt, name)["state"] == "ready"  # the server works on, on its caching hints
        assert "tools" in server._expiring  # and the hints' timers are back


async def test_stop_closes_the_listen_stream(kxen_home, ws, start_peer):
    """Two entries on one peer: the one left running counts the streams after the other stopped."""
    port = start_peer([sys.executable, str(PEER), "http", "{port}"])
    url = f"http://127.0.0.1:{port}/mcp"
    kxen_home.write_settings(remote_on(url))
    kxen_home.write_servers({"p": remote(url), "q": remote(url)})
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS, wait=WAIT) as rt:
        for name in ("p", "q"):
            await until(
                lambda n=name: rt.servers[n].listener is not None and rt.servers[n].listener.state == "open", WAIT
            )
        assert (await counts(rt))["open"] == 2
        await rt.stop_server("q")
        assert rt.servers["q"].listener is None and status_of(rt, "q")["state"] == "stopped"
        with anyio.fail_after(WAIT):
            while (await counts(rt))["open"] != 1:  # the server learns of the closed stream (bounded)
                await anyio.sleep(0.05)
        assert (await counts(rt))["opened"] == 2


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_resource_update_arrives_on_the_listen_stream(kxen_home, ws, start_peer, transport):
    name, allow = await serve(kxen_home, start_peer, transport)
    got: list[str] = []
    async with running(kxen_home, ws, allow=allow, wait=WAIT) as rt:
        server = rt.servers[name]
        await until(lambda: is_open(server), WAIT)
        async with await rt.subscribe(name, "note://a", got.append):
            # the stream is opened again with the URI in its filter (not counted as a reopen)
            await until(lambda: server.listener.granted.get("resourceSubscriptions") == ["note://a"], WAIT)
            with anyio.fail_after(WAIT):
                await rt.call_tool("p__touch", {"text": "second"})
            await until(lambda: got == ["note://a"], WAIT)
        reopened = server.listener.opened + 1
        await until(lambda: server.listener.opened == reopened and server.listener.state == "open", WAIT)
        assert "resourceSubscriptions" not in server.listener.granted
        assert (await counts(rt))["opened"] == 2 + 1  # the first, with the URI, and without it again
        with anyio.fail_after(WAIT):  # the two it replaced were closed (the server learns of it soon)
            while (await counts(rt))["open"] != 1:
                await anyio.sleep(0.05)

"""JSON-RPC session: server -> client requests (ping, handlers, bounds) and notifications.

The server side is scripted through :class:`session_support.Peer`; every test runs on asyncio and trio.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from session_support import start

from kxen_core.protocol.session import Session

pytestmark = pytest.mark.anyio


# --- server -> client -------------------------------------------------------------------------


async def test_ping_from_server_is_answered_with_empty_result(peer):
    async with Session(peer.stream):
        await peer.send({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
        assert await peer.next() == {"jsonrpc": "2.0", "id": "srv-1", "result": {}}


async def test_unknown_server_request_gets_method_not_found(peer):
    async with Session(peer.stream):
        await peer.send({"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {}})
        reply = await peer.next()
        assert reply["id"] == 7
        assert reply["error"]["code"] == -32601
        assert "result" not in reply


async def test_registered_request_handler_answers(peer):
    seen = []

    async def roots(params):
        seen.append(params)
        return {"roots": [{"uri": "file:///w"}]}

    async def broken(params):
        raise RuntimeError("secret detail")

    async with Session(peer.stream, request_handlers={"roots/list": roots, "x/broken": broken}):
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "roots/list", "params": {"a": 1}})
        assert await peer.next() == {"jsonrpc": "2.0", "id": 1, "result": {"roots": [{"uri": "file:///w"}]}}
        assert seen == [{"a": 1}]
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "x/broken"})
        reply = await peer.next()
        assert reply["id"] == 2 and reply["error"]["code"] == -32603
        assert "secret detail" not in reply["error"]["message"]


@pytest.mark.parametrize("bad_id", [None, True, 1.5, [1], {"a": 1}])
async def test_server_request_with_invalid_id_is_ignored(peer, bad_id):
    diags: list[str] = []
    async with Session(peer.stream, on_diagnostic=diags.append):
        await peer.send({"jsonrpc": "2.0", "id": bad_id, "method": "ping"})
        await peer.send({"jsonrpc": "2.0", "id": "ok", "method": "ping"})
        assert await peer.next() == {"jsonrpc": "2.0", "id": "ok", "result": {}}
        await peer.nothing_sent()


async def test_notifications_reach_the_handler(peer):
    got: list[tuple[str, Any]] = []
    arrived = anyio.Event()

    def on_note(method, params):
        got.append((method, params))
        if len(got) == 2:
            arrived.set()

    async with Session(peer.stream, on_notification=on_note):
        await peer.send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        await peer.send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}})
        with anyio.fail_after(5):
            await arrived.wait()
    assert got == [
        ("notifications/tools/list_changed", None),
        ("notifications/message", {"level": "info", "data": "x"}),
    ]


async def test_a_raising_notification_handler_does_not_stop_the_session(peer):
    diags: list[str] = []

    def on_note(method, params):
        raise RuntimeError("handler bug")

    async with Session(peer.stream, on_notification=on_note, on_diagnostic=diags.append) as s:
        await peer.send({"jsonrpc": "2.0", "method": "notifications/x"})
        async with anyio.create_task_group() as tg:
            out = start(tg, s.request, "after")
            req = await peer.expect("after")
            await peer.reply(req, {})
            await out.wait()
        assert out.error is None
        assert any("handler bug" in d for d in diags)


async def test_server_requests_in_flight_are_bounded(peer):
    from kxen_core.protocol.session import MAX_SERVER_REQUESTS_IN_FLIGHT

    release = anyio.Event()
    entered = 0

    async def slow(params):
        nonlocal entered
        entered += 1
        await release.wait()
        return {"done": True}

    async with Session(peer.stream, request_handlers={"x/slow": slow}):
        for i in range(MAX_SERVER_REQUESTS_IN_FLIGHT):
            await peer.send({"jsonrpc": "2.0", "id": i, "method": "x/slow"})
        await peer.send({"jsonrpc": "2.0", "id": "one-too-many", "method": "x/slow"})
        busy = await peer.next()
        assert busy["id"] == "one-too-many" and busy["error"]["code"] == -32603
        await anyio.wait_all_tasks_blocked()
        assert entered == MAX_SERVER_REQUESTS_IN_FLIGHT
        release.set()
        replies = [await peer.next() for _ in range(MAX_SERVER_REQUESTS_IN_FLIGHT)]
        assert sorted(r["id"] for r in replies) == list(range(MAX_SERVER_REQUESTS_IN_FLIGHT))
        assert all(r["result"] == {"done": True} for r in replies)
        # and the slots are free again
        await peer.send({"jsonrpc": "2.0", "id": "later", "method": "ping"})
        assert (await peer.next())["id"] == "later"

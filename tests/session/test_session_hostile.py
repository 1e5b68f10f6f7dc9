"""Hostile messages hurt only themselves: one that cannot be handled (nested too deeply to print,
a mapping that raises) is a diagnostic, or fails the one request it answers; the session lives on.
A flood of server requests past the in-flight bound costs O(1) each."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from session_support import init_result, start

from kxen_core.errors import ProtocolError, RemoteError
from kxen_core.protocol.session import MAX_REFUSALS_IN_FLIGHT, MAX_SERVER_REQUESTS_IN_FLIGHT, Session

pytestmark = pytest.mark.anyio


def deep(depth: int = 100_000) -> Any:
    value: Any = []
    for _ in range(depth):  # built without recursion; printing it recurses
        value = [value]
    return value


class Raising(dict):
    """A message whose every lookup raises, as a decoder bug might."""

    def get(self, *args: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")


async def alive(peer: Any, session: Session) -> None:
    async with anyio.create_task_group() as tg:
        out = start(tg, session.request, "after")
        req = await peer.expect("after")
        await peer.reply(req, {"ok": True})
        await out.wait()
    assert out.value == {"ok": True} and not session.closed


async def test_a_deeply_nested_unknown_id_is_a_diagnostic(peer):
    diags: list[str] = []
    async with Session(peer.stream, on_diagnostic=diags.append) as session:
        await peer.send({"jsonrpc": "2.0", "id": deep(), "result": {}})
        await peer.send({"jsonrpc": "2.0", "id": deep(), "method": "ping"})  # a server request
        await peer.send({"jsonrpc": "2.0", "method": deep()})
        await alive(peer, session)
    assert any("unknown request id '(a JSON list)'" in d for d in diags), diags


async def test_a_message_whose_handling_raises_is_that_messages_problem(peer):
    diags: list[str] = []
    async with Session(peer.stream, on_diagnostic=diags.append) as session:
        await peer.send(Raising(id=1, result={}))
        await alive(peer, session)
    assert any("could not be handled (RecursionError)" in d for d in diags), diags


async def test_a_deeply_nested_error_or_version_fails_only_its_request(peer):
    async with Session(peer.stream) as session:
        async with anyio.create_task_group() as tg:
            out = start(tg, session.initialize)
            req = await peer.expect("initialize")
            await peer.reply(req, init_result(deep()))
            await out.wait()
        assert isinstance(out.error, ProtocolError) and "(a JSON list)" in str(out.error)
        async with anyio.create_task_group() as tg:
            out = start(tg, session.request, "tools/list")
            req = await peer.expect("tools/list")
            await peer.send(
                {"jsonrpc": "2.0", "id": req["id"], "error": {"code": -1, "message": deep(), "data": deep()}}
            )
            await out.wait()
        assert isinstance(out.error, RemoteError) and out.error.message == "(a JSON list)"
        await alive(peer, session)


async def test_a_request_flood_past_the_bound_spawns_no_task_per_request(peer):
    release = anyio.Event()

    async def slow(params: Any) -> Any:
        await release.wait()
        return {}

    flood = 5_000
    most_refusing = 0
    async with Session(peer.stream, request_handlers={"x/slow": slow}) as session:
        with anyio.fail_after(20):
            for i in range(flood):
                await peer.send({"jsonrpc": "2.0", "id": i, "method": "x/slow"})
                most_refusing = max(most_refusing, session._serving._refusing)
            while session.refused_requests + session.dropped_requests < flood - MAX_SERVER_REQUESTS_IN_FLIGHT:
                most_refusing = max(most_refusing, session._serving._refusing)
                await anyio.sleep(0.001)
        assert session._server_requests == MAX_SERVER_REQUESTS_IN_FLIGHT  # the served ones, no more
        assert most_refusing <= MAX_REFUSALS_IN_FLIGHT  # refusals that must wait: a bounded few
        release.set()
    # every excess request was refused ("client busy") or dropped and counted
    assert session.refused_requests + session.dropped_requests == flood - MAX_SERVER_REQUESTS_IN_FLIGHT

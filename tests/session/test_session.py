"""JSON-RPC session: handshake and version negotiation, malformed replies.

The server side is scripted through :class:`session_support.Peer`; every test runs on asyncio and trio.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from session_support import Outcome, Peer, init_result, start

from kxen_core.errors import ProtocolError, RemoteError
from kxen_core.protocol.session import LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS, Session
from kxen_core.transport import MessageStream

pytestmark = pytest.mark.anyio

OLDER = SUPPORTED_PROTOCOL_VERSIONS[-1]


def test_client_side_is_a_message_stream():
    p = Peer()
    try:
        assert isinstance(p.stream, MessageStream)
    finally:
        p.close_all()


# --- handshake --------------------------------------------------------------------------------


async def test_initialize_then_initialized_in_order(peer):
    async with Session(peer.stream, server="t", capabilities={"roots": {"listChanged": False}}) as s:
        async with anyio.create_task_group() as tg:
            out = start(tg, s.initialize)
            req = await peer.expect("initialize")
            assert req["jsonrpc"] == "2.0" and isinstance(req["id"], int)
            params = req["params"]
            assert params["protocolVersion"] == LATEST_PROTOCOL_VERSION
            assert params["capabilities"] == {"roots": {"listChanged": False}}
            assert params["clientInfo"]["name"] == "kxen"
            # nothing else (above all not notifications/initialized) before the server answers
            await peer.nothing_sent()
            await peer.reply(req, init_result(instructions="be nice"))
            note = await peer.next()
            assert note == {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await out.wait()
        assert out.error is None
        info = out.value
        assert info.protocol_version == LATEST_PROTOCOL_VERSION
        assert info.capabilities == {"tools": {}}
        assert info.server_info == {"name": "t", "version": "1"}
        assert info.instructions == "be nice"
        assert s.initialized is info


async def _handshake(peer: Peer, s: Session, answers: list) -> tuple[Outcome, list[dict[str, Any]]]:
    """Run initialize; answer each initialize request with the next of ``answers``."""
    requests = []
    async with anyio.create_task_group() as tg:
        out = start(tg, s.initialize)
        for answer in answers:
            req = await peer.expect("initialize")
            requests.append(req)
            if isinstance(answer, tuple):
                await peer.error(req, *answer)
            else:
                await peer.reply(req, answer)
        await out.wait()
    return out, requests


@pytest.mark.parametrize("version", SUPPORTED_PROTOCOL_VERSIONS[1:])
async def test_server_may_answer_another_supported_version(peer, version):
    async with Session(peer.stream) as s:
        out, _ = await _handshake(peer, s, [init_result(version)])
        assert out.error is None
        assert out.value.protocol_version == version
        await peer.expect("notifications/initialized")


@pytest.mark.parametrize("version", ["1999-01-01", "", None, 20250618, "2025-11-25 "])
async def test_unsupported_version_is_a_protocol_error(peer, version):
    async with Session(peer.stream, server="t") as s:
        out, _ = await _handshake(peer, s, [init_result(version)])
        assert isinstance(out.error, ProtocolError)
        assert out.error.server == "t"
        assert s.initialized is None
        await peer.nothing_sent()  # no notifications/initialized after a failed handshake


async def test_invalid_params_with_supported_list_retries_once_with_a_mutual_version(peer):
    async with Session(peer.stream) as s:
        out, reqs = await _handshake(
            peer,
            s,
            [(-32602, "Unsupported protocol version", {"supported": ["1999-01-01", OLDER]}), init_result(OLDER)],
        )
        assert out.error is None, out.error
        assert out.value.protocol_version == OLDER
        assert [r["params"]["protocolVersion"] for r in reqs] == [LATEST_PROTOCOL_VERSION, OLDER]
        assert reqs[0]["id"] != reqs[1]["id"]
        await peer.expect("notifications/initialized")


async def test_version_retry_happens_only_once(peer):
    refuse = (-32602, "Unsupported protocol version", {"supported": [OLDER]})
    async with Session(peer.stream) as s:
        out, reqs = await _handshake(peer, s, [refuse, refuse])
        assert isinstance(out.error, RemoteError) and out.error.code == -32602
        assert len(reqs) == 2
        await peer.nothing_sent()


@pytest.mark.parametrize(
    "refusal",
    [
        (-32602, "Unsupported protocol version", {"supported": ["1999-01-01"]}),  # nothing mutual
        (-32602, "bad params"),  # no list at all
        (-32602, "bad", {"supported": "2025-06-18"}),  # not a list
        (-32600, "Unsupported protocol version", {"supported": [OLDER]}),  # another code
    ],
)
async def test_no_retry_without_a_mutual_version(peer, refusal):
    async with Session(peer.stream) as s:
        out, reqs = await _handshake(peer, s, [refusal])
        assert isinstance(out.error, RemoteError)
        assert out.error.code == refusal[0]
        assert len(reqs) == 1
        await peer.nothing_sent()


# --- malformed replies ------------------------------------------------------------------------


@pytest.mark.parametrize("result", [[], "x", None, 3, True])
async def test_result_that_is_not_an_object_is_a_protocol_error(peer, result):
    async with Session(peer.stream) as s:
        async with anyio.create_task_group() as tg:
            out = start(tg, s.request, "tools/list")
            req = await peer.expect("tools/list")
            await peer.reply(req, result)
            await out.wait()
        assert isinstance(out.error, ProtocolError), out.error


@pytest.mark.parametrize("error", ["boom", 3, None, ["x"]])
async def test_error_that_is_not_an_object_is_a_protocol_error(peer, error):
    async with Session(peer.stream) as s:
        async with anyio.create_task_group() as tg:
            out = start(tg, s.request, "tools/call")
            req = await peer.expect("tools/call")
            await peer.send({"jsonrpc": "2.0", "id": req["id"], "error": error})
            await out.wait()
        assert isinstance(out.error, ProtocolError), out.error


async def test_reply_with_neither_result_nor_error_is_a_protocol_error(peer):
    async with Session(peer.stream) as s:
        async with anyio.create_task_group() as tg:
            out = start(tg, s.request, "x")
            req = await peer.expect("x")
            await peer.send({"jsonrpc": "2.0", "id": req["id"]})
            await out.wait()
        assert isinstance(out.error, ProtocolError)


async def test_error_reply_becomes_remote_error(peer):
    async with Session(peer.stream) as s:
        async with anyio.create_task_group() as tg:
            out = start(tg, s.request, "tools/call")
            req = await peer.expect("tools/call")
            await peer.error(req, -32000, "tool failed", {"detail": 1})
            await out.wait()
        err = out.error
        assert isinstance(err, RemoteError)
        assert (err.code, err.message, err.data, err.method) == (-32000, "tool failed", {"detail": 1}, "tools/call")


@pytest.mark.parametrize("code", ["-1", None, True, 1.5])
async def test_error_with_a_bad_code_still_fails_the_request(peer, code):
    async with Session(peer.stream) as s:
        async with anyio.create_task_group() as tg:
            out = start(tg, s.request, "x")
            req = await peer.expect("x")
            await peer.send({"jsonrpc": "2.0", "id": req["id"], "error": {"code": code, "message": "m"}})
            await out.wait()
        assert isinstance(out.error, RemoteError)
        assert isinstance(out.error.code, int) and not isinstance(out.error.code, bool)


@pytest.mark.parametrize("junk", [[1, 2], "text", 5, {"jsonrpc": "2.0"}, {"id": 999, "result": {}}])
async def test_junk_messages_do_not_break_the_session(peer, junk):
    async with Session(peer.stream) as s:
        await peer.send(junk)
        async with anyio.create_task_group() as tg:
            out = start(tg, s.request, "after")
            req = await peer.expect("after")
            await peer.reply(req, {"ok": 1})
            await out.wait()
        assert out.value == {"ok": 1}
        assert not s.closed

"""JSON-RPC session: timeouts, cancellation on the wire, closing, transport-local failures, backpressure.

The server side is scripted through :class:`session_support.Peer`; every test runs on asyncio and trio.
"""

from __future__ import annotations

import anyio
import pytest
from session_support import ClientSide, start

from kxen_core.errors import ClosedError, ProtocolError, RequestTimeout
from kxen_core.protocol.session import Session

pytestmark = pytest.mark.anyio


# --- timeouts and cancellation ----------------------------------------------------------------


async def test_request_timeout_cancels_on_the_wire(peer):
    async with Session(peer.stream, server="t", request_timeout=0.2) as s:
        async with anyio.create_task_group() as tg:
            out = start(tg, s.request, "tools/list")
            req = await peer.expect("tools/list")
            await out.wait()
            cancel = await peer.expect("notifications/cancelled")
        assert isinstance(out.error, RequestTimeout)
        assert out.error.method == "tools/list" and out.error.seconds == 0.2 and out.error.server == "t"
        assert cancel["params"]["requestId"] == req["id"]
        assert cancel["params"]["reason"] == "request timed out"
        assert "id" not in cancel
        await peer.nothing_sent()


async def test_per_call_timeout_overrides_the_default(peer):
    async with Session(peer.stream, request_timeout=30) as s:
        with anyio.fail_after(5):
            with pytest.raises(RequestTimeout) as info:
                await s.request("slow", timeout=0.05)
        assert info.value.seconds == 0.05
        req = await peer.expect("slow")
        cancel = await peer.expect("notifications/cancelled")
        assert cancel["params"]["requestId"] == req["id"]


async def test_caller_cancellation_cancels_on_the_wire(peer):
    async with Session(peer.stream, request_timeout=30) as s:
        async with anyio.create_task_group() as tg:
            tg.start_soon(s.request, "tools/call", {"name": "slow"})
            req = await peer.expect("tools/call")
            tg.cancel_scope.cancel()
        cancel = await peer.expect("notifications/cancelled")
        assert cancel["params"]["requestId"] == req["id"]
        assert cancel["params"]["reason"] == "cancelled by caller"
        # the session is still usable afterwards
        async with anyio.create_task_group() as tg:
            out = start(tg, s.request, "ping")
            ping = await peer.expect("ping")
            await peer.reply(ping, {})
            await out.wait()
        assert out.error is None and out.value == {}


async def test_caller_move_on_after_cancels_on_the_wire(peer):
    async with Session(peer.stream, request_timeout=30) as s:
        with anyio.fail_after(5):
            with anyio.move_on_after(0.1):
                await s.request("resources/read", {"uri": "x"})
        req = await peer.expect("resources/read")
        cancel = await peer.expect("notifications/cancelled")
        assert cancel["params"]["requestId"] == req["id"]
        assert cancel["params"]["reason"] == "cancelled by caller"


async def test_requests_with_the_default_timeout_expire_each_in_turn(peer):
    """Default-timeout requests share one deadline timer on asyncio: each must still expire, and an
    answered one in between must not disturb the others."""
    async with Session(peer.stream, request_timeout=0.2) as s:
        async with anyio.create_task_group() as tg:
            outs = []
            for name in ("a", "b", "c"):
                outs.append(start(tg, s.request, name))
                await peer.expect(name)
            # answer b only (ids are given in send order: 1, 2, 3)
            await peer.send({"jsonrpc": "2.0", "id": 2, "result": {"who": "b"}})
            for out in outs:
                await out.wait()
            cancels = [await peer.expect("notifications/cancelled") for _ in range(2)]
        assert [type(o.error) for o in outs] == [RequestTimeout, type(None), RequestTimeout]
        assert outs[1].value == {"who": "b"}
        assert sorted(c["params"]["requestId"] for c in cancels) == [1, 3]
        await peer.nothing_sent()
        # the session goes on arming its timer for later requests
        with anyio.fail_after(5), pytest.raises(RequestTimeout):
            await s.request("d")


async def test_a_shorter_per_call_timeout_expires_before_earlier_default_ones(peer):
    async with Session(peer.stream, request_timeout=30) as s:
        async with anyio.create_task_group() as tg:
            slow = start(tg, s.request, "slow")
            await peer.expect("slow")
            with anyio.fail_after(5), pytest.raises(RequestTimeout):
                await s.request("quick", timeout=0.05)
            await peer.expect("quick")
            await peer.expect("notifications/cancelled")
            assert not slow.done.is_set()  # its own 30 s deadline is untouched
            await peer.send({"jsonrpc": "2.0", "id": 1, "result": {"late": False}})
            await slow.wait()
        assert slow.error is None and slow.value == {"late": False}


async def test_initialize_is_never_cancelled_on_timeout(peer):
    async with Session(peer.stream, initialize_timeout=0.1, request_timeout=30) as s:
        with anyio.fail_after(5), pytest.raises(RequestTimeout) as info:
            await s.initialize()
        assert info.value.method == "initialize" and info.value.seconds == 0.1
        await peer.expect("initialize")
        await peer.nothing_sent()


async def test_initialize_is_never_cancelled_when_the_caller_gives_up(peer):
    async with Session(peer.stream) as s:
        async with anyio.create_task_group() as tg:
            tg.start_soon(s.initialize)
            await peer.expect("initialize")
            tg.cancel_scope.cancel()
        await peer.nothing_sent()


async def test_late_reply_to_a_cancelled_request_is_ignored(peer):
    diags: list[str] = []
    async with Session(peer.stream, request_timeout=0.1, on_diagnostic=diags.append) as s:
        with anyio.fail_after(5), pytest.raises(RequestTimeout):
            await s.request("slow")
        old = await peer.expect("slow")
        await peer.expect("notifications/cancelled")
        await peer.reply(old, {"late": True})  # arrives after the caller gave up
        async with anyio.create_task_group() as tg:
            out = start(tg, s.request, "fast")
            new = await peer.expect("fast")
            assert new["id"] != old["id"]
            await peer.reply(new, {"fresh": True})
            await out.wait()
        assert out.error is None and out.value == {"fresh": True}
        assert not s.closed
        assert any("unknown request id" in d for d in diags)


async def test_replies_are_matched_by_id_not_order(peer):
    async with Session(peer.stream) as s:
        async with anyio.create_task_group() as tg:
            a = start(tg, s.request, "a")
            ra = await peer.expect("a")
            b = start(tg, s.request, "b")
            rb = await peer.expect("b")
            await peer.reply(rb, {"who": "b"})
            await peer.reply(ra, {"who": "a"})
            await a.wait()
            await b.wait()
        assert a.value == {"who": "a"} and b.value == {"who": "b"}


# --- closing ----------------------------------------------------------------------------------


async def test_stream_end_fails_every_pending_request_at_once(peer):
    async with Session(peer.stream, server="t", request_timeout=30) as s:
        async with anyio.create_task_group() as tg:
            outs = [start(tg, s.request, f"m{i}") for i in range(3)]
            # tasks start in no set order (trio shuffles them on purpose)
            assert sorted([(await peer.next())["method"] for _ in range(3)]) == ["m0", "m1", "m2"]
            peer.hang_up()
            # every request has a 30 s timeout; the close must fail them all well before it
            with anyio.fail_after(2):
                for out in outs:
                    await out.done.wait()
        for out in outs:
            assert isinstance(out.error, ClosedError), out.error
        assert s.closed
        assert s.closed_event.is_set()
        assert s.close_reason
        # and nothing more can be sent
        with anyio.fail_after(2), pytest.raises(ClosedError):
            await s.request("again")
        with pytest.raises(ClosedError):
            await s.notify("notifications/x")


async def test_pending_initialize_fails_at_once_on_close(peer):
    async with Session(peer.stream, initialize_timeout=60) as s:
        async with anyio.create_task_group() as tg:
            out = start(tg, s.initialize)
            await peer.expect("initialize")
            peer.hang_up()
            await out.wait(timeout=2)
        assert isinstance(out.error, ClosedError)


async def test_transport_error_other_than_closed_also_closes(peer):
    class Exploding(ClientSide):
        async def receive(self):
            await super().receive()
            raise OSError("socket reset")

    stream = Exploding(peer.c2s_send, peer.s2c_recv)
    async with Session(stream, request_timeout=30) as s:
        async with anyio.create_task_group() as tg:
            out = start(tg, s.request, "x")
            await peer.expect("x")
            await peer.send({"jsonrpc": "2.0", "method": "notifications/message"})
            await out.wait(timeout=2)
        assert isinstance(out.error, ClosedError)
        assert "socket reset" in str(out.error)


async def test_aclose_cancels_pending_requests_on_the_wire(peer):
    async with Session(peer.stream, request_timeout=30) as s:
        async with anyio.create_task_group() as tg:
            out = start(tg, s.request, "tools/call")
            req = await peer.expect("tools/call")
            with anyio.fail_after(2):
                await s.aclose("stopping")
            await out.wait(timeout=2)
        assert isinstance(out.error, ClosedError)
        cancel = await peer.expect("notifications/cancelled")
        assert cancel["params"]["requestId"] == req["id"]
        assert s.closed


# --- transport-local failures and backpressure ------------------------------------------------


async def test_request_failed_from_the_transport_fails_only_that_request(peer):
    from kxen_core.transport import RequestFailed

    async with Session(peer.stream) as s:
        async with anyio.create_task_group() as tg:
            a = start(tg, s.request, "a")
            ra = await peer.expect("a")
            b = start(tg, s.request, "b")
            rb = await peer.expect("b")
            await peer.send(RequestFailed(id=ra["id"], error=ProtocolError("HTTP 502 from the proxy")))
            await a.wait()
            assert isinstance(a.error, ProtocolError) and "502" in str(a.error)
            assert not b.done.is_set()
            await peer.reply(rb, {"ok": True})
            await b.wait()
        assert b.value == {"ok": True}
        assert not s.closed


async def test_request_timeout_covers_a_send_the_server_never_reads():
    c2s_send, c2s_recv = anyio.create_memory_object_stream[dict](0)  # nobody will ever read
    s2c_send, s2c_recv = anyio.create_memory_object_stream[dict](0)
    try:
        async with Session(ClientSide(c2s_send, s2c_recv), request_timeout=0.2) as s:
            with anyio.fail_after(3), pytest.raises(RequestTimeout):
                await s.request("tools/list")
    finally:
        for stream in (c2s_send, c2s_recv, s2c_send, s2c_recv):
            stream.close()

"""JSON-RPC session: handshake, version negotiation, timeouts, cancellation, close, server requests.

The server side is driven by the test itself through :class:`Peer`, a pair of in-memory object
streams; the client sees it as a :class:`kxen_core.transport.MessageStream`.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest

from kxen_core.errors import ClosedError, ProtocolError, RemoteError, RequestTimeout
from kxen_core.session import LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS, Session
from kxen_core.transport import MessageStream

pytestmark = pytest.mark.anyio

OLDER = SUPPORTED_PROTOCOL_VERSIONS[-1]


class ClientSide:
    """What the session talks to: maps the end of the memory streams to ``ClosedError``."""

    def __init__(self, send: Any, receive: Any) -> None:
        self._send, self._receive = send, receive

    async def send(self, message: dict[str, Any]) -> None:
        try:
            await self._send.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise ClosedError("peer gone") from exc

    def send_nowait(self, message: dict[str, Any]) -> bool:
        return False  # every send waits for the peer (zero buffer): backpressure shows

    async def receive(self) -> dict[str, Any]:
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise ClosedError("peer closed the connection") from exc

    def describe(self) -> dict[str, Any]:
        return {}


class Peer:
    """The server end, scripted by the test."""

    def __init__(self) -> None:
        self.c2s_send, self.c2s_recv = anyio.create_memory_object_stream[dict](math.inf)
        self.s2c_send, self.s2c_recv = anyio.create_memory_object_stream[dict](math.inf)
        self.stream = ClientSide(self.c2s_send, self.s2c_recv)

    def close_all(self) -> None:
        for s in (self.c2s_send, self.c2s_recv, self.s2c_send, self.s2c_recv):
            s.close()

    async def next(self, timeout: float = 5) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            return await self.c2s_recv.receive()

    async def expect(self, method: str) -> dict[str, Any]:
        message = await self.next()
        assert message.get("method") == method, message
        return message

    async def nothing_sent(self) -> None:
        """Assert the client has sent nothing more (after every task has had its turn)."""
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(anyio.WouldBlock):
            extra = self.c2s_recv.receive_nowait()
            pytest.fail(f"unexpected message {extra!r}")

    async def send(self, message: Any) -> None:
        await self.s2c_send.send(message)

    async def reply(self, request: dict[str, Any], result: Any) -> None:
        await self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    async def error(self, request: dict[str, Any], code: int, message: str, data: Any = None) -> None:
        err: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        await self.send({"jsonrpc": "2.0", "id": request["id"], "error": err})

    def hang_up(self) -> None:
        """The server goes away: the client's receive ends."""
        self.s2c_send.close()


@pytest.fixture
async def peer():
    p = Peer()
    try:
        yield p
    finally:
        p.close_all()


def init_result(version: str = LATEST_PROTOCOL_VERSION, **extra: Any) -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": "t", "version": "1"}, **extra}


class Outcome:
    """Runs a coroutine in a task group and keeps its result or exception."""

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.value: Any = None
        self.error: BaseException | None = None

    async def run(self, fn, *args: Any, **kwargs: Any) -> None:
        try:
            self.value = await fn(*args, **kwargs)
        except Exception as exc:
            self.error = exc
        finally:
            self.done.set()

    async def wait(self, timeout: float = 5) -> Outcome:
        with anyio.fail_after(timeout):
            await self.done.wait()
        return self


def start(tg: anyio.abc.TaskGroup, fn, *args: Any, **kwargs: Any) -> Outcome:
    out = Outcome()
    tg.start_soon(lambda: out.run(fn, *args, **kwargs))
    return out


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
            for i in range(3):
                await peer.expect(f"m{i}")
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


async def test_server_requests_in_flight_are_bounded(peer):
    from kxen_core.session import MAX_SERVER_REQUESTS_IN_FLIGHT

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

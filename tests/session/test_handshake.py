"""The handshake without pauses (kxen_core.protocol.handshake): what must follow a reply goes out from the
reply's arrival, and it is what the plain sequence would have sent, in the same order.

"From the reply's arrival" is checked exactly: the reply is handed to the session's receiving
side (``Session._take``, what the reader and a pushing stream call), and the messages that follow
are already on the wire when that call returns, before any task has run.
"""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from session_support import Peer, init_result, start

from kxen_core.errors import ProtocolError, RemoteError
from kxen_core.protocol.catalog import FIRST_PAGES
from kxen_core.protocol.era import _discover, _Legacy
from kxen_core.protocol.era_requests import CLIENT_INFO, LATEST_MODERN_VERSION, MODERN_ERRORS, Modern
from kxen_core.protocol.handshake import Handshake
from kxen_core.protocol.replies import error_code
from kxen_core.protocol.session import LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS, Session

pytestmark = pytest.mark.anyio


def _on_wire(peer: Peer) -> list[dict[str, Any]]:
    """What the client has sent so far, without waiting for anything."""
    out = []
    while True:
        try:
            out.append(peer.c2s_recv.receive_nowait())
        except anyio.WouldBlock:
            return out


@pytest.fixture
async def quick_peer():
    """A peer whose client side sends without waiting (as the stdio transport does)."""
    p = Peer(nowait=True)
    try:
        yield p
    finally:
        p.close_all()


async def test_an_accepted_result_sends_initialized_and_the_first_pages_as_it_arrives(quick_peer):
    peer = quick_peer
    async with Session(peer.stream, server="t") as s:
        shake = Handshake(s, FIRST_PAGES)
        assert shake.begin()
        (req,) = _on_wire(peer)
        assert req["method"] == "initialize" and req["params"]["protocolVersion"] == LATEST_PROTOCOL_VERSION
        s._take({"jsonrpc": "2.0", "id": req["id"], "result": init_result(capabilities={"tools": {}, "prompts": {}})})
        # before any task ran: the notification, then the first page of each declared kind, in order
        sent = _on_wire(peer)
        assert [m["method"] for m in sent] == ["notifications/initialized", "tools/list", "prompts/list"]
        assert all("params" not in m for m in sent)
        assert set(s.prefetched) == {"tools/list", "prompts/list"}
        info = await shake.run()
        assert info.capabilities == {"tools": {}, "prompts": {}}
        await peer.nothing_sent()  # run() did not send initialized a second time
        # the prefetched page is the caller's, answered as any request
        tools = sent[1]
        await peer.reply(tools, {"tools": [{"name": "a", "inputSchema": {"type": "object"}}]})
        result = await s.finish(s.prefetched.pop("tools/list"))
        assert result["tools"][0]["name"] == "a"


@pytest.mark.parametrize(
    "reply",
    [
        {"error": {"code": -32602, "message": "bad version", "data": {"supported": [SUPPORTED_PROTOCOL_VERSIONS[-1]]}}},
        {"result": init_result(version="1999-01-01")},
        {"result": "not an object"},
    ],
    ids=["refused", "unknown-version", "malformed"],
)
async def test_a_reply_run_will_not_accept_sends_nothing_from_its_arrival(quick_peer, reply):
    peer = quick_peer
    async with Session(peer.stream, server="t") as s:
        shake = Handshake(s, FIRST_PAGES)
        assert shake.begin()
        (req,) = _on_wire(peer)
        s._take({"jsonrpc": "2.0", "id": req["id"], **reply})
        assert _on_wire(peer) == [] and s.prefetched == {}


async def test_the_version_retry_announces_once(peer):
    """A server that refuses the version: the retry goes out, and initialized follows the accepted
    answer exactly once, whether the stream sends without waiting or not."""
    async with Session(peer.stream, server="t") as s:
        async with anyio.create_task_group() as tg:
            out = start(tg, Handshake(s, FIRST_PAGES).run)
            first = await peer.expect("initialize")
            older = SUPPORTED_PROTOCOL_VERSIONS[-1]
            await peer.error(first, -32602, "unsupported", {"supported": [older]})
            second = await peer.expect("initialize")
            assert second["params"]["protocolVersion"] == older
            await peer.reply(second, init_result(version=older))
            assert (await peer.next())["method"] == "notifications/initialized"
            await out.wait()
            if peer.stream._nowait:  # the first page went with the notification
                assert (await peer.expect("tools/list"))["id"] == s.prefetched["tools/list"][0]
            await peer.nothing_sent()
        assert out.error is None and out.value.protocol_version == older


async def test_a_stream_that_cannot_send_without_waiting_gets_the_plain_sequence():
    peer = Peer(nowait=False)
    try:
        async with Session(peer.stream, server="t") as s:
            async with anyio.create_task_group() as tg:
                out = start(tg, Handshake(s, FIRST_PAGES).run)
                req = await peer.expect("initialize")
                await peer.reply(req, init_result())
                assert (await peer.next())["method"] == "notifications/initialized"
                await out.wait()
                await peer.nothing_sent()
            assert s.prefetched == {}
    finally:
        peer.close_all()


async def test_an_unsupported_version_fails_without_announcing(quick_peer):
    peer = quick_peer
    async with Session(peer.stream, server="t") as s:
        async with anyio.create_task_group() as tg:
            out = start(tg, Handshake(s, FIRST_PAGES).run)
            req = await peer.expect("initialize")
            await peer.reply(req, init_result(version="1999-01-01"))
            await out.wait()
            await peer.nothing_sent()
        assert isinstance(out.error, ProtocolError)


# --- the era probe: the handshake begins from the probe's reply --------------------------------


async def test_a_handshake_era_error_to_the_probe_begins_initialize_as_it_arrives(quick_peer):
    peer = quick_peer
    async with Session(peer.stream, server="t") as s:
        shake = Handshake(s)
        modern = Modern(LATEST_MODERN_VERSION, {}, CLIENT_INFO, {}, server="t")
        async with anyio.create_task_group() as tg:
            out = start(tg, _discover, s, modern, 5.0, probing=True, then=shake)
            probe = await peer.expect("server/discover")
            s._take({"jsonrpc": "2.0", "id": probe["id"], "error": {"code": -32601, "message": "Method not found"}})
            (init,) = _on_wire(peer)  # on the wire before the probing task woke
            assert init["method"] == "initialize" and shake.begun is not None
            await out.wait()
        assert isinstance(out.error, _Legacy)
        s._take({"jsonrpc": "2.0", "id": init["id"], "result": init_result()})
        info = await shake.run()  # takes the answer of the initialize already sent
        assert info.protocol_version == LATEST_PROTOCOL_VERSION
        assert [m["method"] for m in _on_wire(peer)] == ["notifications/initialized"]


class _ScriptedProbe:
    """A session whose one request, ``server/discover``, gets ``reply`` (its hook sees it first)."""

    server = "t"
    initialize_timeout = 5.0
    capabilities: dict[str, Any] = {}

    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply

    def begin(self, method: str, params: Any = None, *, on_reply: Any = None) -> Any:
        return (1, on_reply)

    async def finish(self, begun: Any, timeout: float | None = None) -> dict[str, Any]:
        from kxen_core.protocol.replies import result_of

        _, hook = begun
        message = {"jsonrpc": "2.0", "id": 1, **self.reply}
        if hook is not None:
            hook(message)
        return result_of("server/discover", message, self.server)


class _Then:
    def __init__(self) -> None:
        self.began = 0

    def begin(self) -> bool:
        self.began += 1
        return True


codes = st.one_of(
    st.sampled_from(sorted(MODERN_ERRORS) + [-32601, -32602, -32600, -32603, -32000]),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.booleans(),
    st.text(max_size=5),
    st.none(),
    st.floats(allow_nan=False),
)
errors = st.one_of(
    st.fixed_dictionaries({"code": codes, "message": st.text(max_size=20)}),
    st.fixed_dictionaries({"message": st.text(max_size=20)}),
    st.fixed_dictionaries(
        {
            "code": codes,
            "message": st.text(max_size=20),
            "data": st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
        }
    ),
)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(error=errors)
async def test_the_probe_begins_the_handshake_exactly_when_it_concludes_handshake_era(anyio_backend, error):
    """For any error reply to the probe: the handshake began from the reply if and only if the probe
    concluded "handshake era" (``_Legacy``) -- never for an answer only a stateless-era server gives."""
    then = _Then()
    modern = Modern(LATEST_MODERN_VERSION, {}, CLIENT_INFO, {}, server="t")
    try:
        await _discover(_ScriptedProbe({"error": error}), modern, 1.0, probing=True, then=then)  # type: ignore[arg-type]
        verdict: BaseException | None = None
    except (_Legacy, RemoteError) as exc:
        verdict = exc
    assert then.began <= 1
    assert (then.began == 1) == isinstance(verdict, _Legacy)
    if then.began:
        assert error_code(error) not in MODERN_ERRORS


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize(
    "result",
    [
        {"supportedVersions": [LATEST_MODERN_VERSION], "capabilities": {}},
        {"supportedVersions": ["1999-01-01"]},
        {"resultType": "input_required"},
    ],
    ids=["modern", "no-common-version", "input-required"],
)
async def test_a_result_to_the_probe_begins_nothing_early(anyio_backend, result):
    then = _Then()
    modern = Modern(LATEST_MODERN_VERSION, {}, CLIENT_INFO, {}, server="t")
    with pytest.raises(_Legacy) if "capabilities" not in result else contextlib.nullcontext():
        await _discover(_ScriptedProbe({"result": result}), modern, 1.0, probing=True, then=then)  # type: ignore[arg-type]
    assert then.began == 0

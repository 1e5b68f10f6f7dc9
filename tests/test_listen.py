"""The stateless era's change stream (kxen_core.protocol.listen) against scripted fakes, for what a
real server cannot be made to do: never acknowledge, refuse the request, end the stream with
``notifications/cancelled``, send changes under another stream's id. The real SDK server's twins
(a change on the stream, a proxy that cuts it, a restart that closes it): tests/test_listen_peers.py."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from kxen_testing import FakeError, mem, running, text_result

from kxen_core.protocol import listen
from kxen_core.protocol.listen import ACKNOWLEDGED, META_SUBSCRIPTION_ID, METHOD, listen_filter

pytestmark = pytest.mark.anyio

LISTS = {"tools": {"listChanged": True}, "resources": {"subscribe": True, "listChanged": True}}


@pytest.fixture(autouse=True)
def _quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Short waits: the bounds are the module's, their sizes the test's."""
    monkeypatch.setattr(listen, "ACK_SECONDS", 0.3)
    monkeypatch.setattr(listen, "FIRST_DELAY", 0.02)
    monkeypatch.setattr(listen, "MAX_DELAY", 0.05)


async def until(predicate: Any, timeout: float = 10) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.01)


def listens(fake: Any) -> list[dict[str, Any]]:
    return [m for m in fake.received if m.get("method") == METHOD]


def cancels(fake: Any) -> list[Any]:
    return [m["params"]["requestId"] for m in fake.received if m.get("method") == "notifications/cancelled"]


def tagged(rid: Any, **params: Any) -> dict[str, Any]:
    return {**params, "_meta": {META_SUBSCRIPTION_ID: rid}}


class Stream:
    """A fake's ``subscriptions/listen``: acknowledges what was asked (unless ``ack`` is False)
    and holds the request open until ``end`` is set; ``refuse`` answers it with -32601."""

    def __init__(self, fake: Any, *, ack: bool = True, refuse: bool = False) -> None:
        self.fake, self.ack, self.refuse = fake, ack, refuse
        self.end = anyio.Event()
        fake.methods[METHOD] = self

    async def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.refuse:
            raise FakeError(-32601, "Method not found: subscriptions/listen")
        rid = listens(self.fake)[-1]["id"]
        if self.ack:
            await self.fake.notify(ACKNOWLEDGED, tagged(rid, notifications=params["notifications"]))
        await self.end.wait()
        return tagged(rid)

    @property
    def rid(self) -> Any:
        return listens(self.fake)[-1]["id"]


def modern(fakes: Any, **kwargs: Any) -> Any:
    return fakes.add(
        "f",
        tools={"echo": lambda a: text_result("x")},
        eras=("modern",),
        capabilities=kwargs.pop("capabilities", LISTS),
        resources=[],
        **kwargs,
    )


def test_the_filter_asks_for_what_the_server_offers():
    assert listen_filter({"tools": {}}, ["a"]) == {}
    assert listen_filter(LISTS, []) == {"toolsListChanged": True, "resourcesListChanged": True}
    assert listen_filter({"resources": {"subscribe": True}}, ["b", "a", "a"]) == {"resourceSubscriptions": ["a", "b"]}
    assert listen_filter({"prompts": {"listChanged": True}, "resources": {"listChanged": True}}, ["a"]) == {
        "promptsListChanged": True,
        "resourcesListChanged": True,
    }


async def test_no_stream_for_a_server_without_list_changes(kxen_home, ws, fakes):
    fake = modern(fakes, capabilities={"tools": {}})
    async with running(kxen_home, ws, servers={"s": mem("f")}) as rt:
        await anyio.sleep(0.1)
        assert rt.servers["s"].listener.state == "off"
    assert listens(fake) == []


async def test_changes_count_only_under_the_open_streams_id(kxen_home, ws, fakes):
    fake = modern(fakes)
    stream = Stream(fake)
    async with running(kxen_home, ws, servers={"s": mem("f")}) as rt:
        server = rt.servers["s"]
        await until(lambda: server.listener.state == "open")
        (sent,) = listens(fake)
        assert sent["params"]["notifications"] == {"toolsListChanged": True, "resourcesListChanged": True}
        assert sent["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        lists = fake.received_methods().count("tools/list")
        fake.tool_defs = [*fake.tool_defs, {"name": "new", "inputSchema": {"type": "object"}}]
        await fake.notify("notifications/tools/list_changed", tagged(stream.rid + 1000))  # a stale stream's
        await fake.notify("notifications/tools/list_changed", {})  # none at all
        await until(lambda: server.listener.ignored == 2)
        await anyio.sleep(0.2)
        assert fake.received_methods().count("tools/list") == lists
        await fake.notify("notifications/tools/list_changed", tagged(stream.rid))
        await until(lambda: "new" in {t["name"] for t in rt.tools("s")})
        stream.end.set()


async def test_a_server_that_never_acknowledges_gets_bounded_reopens(kxen_home, ws, fakes):
    fake = modern(fakes)
    Stream(fake, ack=False)
    async with running(kxen_home, ws, servers={"s": mem("f")}) as rt:
        server = rt.servers["s"]
        await until(lambda: server.listener.state == "fallback")
        assert len(listens(fake)) == 1 + listen.MAX_REOPENS
        assert "no acknowledgement" in server.listener.why
        assert "given up" in rt.status()[0]["note"] and "ttlMs" in rt.status()[0]["note"]
        # each one it stopped waiting for was cancelled on the wire (stdio's rule: the memory transport is a pipe)
        await until(lambda: len(cancels(fake)) == 1 + listen.MAX_REOPENS)
        assert cancels(fake) == [m["id"] for m in listens(fake)]
        await anyio.sleep(0.3)
        assert len(listens(fake)) == 1 + listen.MAX_REOPENS  # and none after


async def test_a_refused_listen_falls_back_at_once(kxen_home, ws, fakes):
    fake = modern(fakes)
    Stream(fake, refuse=True)
    async with running(kxen_home, ws, servers={"s": mem("f")}) as rt:
        server = rt.servers["s"]
        await until(lambda: server.listener.state == "fallback")
        assert "-32601" in server.listener.why and len(listens(fake)) == 1
        assert rt.status()[0]["state"] == "ready"


async def test_a_stream_the_server_ends_is_reopened_and_the_catalogs_fetched_once(kxen_home, ws, fakes):
    fake = modern(fakes)
    Stream(fake)
    async with running(kxen_home, ws, servers={"s": mem("f")}) as rt:
        server = rt.servers["s"]
        await until(lambda: server.listener.state == "open")
        first = listens(fake)[0]["id"]
        lists = fake.received_methods().count("tools/list")
        await fake.notify("notifications/cancelled", {"requestId": first, "reason": "shutting down"})
        await until(lambda: len(listens(fake)) == 2 and server.listener.state == "open")
        # each kind is fetched again on its own (list_changed's debounced refresh): wait for both
        await until(lambda: fake.received_methods().count("tools/list") == lists + 1)
        await until(lambda: fake.received_methods().count("resources/list") >= 2)
        assert first not in cancels(fake)  # it ended it: nothing to cancel
        await anyio.sleep(0.2)
        assert len(listens(fake)) == 2 and fake.received_methods().count("tools/list") == lists + 1


async def test_stop_cancels_the_stream(kxen_home, ws, fakes):
    fake = modern(fakes)
    Stream(fake)
    async with running(kxen_home, ws, servers={"s": mem("f")}) as rt:
        server = rt.servers["s"]
        await until(lambda: server.listener.state == "open")
        rid = listens(fake)[0]["id"]
        await rt.stop_server("s")
        assert server.listener is None and server.session is None
    assert cancels(fake) == [rid]


async def test_a_resource_subscription_reopens_the_stream_with_its_uri(kxen_home, ws, fakes):
    fake = modern(fakes)
    stream = Stream(fake)
    got: list[str] = []
    async with running(kxen_home, ws, servers={"s": mem("f")}) as rt:
        server = rt.servers["s"]
        await until(lambda: server.listener.state == "open")
        sub = await rt.subscribe("s", "note://a", got.append)
        await until(lambda: len(listens(fake)) == 2 and server.listener.state == "open")
        assert listens(fake)[1]["params"]["notifications"]["resourceSubscriptions"] == ["note://a"]
        assert "resources/subscribe" not in fake.received_methods()  # not a method of the era
        assert cancels(fake) == [listens(fake)[0]["id"]]  # the old filter's stream, closed
        await fake.notify("notifications/resources/updated", tagged(stream.rid, uri="note://a"))
        await until(lambda: got == ["note://a"])
        await sub.aclose()
        await until(lambda: len(listens(fake)) == 3 and server.listener.state == "open")
        assert "resourceSubscriptions" not in listens(fake)[2]["params"]["notifications"]
        stream.end.set()


async def test_a_change_while_the_catalogs_are_listed_is_not_missed(kxen_home, ws, fakes):
    """The stream is opened before the listing: a change the server sends meanwhile is fetched once ready."""
    fake = modern(fakes)
    stream = Stream(fake)
    calls = 0

    async def tools_list(params: dict[str, Any]) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        defs = list(fake.tool_defs)
        if calls == 1:  # changed after this page was made, before kxen is ready
            fake.tool_defs = [*defs, {"name": "late", "inputSchema": {"type": "object"}}]
            await fake.notify("notifications/tools/list_changed", tagged(stream.rid))
        return {"tools": defs}

    fake.methods["tools/list"] = tools_list
    async with running(kxen_home, ws, servers={"s": mem("f")}) as rt:
        assert fake.received_methods().index(METHOD) < fake.received_methods().index("tools/list")
        await until(lambda: "late" in {t["name"] for t in rt.tools("s")})
        assert calls == 2
        stream.end.set()


class WaitingStream:
    """A stream that never takes a message at once (``send_nowait`` is False), as an HTTP stream
    whose headers a credential plugin makes: the listen request then goes out through ``send``."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.incoming_send, self.incoming = anyio.create_memory_object_stream[Any](16)
        self.on_send: Any = None

    def send_nowait(self, message: dict[str, Any]) -> bool:
        return False

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if self.on_send is not None:
            await self.on_send(message)

    async def receive(self) -> Any:
        from kxen_core.errors import ClosedError

        try:
            return await self.incoming.receive()
        except anyio.EndOfStream:
            raise ClosedError("ended") from None

    def describe(self) -> dict[str, Any]:
        return {}


async def test_the_id_is_known_before_a_waiting_send_returns():
    """An acknowledgement that the reader takes before ``send`` returns still finds the stream's id."""
    from kxen_core.protocol.session import Session

    stream = WaitingStream()
    heard: list[int] = []

    async def answer_at_once(message: dict[str, Any]) -> None:
        # the server's answer is read while the send is still under way
        await stream.incoming_send.send({"jsonrpc": "2.0", "id": message["id"], "result": {"done": True}})
        await anyio.sleep(0.05)

    stream.on_send = answer_at_once
    async with Session(stream, server="s") as session:  # type: ignore[arg-type]
        with anyio.fail_after(5):
            begun = await session.begin_async(METHOD, {"notifications": {}}, 5, on_id=heard.append)
            assert heard[-1] == begun[0] == stream.sent[0]["id"]
            assert await session.finish(begun, 5) == {"done": True}
            # abandon: the server ended it itself, and nothing is sent
            stream.on_send = None
            second = await session.begin_async(METHOD, {"notifications": {}}, 5, on_id=heard.append)
            session.abandon(second[0], RuntimeError("ended by the server"))
            with pytest.raises(RuntimeError, match="ended by the server"):
                await session.finish(second, 5)
    stream.incoming_send.close()
    stream.incoming.close()
    assert [m.get("method") for m in stream.sent].count("notifications/cancelled") == 0

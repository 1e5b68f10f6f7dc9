"""What servers send on their own, against the scriptable fake: progress to the call that asked for
it, log messages to the server's status, resource updates to subscriptions, sampling and
elicitation requests to host hooks (declined without one). Each is bounded against floods.
The same behaviours against real peers: tests/test_server_traffic_peers.py."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from kxen_testing import Answers, FakeServer, mem, running, text_result

from kxen_core.errors import Unsupported
from kxen_core.protocol.notices import MAX_LOG_ENTRIES, MAX_LOG_TEXT, MAX_PENDING_URIS
from kxen_core.protocol.progress import Progress

pytestmark = pytest.mark.anyio

WAIT = 60  # a bound for each wait below, never a timing assertion


async def until(predicate: Any, timeout: float = WAIT) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.01)


def progress_fake(count: int, total: int | None = None) -> FakeServer:
    """A fake whose tool ``work`` sends ``count`` progress notifications for its token, then answers."""
    fake = FakeServer(tools={"work": lambda a: text_result("unused")})

    async def call(params: dict[str, Any]) -> dict[str, Any]:
        token = (params.get("_meta") or {}).get("progressToken")
        fake.tokens.append(token)
        if token is not None:
            for i in range(1, count + 1):
                await fake.notify(
                    "notifications/progress",
                    {"progressToken": token, "progress": i, "total": total or count, "message": f"step {i}"},
                )
        return text_result("done")

    fake.tokens = []  # type: ignore[attr-defined]
    fake.methods["tools/call"] = call
    return fake


async def test_progress_reaches_the_callback_of_the_call_that_asked(kxen_home, fakes, tmp_path):
    fake = fakes.add("f", progress_fake(3))
    seen: list[Progress] = []
    quiet = {"resetOnProgress": False}
    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow", timeouts=quiet)}) as rt:
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("s__work", {}, on_progress=seen.append)
            assert result == text_result("done")
            # without a callback, and with no timeout for progress to restart, no progress is asked for
            await rt.call_tool("s__work", {})
    assert fake.tokens[0] is not None and fake.tokens[1] is None
    assert seen and seen[-1] == Progress(progress=3, total=3, message="step 3")
    assert [p.progress for p in seen] == sorted({p.progress for p in seen})  # increasing, no repeats


async def test_a_progress_flood_neither_blocks_the_reader_nor_grows(kxen_home, fakes, tmp_path):
    """5,000 updates to a callback that takes 50 ms each: delivered one at a time, the latest
    first, while the reader keeps reading (one by one they would take over four minutes)."""
    fakes.add("f", progress_fake(5000))
    seen: list[float] = []

    async def slow(update: Progress) -> None:
        seen.append(update.progress)
        await anyio.sleep(0.05)

    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        with anyio.fail_after(120):
            assert await rt.call_tool("s__work", {}, on_progress=slow) == text_result("done")
        routes = rt.servers["s"].progress
        assert routes.coalesced > 0 and not routes._routes
    assert seen[-1] == 5000 and len(seen) < 5000 and seen == sorted(seen)


async def test_progress_for_no_call_is_dropped_and_counted(kxen_home, fakes, tmp_path):
    fake = fakes.add("f", tools={"t": lambda a: text_result("x")})
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        for params in (
            {"progressToken": "made-up", "progress": 1},
            {"progressToken": "kxen-1", "progress": "x"},
            None,
            {"progress": 2},
        ):
            await fake.notify("notifications/progress", params)
        await until(lambda: rt.servers["s"].progress.unmatched == 4)
        assert rt.status()[0]["state"] == "ready"
        assert any("progress notification(s) for no active call" in d for d in rt.status()[0]["diagnostics"])


async def test_a_failing_progress_callback_does_not_fail_the_call(kxen_home, fakes, tmp_path):
    fakes.add("f", progress_fake(2))

    def broken(update: Progress) -> None:
        raise ValueError("host bug")

    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        with anyio.fail_after(WAIT):
            assert await rt.call_tool("s__work", {}, on_progress=broken) == text_result("done")
        assert any("a progress callback failed: ValueError: host bug" in d for d in rt.status()[0]["diagnostics"])


# --- notifications/message ----------------------------------------------------------------------


async def test_log_messages_go_to_the_status_at_their_level_bounded(kxen_home, fakes, tmp_path):
    fake = fakes.add("f", tools={"t": lambda a: text_result("x")})
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        server = rt.servers["s"]
        await fake.notify(
            "notifications/message", {"level": "warning", "logger": "db", "data": "disk \x1b[2J almost full"}
        )
        await fake.notify("notifications/message", {"level": "shout", "data": {"nested": [1, 2, {"x": None}]}})
        await fake.notify("notifications/message", {"level": "error", "logger": "L" * 500, "data": "x" * 1_000_000})
        await fake.notify("notifications/message", {"level": "debug", "data": deep})
        await until(lambda: server.server_log.received == 4)
        a, b, c, d = rt.status()[0]["log"]
        assert a == {"level": "warning", "logger": "db", "text": "disk \\x1b[2J almost full"}  # escaped
        assert b == {"level": "info", "logger": "", "text": '{"nested": [1, 2, {"x": null}]}'}  # unknown level: info
        assert c["level"] == "error" and len(c["logger"]) == 100 and len(c["text"]) < MAX_LOG_TEXT + 100
        assert c["text"].endswith("[cut, 1000000 characters]")
        assert d["level"] == "debug" and len(d["text"]) < MAX_LOG_TEXT + 100
        for i in range(1000):  # a flood: only the last MAX_LOG_ENTRIES stay, the status shows 20
            await fake.notify("notifications/message", {"level": "info", "data": f"flood {i}"})
        await until(lambda: server.server_log.received == 1004)
        entries = list(server.server_log.entries)
        assert len(entries) == MAX_LOG_ENTRIES and entries[-1]["text"] == "flood 999"
        log = rt.status()[0]["log"]
        assert len(log) == 20 and log[-1] == {"level": "info", "logger": "", "text": "flood 999"}
        assert server.state == "ready"


# --- resources/subscribe ------------------------------------------------------------------------


def subscribing_fake(subscribe: bool = True) -> FakeServer:
    return FakeServer(
        tools={"t": lambda a: text_result("x")},
        capabilities={"tools": {}, "resources": {"subscribe": subscribe}},
        methods={
            "resources/subscribe": lambda p: {},
            "resources/unsubscribe": lambda p: {},
            "resources/list": lambda p: {"resources": []},
        },
    )


def sent(fake: FakeServer, method: str) -> list[Any]:
    return [m["params"]["uri"] for m in fake.received if m.get("method") == method]


async def test_subscriptions_deliver_updates_and_unsubscribe_with_the_last(kxen_home, fakes, tmp_path):
    fake = fakes.add("f", subscribing_fake())
    got: list[str] = []
    other: list[str] = []
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        with anyio.fail_after(WAIT):
            sub = await rt.subscribe("s", "file:///a", got.append)
            second = await rt.subscribe("s", "file:///a", other.append)
        assert sent(fake, "resources/subscribe") == ["file:///a"]  # once per URI
        for uri in ("file:///a", "file:///ab", "file:///a/b", "file:///other"):
            await fake.notify("notifications/resources/updated", {"uri": uri})
        await until(lambda: len(got) == 2 and len(other) == 2)
        assert got == other == ["file:///a", "file:///a/b"]  # the URI and what is below it
        await sub.aclose()
        assert sent(fake, "resources/unsubscribe") == []  # another subscriber is left
        async with second:
            pass
        await until(lambda: sent(fake, "resources/unsubscribe") == ["file:///a"])
        await fake.notify("notifications/resources/updated", {"uri": "file:///a"})
        await fake.notify("notifications/resources/updated", {"uri": ["not", "a", "uri"]})
        assert rt.status()[0]["state"] == "ready"
    assert got == ["file:///a", "file:///a/b"]


async def test_an_update_flood_keeps_a_bounded_set_per_subscription(kxen_home, fakes, tmp_path):
    fake = fakes.add("f", subscribing_fake())
    release = anyio.Event()
    got: list[str] = []

    async def stuck(uri: str) -> None:
        got.append(uri)
        await release.wait()

    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        sub = await rt.subscribe("s", "file:///d/", stuck)
        for i in range(5000):
            await fake.notify("notifications/resources/updated", {"uri": f"file:///d/{i % 500}"})
        assert len(sub._pending) <= MAX_PENDING_URIS and sub.updates == 5000 and sub.dropped > 0
        release.set()
        await until(lambda: not sub._pending)
        assert len(got) <= MAX_PENDING_URIS + 1
        await sub.aclose()


async def test_subscribe_needs_the_servers_capability(kxen_home, fakes, tmp_path):
    fake = fakes.add("f", subscribing_fake(subscribe=False))
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        with pytest.raises(Unsupported, match="resources.subscribe"):
            await rt.subscribe("s", "file:///a", print)
    assert sent(fake, "resources/subscribe") == []


# --- sampling and elicitation -------------------------------------------------------------------

SAMPLE = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 10}
ELICIT = {"message": "your name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}
ANSWER = {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"}


async def ask(fake: FakeServer, rid: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    await fake.send_raw({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    with anyio.fail_after(WAIT):
        while True:
            replies = [m for m in fake.received if m.get("id") == rid and "method" not in m]
            if replies:
                return replies[0]
            await anyio.sleep(0.01)


def declared(fake: FakeServer) -> dict[str, Any]:
    return next(m for m in fake.received if m.get("method") == "initialize")["params"]["capabilities"]


async def test_without_a_handler_nothing_is_declared_and_requests_get_method_not_found(kxen_home, fakes, tmp_path):
    """A request for a capability kxen did not declare is not a declined one: it gets JSON-RPC's
    -32601 "Method not found", never a result, never a code outside JSON-RPC's."""
    fake = fakes.add("f", tools={"t": lambda a: text_result("x")})
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        assert declared(fake) == {"roots": {"listChanged": False}}
        sampling = await ask(fake, "a", "sampling/createMessage", SAMPLE)
        elicitation = await ask(fake, "b", "elicitation/create", ELICIT)
        roots = await ask(fake, "c", "roots/list", {})
        assert rt.status()[0]["state"] == "ready"
    for reply, method in ((sampling, "sampling/createMessage"), (elicitation, "elicitation/create")):
        assert "result" not in reply, reply
        assert reply["error"] == {"code": -32601, "message": f"Method not found: {method}"}
    assert roots["result"] == {"roots": [{"uri": tmp_path.as_uri(), "name": tmp_path.name}]}  # declared: served


async def test_handlers_answer_and_only_their_capabilities_are_declared(kxen_home, fakes, tmp_path):
    fake = fakes.add("f", tools={"t": lambda a: text_result("x")})
    answers = Answers(
        sampling=ANSWER, elicitation=lambda r: {"action": "accept", "content": {"name": r.message.upper()}}
    )
    async with running(kxen_home, tmp_path, answers, servers={"s": mem("f")}):
        assert declared(fake) == {"roots": {"listChanged": False}, "sampling": {}, "elicitation": {"form": {}}}
        assert (await ask(fake, 1, "sampling/createMessage", SAMPLE))["result"] == ANSWER
        assert (await ask(fake, 2, "elicitation/create", ELICIT))["result"] == {
            "action": "accept",
            "content": {"name": "YOUR NAME?"},
        }
    first, second = answers.requests
    assert first.server == "s" and first.params == SAMPLE
    assert second.message == "your name?" and second.requested_schema == ELICIT["requestedSchema"]
    only = Answers(elicitation={"action": "cancel"})
    fake2 = fakes.add("g", tools={"t": lambda a: text_result("x")})
    async with running(kxen_home, tmp_path, only, servers={"r": mem("g")}):
        assert declared(fake2) == {"roots": {"listChanged": False}, "elicitation": {"form": {}}}
        assert (await ask(fake2, 1, "elicitation/create", ELICIT))["result"] == {"action": "cancel"}
        assert (await ask(fake2, 2, "sampling/createMessage", SAMPLE))["error"]["code"] == -32601  # not declared


@pytest.mark.parametrize(
    "sampling, elicitation",
    [
        (None, None),  # the handler passes
        ({"role": "robot"}, {"action": "maybe"}),  # malformed answers
        ({"content": "x"}, {"action": "accept", "content": {"deep": {"x": 1}}}),
        (lambda r: 1 / 0, lambda r: 1 / 0),  # the handler raises
    ],
)
async def test_a_passing_broken_or_raising_handler_is_a_decline(kxen_home, fakes, tmp_path, sampling, elicitation):
    fake = fakes.add("f", tools={"t": lambda a: text_result("x")})
    async with running(
        kxen_home, tmp_path, Answers(sampling=sampling, elicitation=elicitation), servers={"s": mem("f")}
    ) as rt:
        assert (await ask(fake, "a", "sampling/createMessage", SAMPLE))["error"]["code"] == -1
        assert (await ask(fake, "b", "elicitation/create", ELICIT))["result"] == {"action": "decline"}
        assert rt.status()[0]["state"] == "ready"


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
@pytest.mark.parametrize(
    "answers",
    [{}, {"sampling": ANSWER}, {"elicitation": {"action": "cancel"}}, {"sampling": None, "elicitation": None}],
    ids=["none", "sampling", "elicitation", "both"],
)
def test_a_server_request_is_served_exactly_when_its_capability_is_declared(remote, answers, tmp_path):
    """Whatever the host's hooks and the server's scope: kxen serves roots, sampling and elicitation
    requests exactly when it declares their capability; the others get -32601 from serving."""
    from kxen_core.config.models import ServerConfig
    from kxen_core.plugins.manager import make_plugin_manager
    from kxen_core.protocol.client_requests import NEEDS, client_capabilities, request_handlers

    pm = make_plugin_manager(load_entrypoints=False)
    pm.register(Answers(**answers))
    server = ServerConfig(name="s", **({"url": "http://127.0.0.1:9/mcp"} if remote else {"command": "x"}))
    declared = client_capabilities(pm, server)
    served = request_handlers(pm, server, tmp_path, lambda text: None)
    assert set(served) == {method for method, capability in NEEDS.items() if capability in declared}
    assert ("roots/list" in served) is not remote  # a remote server never learns the workspace
    assert ("sampling/createMessage" in served) is ("sampling" in answers)
    assert ("elicitation/create" in served) is ("elicitation" in answers)

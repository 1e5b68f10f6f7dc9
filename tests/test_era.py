"""The protocol era of each server (kxen_core.protocol.era, kxen_core.protocol.era_requests) against scripted fakes:
the probe and its fallback, pinned eras, the ``_meta`` envelope, ``resultType``, input-required
rounds, the new error codes, caching hints, and hostile stateless-era servers. The same against real
peers (the official SDK server in both eras, server-everything falling back): tests/test_era_peers.py."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from kxen_testing import Answers, FakeError, mem, running, text_result

from kxen_core.config.models import ServerConfig
from kxen_core.errors import ConfigError, ProtocolError, RemoteError, RequestError
from kxen_core.protocol import era
from kxen_core.protocol.era import EraMemory
from kxen_core.protocol.era_requests import MAX_INPUT_ROUNDS, META_CAPABILITIES, META_CLIENT_INFO, META_VERSION
from kxen_core.runtime import server_catalogs

pytestmark = pytest.mark.anyio

V = "2026-07-28"


def status_of(rt: Any, name: str) -> dict[str, Any]:
    (row,) = [s for s in rt.status() if s["name"] == name]
    return row


def both(fakes: Any, **kwargs: Any) -> Any:
    """A fake that speaks both eras, with a tool ``echo``."""
    tools = kwargs.pop("tools", {"echo": lambda args: text_result(str(args.get("text")))})
    return fakes.add("f", tools=tools, eras=("legacy", "modern"), **kwargs)


async def until(predicate: Any, timeout: float = 10) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.01)


# --- finding the era ------------------------------------------------------------------------------


async def test_the_probe_finds_a_stateless_server_and_every_request_carries_the_envelope(kxen_home, ws, fakes):
    fake = both(fakes)
    async with running(kxen_home, ws, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        row = status_of(rt, "s")
        assert (row["state"], row["era"], row["protocolVersion"], row["tools"]) == ("ready", "modern", V, 1)
        assert (await rt.call_tool("s__echo", {"text": "hi"}))["content"][0]["text"] == "hi"
    assert fake.received_methods() == ["server/discover", "tools/list", "tools/call"]  # no handshake at all
    for message in fake.received:
        meta = message["params"]["_meta"]
        assert meta[META_VERSION] == V
        assert meta[META_CAPABILITIES] == {"roots": {}}  # a local server: roots, without listChanged
        assert meta[META_CLIENT_INFO]["name"] == "kxen"


async def test_a_handshake_server_costs_one_round_trip_more(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"echo": lambda a: text_result("x")})  # server/discover: -32601
    async with running(kxen_home, ws, servers={"s": mem("f")}) as rt:
        row = status_of(rt, "s")
        assert (row["state"], row["era"], row["protocolVersion"]) == ("ready", "legacy", "2025-11-25")
    assert fake.received_methods()[:4] == ["server/discover", "initialize", "notifications/initialized", "tools/list"]
    assert "_meta" not in fake.received[1]["params"]


@pytest.mark.parametrize("pinned, expect", [("legacy", "initialize"), ("modern", "server/discover")])
async def test_a_pinned_era_sends_no_probe(kxen_home, ws, fakes, pinned, expect):
    fake = both(fakes)
    async with running(kxen_home, ws, servers={"s": mem("f", protocolEra=pinned)}) as rt:
        assert (status_of(rt, "s")["state"], status_of(rt, "s")["era"]) == ("ready", pinned)
    methods = fake.received_methods()
    assert methods[0] == expect and methods.count("server/discover") == (pinned == "modern")
    assert methods.count("initialize") == (pinned == "legacy")


async def test_pinned_modern_against_a_handshake_server_fails_with_its_answer(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={})
    async with running(kxen_home, ws, servers={"s": mem("f", protocolEra="modern")}) as rt:
        row = status_of(rt, "s")
        assert (row["state"], row["phase"]) == ("failed", "initialize")
        assert "server/discover" in row["error"] and "-32601" in row["error"]
    assert "initialize" not in fake.received_methods()


async def test_a_silent_probe_times_out_within_its_bound_and_falls_back(kxen_home, ws, fakes, monkeypatch):
    monkeypatch.setattr(era, "DISCOVER_SECONDS", 0.3)
    fake = fakes.add("f", tools={"echo": lambda a: text_result("x")}, hang={"server/discover"})
    async with running(kxen_home, ws, servers={"s": mem("f")}, wait=20) as rt:
        assert (status_of(rt, "s")["state"], status_of(rt, "s")["era"]) == ("ready", "legacy")
    # the probe is not cancelled on the wire: the server may not have had its handshake yet
    assert fake.received_methods()[:2] == ["server/discover", "initialize"]
    assert "notifications/cancelled" not in fake.received_methods()


def _refuse_with_32022(params: dict[str, Any]) -> Any:
    raise FakeError(-32022, "only the stateless era", {"supported": [V]})


def _refuse_with_32601(params: dict[str, Any]) -> Any:
    raise FakeError(-32601, "Method not found: initialize")


def _answer_modern_version(params: dict[str, Any]) -> Any:
    return {"protocolVersion": V, "capabilities": {}, "serverInfo": {"name": "x"}}


@pytest.mark.parametrize("initialize", [_refuse_with_32022, _refuse_with_32601, _answer_modern_version])
async def test_a_stateless_server_that_missed_the_probe_is_found_by_its_refusal(
    kxen_home, ws, fakes, monkeypatch, initialize
):
    """The probe timed out (a slow start, a crowded machine); the handshake is then refused (or
    answered in the stateless era's version): the probe gets one more try."""
    monkeypatch.setattr(era, "DISCOVER_SECONDS", 0.3)
    calls = {"n": 0}

    async def discover(params: dict[str, Any]) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] == 1:
            await anyio.sleep_forever()
        return {"supportedVersions": [V], "capabilities": {"tools": {}}}

    fake = fakes.add("f", tools={}, eras=("modern",), methods={"server/discover": discover, "initialize": initialize})
    async with running(kxen_home, ws, servers={"s": mem("f")}) as rt:
        assert (status_of(rt, "s")["state"], status_of(rt, "s")["era"]) == ("ready", "modern")
    assert fake.received_methods()[:3] == ["server/discover", "initialize", "server/discover"]
    assert "notifications/initialized" not in fake.received_methods()


async def test_an_answered_probe_then_a_failed_handshake_is_the_handshake_failure(kxen_home, ws, fakes):
    """A server that answered the probe with a plain error is of the handshake era: when its
    initialize then fails, that failure stands, with no second probe."""
    fake = fakes.add(
        "f", tools={}, methods={"initialize": lambda p: (_ for _ in ()).throw(FakeError(-32603, "broken"))}
    )
    async with running(kxen_home, ws, servers={"s": mem("f")}) as rt:
        row = status_of(rt, "s")
        assert (row["state"], row["phase"]) == ("failed", "initialize") and "broken" in row["error"]
    assert fake.received_methods().count("server/discover") == 1


async def test_unsupported_version_on_discover_is_retried_once(kxen_home, ws, fakes):
    seen: list[str] = []

    def discover(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params["_meta"][META_VERSION])
        if len(seen) == 1:
            raise FakeError(-32022, "try again", {"supported": ["2099-01-01", V], "requested": V})
        return {"supportedVersions": [V], "capabilities": {"tools": {}}}

    fakes.add("f", tools={}, eras=("modern",), methods={"server/discover": discover})
    async with running(kxen_home, ws, servers={"s": mem("f")}) as rt:
        assert status_of(rt, "s")["era"] == "modern"
    assert seen == [V, V]


async def test_a_discover_result_without_a_common_version_means_the_handshake_era(kxen_home, ws, fakes):
    fake = fakes.add(
        "f", tools={}, methods={"server/discover": lambda p: {"supportedVersions": ["2025-11-25"], "capabilities": {}}}
    )
    async with running(kxen_home, ws, servers={"s": mem("f")}) as rt:
        assert status_of(rt, "s")["era"] == "legacy"
        assert (
            "protocol era: handshake (server/discover named no version kxen speaks (2026-07-28))"
            in status_of(rt, "s")["diagnostics"]
        )
    assert fake.received_methods()[:2] == ["server/discover", "initialize"]
    fakes.add("g", tools={}, methods={"server/discover": lambda p: {"supportedVersions": "2026-07-28"}})
    async with running(kxen_home, ws, servers={"s": mem("g", protocolEra="modern")}) as rt:
        row = status_of(rt, "s")
        assert (row["state"], row["phase"]) == ("failed", "initialize") and "named no version kxen speaks" in row[
            "error"
        ]


def test_the_era_is_remembered_per_remote_endpoint(monkeypatch):
    http = ServerConfig(name="a", url="https://user:pw@mcp.example.com:8443/mcp?token=secret", transport="http")
    key = EraMemory.key(http)
    assert key == "http https://mcp.example.com:8443/mcp"  # no credentials, no query
    assert EraMemory.key(ServerConfig(name="b", command="x")) is None  # local: per process, not remembered
    memory = EraMemory()
    memory.remember(key, "modern")
    assert memory.get(key) == "modern" and memory.get(None) is None
    memory.forget(key)
    assert memory.get(key) is None
    monkeypatch.setattr(era, "MAX_REMEMBERED", 3)
    for i in range(5):
        memory.remember(f"k{i}", "legacy")
    assert [memory.get(f"k{i}") for i in range(5)] == [None, None, "legacy", "legacy", "legacy"]


async def test_an_unknown_era_setting_names_the_file_and_key(kxen_home, ws, fakes):
    fakes.add("f", tools={})
    kxen_home.write_servers({"s": mem("f", protocolEra="newest")})
    with pytest.raises(ConfigError) as info:
        async with running(kxen_home, ws):
            pass
    assert "mcp.json: mcpServers.s.protocolEra: must be one of auto, legacy, modern" in str(info.value)


# --- requests in the stateless era ----------------------------------------------------------------


def input_required(params: dict[str, Any], state: str | None, request: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"resultType": "input_required", "inputRequests": {"ask": request}}
    if state is not None:
        result["requestState"] = state
    return result


ELICIT = {
    "method": "elicitation/create",
    "params": {"message": "Sure?", "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}},
}


@pytest.mark.parametrize("state", ['opaque \u2603 state {"x": 1}', None])
async def test_input_required_goes_through_the_elicitation_hook_and_echoes_the_state(kxen_home, ws, fakes, state):
    calls: list[dict[str, Any]] = []

    def call(params: dict[str, Any]) -> dict[str, Any]:
        calls.append(params)
        if "inputResponses" not in params:
            return input_required(params, state, ELICIT)
        return {"content": [{"type": "text", "text": f"got {params['inputResponses']['ask']['action']}"}]}

    fake = both(fakes, tools={"t": lambda a: text_result("x")}, methods={"tools/call": call})
    answers = Answers(elicitation={"action": "accept", "content": {"ok": True}})
    async with running(kxen_home, ws, answers, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        result = await rt.call_tool("s__t", {"a": 1})
    assert result["content"][0]["text"] == "got accept"
    assert [r.message for r in answers.requests] == ["Sure?"]
    first, retry = calls
    assert retry["inputResponses"] == {"ask": {"action": "accept", "content": {"ok": True}}}
    assert retry["arguments"] == first["arguments"] == {"a": 1}
    if state is None:
        assert "requestState" not in retry
    else:
        assert retry["requestState"] == state  # verbatim
    ids = [m["id"] for m in fake.received if m.get("method") == "tools/call"]
    assert len(ids) == 2 and ids[0] != ids[1]


SAMPLING = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}


async def test_a_declined_sampling_request_ends_the_call(kxen_home, ws, fakes):
    """Sampling declared (a hook exists) but the hook passes: the call fails, as the request has no
    decline result to send."""
    calls: list[dict[str, Any]] = []

    def ask_sampling(params: dict[str, Any]) -> dict[str, Any]:
        calls.append(params)
        return input_required(params, None, SAMPLING)

    fakes.add("g", tools={"t": lambda a: text_result("x")}, eras=("modern",), methods={"tools/call": ask_sampling})
    passing = Answers(sampling=None)
    async with running(kxen_home, ws, passing, servers={"s": mem("g", defaultToolPolicy="allow")}) as rt:
        with pytest.raises(RequestError, match="sampling/createMessage request was declined"):
            await rt.call_tool("s__t", {})
        assert status_of(rt, "s")["state"] == "ready"
    assert len(calls) == 1  # not sent again: a declined sampling request has no answer to send
    assert len(passing.requests) == 1


@pytest.mark.parametrize("request_", [SAMPLING, ELICIT], ids=["sampling", "elicitation"])
async def test_input_for_an_undeclared_capability_fails_the_call_unanswered(kxen_home, ws, fakes, request_):
    """No hook, nothing declared: the revision forbids the server to ask, so kxen neither asks the
    host nor answers; the call fails naming the method, nothing is sent again."""
    calls: list[dict[str, Any]] = []

    def call(params: dict[str, Any]) -> dict[str, Any]:
        calls.append(params)
        return input_required(params, None, request_)

    fakes.add("g", tools={"t": lambda a: text_result("x")}, eras=("modern",), methods={"tools/call": call})
    async with running(kxen_home, ws, servers={"s": mem("g", defaultToolPolicy="allow")}) as rt:
        with pytest.raises(ProtocolError, match=f"{request_['method']}.*a capability kxen did not declare"):
            await rt.call_tool("s__t", {})
        assert status_of(rt, "s")["state"] == "ready"
    assert len(calls) == 1


async def test_input_required_with_a_passing_handler_sends_decline(kxen_home, ws, fakes):
    responses: list[Any] = []

    def call(params: dict[str, Any]) -> dict[str, Any]:
        if "inputResponses" not in params:
            return input_required(params, None, ELICIT)
        responses.append(params["inputResponses"])
        return text_result("ok")

    both(fakes, tools={"t": lambda a: text_result("x")}, methods={"tools/call": call})
    passing = Answers(elicitation=None)
    async with running(kxen_home, ws, passing, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        await rt.call_tool("s__t", {})
    assert responses == [{"ask": {"action": "decline"}}]


async def test_an_endless_input_loop_stops_after_the_bound(kxen_home, ws, fakes):
    counted = {"n": 0}

    def call(params: dict[str, Any]) -> dict[str, Any]:
        counted["n"] += 1
        return input_required(params, "again", ELICIT)

    both(fakes, tools={"t": lambda a: text_result("x")}, methods={"tools/call": call})
    passing = Answers(elicitation=None)  # declared, so each round is answered (declined)
    async with running(kxen_home, ws, passing, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        with pytest.raises(ProtocolError, match=f"after {MAX_INPUT_ROUNDS} rounds"):
            await rt.call_tool("s__t", {})
        assert status_of(rt, "s")["state"] == "ready"  # one call failed, the server is fine
    assert counted["n"] == MAX_INPUT_ROUNDS + 1


@pytest.mark.parametrize(
    "result, problem",
    [
        ({"resultType": "partial", "content": []}, "unknown resultType 'partial'"),
        ({"resultType": ["complete"], "content": []}, "unknown resultType"),
        ({"resultType": "input_required", "inputRequests": ["not", "a", "map"]}, "inputRequests must be an object"),
        ({"resultType": "input_required", "inputRequests": {"k": {"method": "rm/rf", "params": {}}}}, "cannot give"),
        (
            {"resultType": "input_required", "inputRequests": {f"k{i}": ELICIT for i in range(40)}},
            "more than 16 input requests",
        ),
        ({"resultType": "input_required", "inputRequests": {}, "requestState": 42}, "requestState must be a string"),
    ],
)
async def test_hostile_results_fail_the_call_not_the_server(kxen_home, ws, fakes, result, problem):
    both(fakes, tools={"t": lambda a: text_result("x")}, methods={"tools/call": lambda p: result})
    async with running(kxen_home, ws, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        with pytest.raises(ProtocolError, match=problem):
            await rt.call_tool("s__t", {})
        assert status_of(rt, "s")["state"] == "ready"


async def test_a_missing_result_type_is_complete_and_a_list_cannot_ask_for_input(kxen_home, ws, fakes):
    both(fakes, tools={"t": lambda a: {"content": [{"type": "text", "text": "plain"}]}})
    async with running(kxen_home, ws, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        assert (await rt.call_tool("s__t", {}))["content"][0]["text"] == "plain"
    fakes.add(
        "g",
        tools={},
        eras=("modern",),
        methods={"tools/list": lambda p: {"resultType": "input_required", "inputRequests": {}}},
    )
    async with running(kxen_home, ws, servers={"s": mem("g")}) as rt:
        row = status_of(rt, "s")
        assert (row["state"], row["phase"]) == ("failed", "catalog") and "asked for input" in row["error"]


async def test_new_error_codes(kxen_home, ws, fakes):
    versions: list[str] = []

    def call(params: dict[str, Any]) -> dict[str, Any]:
        name = params["name"]
        if name == "caps":
            raise FakeError(-32021, "need it", {"requiredCapabilities": ["sampling"]})
        versions.append(params["_meta"][META_VERSION])
        if len(versions) == 1:
            raise FakeError(-32022, "not that one", {"supported": [V]})
        if name == "never":
            raise FakeError(-32022, "still not", {"supported": ["1999-01-01"]})
        return text_result("ok")

    both(fakes, tools={"caps": lambda a: {}, "vers": lambda a: {}, "never": lambda a: {}}, methods={"tools/call": call})
    async with running(kxen_home, ws, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        with pytest.raises(RemoteError, match="client capabilities this host does not offer \\(sampling\\)"):
            await rt.call_tool("s__caps", {})
        assert (await rt.call_tool("s__vers", {}))["content"][0]["text"] == "ok"  # retried once
        with pytest.raises(RemoteError, match="no protocol version in common"):
            await rt.call_tool("s__never", {})
    assert versions == [V, V, V]


async def test_a_caching_hint_refetches_the_catalog_when_it_runs_out(kxen_home, ws, fakes, monkeypatch):
    monkeypatch.setattr(server_catalogs, "MIN_TTL_SECONDS", 0.05)
    fake = both(
        fakes,
        methods={"tools/list": lambda p: {"tools": [{"name": "t", "inputSchema": {"type": "object"}}], "ttlMs": 10}},
    )
    async with running(kxen_home, ws, servers={"s": mem("f")}):
        await until(lambda: fake.received_methods().count("tools/list") >= 3)
    plain = fakes.add(
        "g", tools={"t": lambda a: {}}, methods={"tools/list": lambda p: {"tools": [{"name": "t"}], "ttlMs": 10}}
    )
    async with running(kxen_home, ws, servers={"s": mem("g")}):
        await anyio.sleep(0.3)
    assert plain.received_methods().count("tools/list") == 1  # the handshake era: hints are not the era's

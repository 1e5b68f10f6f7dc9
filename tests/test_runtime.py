"""The Runtime over the in-memory transport and the scriptable FakeServer (kxen-testing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from kxen_testing import Channel, FakeError, FakeServer, mem, running, text_result

from kxen_core import hookimpl
from kxen_core.errors import (
    ApprovalDenied,
    ClosedError,
    ConfigError,
    PolicyDenied,
    RemoteError,
    RequestTimeout,
    ServerNotReady,
    UnknownTool,
)
from kxen_core.plugins.manager import LoadFailure, make_plugin_manager
from kxen_core.policy import Vote
from kxen_core.runtime.workspace import Runtime

pytestmark = pytest.mark.anyio

WAIT = 10

#: every status entry has these keys; the rest may only be these optional, secret-free extras
STATUS_KEYS = {"name", "scope", "transport", "state", "phase", "error", "tools", "resources", "prompts"}
OPTIONAL_STATUS_KEYS = {
    "serverInfo",
    "instructions",
    "diagnostics",
    "note",
    "fingerprint",
    "transportInfo",
    "log",
    "auth",
    "next",
    "scopes",
    "era",
    "protocolVersion",
    "tasks",  # {"running", "lines"}: the tasks of its calls this runtime knows (runtime.tasks)
    "pinning",  # pinned tool definitions: the mode, and the tools that wait for a person
    "held",
    "unaccepted",
    "toolsHidden",  # what the model is shown of the tools, and its size (kxen_core.runtime.server_filters)
    "toolChars",
    "toolTokens",
}


# --- helpers ----------------------------------------------------------------------------------


def echo(args: dict[str, Any]) -> dict[str, Any]:
    return text_result(f"echo: {args.get('text', '')}")


def only_memory_pm(*extra: Any):
    """Only the memory transport (and the core defaults), so other installed plugins cannot interfere."""
    return make_plugin_manager(allow=["memory"], extra=list(extra))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


def status_of(rt: Runtime, name: str) -> dict[str, Any]:
    (entry,) = [s for s in rt.status() if s["name"] == name]
    return entry


def tool_calls(fake: FakeServer) -> list[dict[str, Any]]:
    return [m for m in fake.received if m.get("method") == "tools/call"]


async def until(predicate, timeout: float = 5) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.01)


class Voter:
    def __init__(self, name: str, decide) -> None:
        self.decide = decide
        self.calls: list[Any] = []
        self.__name__ = name

    @hookimpl
    async def kxen_policy_decision(self, call):
        self.calls.append(call)
        return self.decide(call)


# --- starting and status ----------------------------------------------------------------------


async def test_server_goes_ready_with_counts(kxen_home, ws, fakes):
    fakes.add(
        "f",
        tools={"echo": echo, "add": lambda a: text_result(str(a["a"] + a["b"]))},
        resources=[{"uri": "file:///a", "name": "a"}, {"uri": "file:///b", "name": "b"}],
        prompts=[{"name": "greet"}],
    )
    kxen_home.write_servers({"demo": mem("f")})
    async with running(kxen_home, ws) as rt:
        s = status_of(rt, "demo")
        assert s["state"] == "ready"
        assert (s["tools"], s["resources"], s["prompts"]) == (2, 2, 1)
        assert (s["scope"], s["transport"], s["phase"], s["error"]) == ("user", "memory", None, None)
        assert {t["qualifiedName"] for t in rt.tools("demo")} == {"demo__echo", "demo__add"}
        # beside them, kxen's own resource and prompt tools (the server declared both capabilities)
        assert {t["qualifiedName"] for t in rt.tools() if t["server"] is None} == {
            "kxen_list_resources",
            "kxen_list_resource_templates",
            "kxen_read_resource",
            "kxen_list_prompts",
            "kxen_get_prompt",
        }
        tool = next(t for t in rt.tools() if t["name"] == "echo")
        assert tool == {
            "server": "demo",
            "name": "echo",
            "qualifiedName": "demo__echo",
            "description": "fake tool echo",
            "inputSchema": {"type": "object"},
            "policy": "ask",  # the config's default: a call asks
        }


def test_kxen_tool_names_hold_no_server_separator():
    # call_tool takes a name with the separator (server__tool) as a server's without asking
    # whether it is one of kxen's own: that holds only while none of theirs has one
    from kxen_core.agent.tool_names import SEPARATOR
    from kxen_core.runtime import kxen_tools, search_tools

    names = [*kxen_tools.TOOLS, search_tools.SEARCH_TOOL]
    assert names and not [n for n in names if SEPARATOR in n]


async def test_a_kxen_tool_is_called_by_its_name_beside_a_server_named_like_it(kxen_home, ws, fakes):
    fakes.add("f", tools={"echo": echo}, resources=[{"uri": "file:///a", "name": "a"}])
    kxen_home.write_servers({"kxen": mem("f", defaultToolPolicy="allow")})
    async with running(kxen_home, ws) as rt:
        listed = await rt.call_tool("kxen_list_resources", {})
        assert "file:///a" in listed["content"][0]["text"]
        assert await rt.call_tool("kxen__echo", {"text": "hi"}) == text_result("echo: hi")


async def test_status_keys(kxen_home, ws, fakes):
    fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"demo": mem("f"), "off": mem("f", enabled=False), "broken": mem("not-registered")})
    async with running(kxen_home, ws) as rt:
        status = rt.status()
        assert {s["name"] for s in status} == {"demo", "off", "broken"}
        for s in status:
            assert STATUS_KEYS <= set(s), s
            assert set(s) <= STATUS_KEYS | OPTIONAL_STATUS_KEYS, set(s) - STATUS_KEYS - OPTIONAL_STATUS_KEYS
            assert isinstance(s["tools"], int) and isinstance(s["resources"], int) and isinstance(s["prompts"], int)
            json.dumps(s)  # status is plain JSON


async def test_handshake_order_seen_by_the_server(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"demo": mem("f")})
    async with running(kxen_home, ws):
        methods = fake.received_methods()
        # the era probe first (the fake speaks the handshake era: -32601), then the handshake
        assert methods[:4] == ["server/discover", "initialize", "notifications/initialized", "tools/list"]
        init = fake.received[1]["params"]
        assert init["clientInfo"]["name"] == "kxen"


async def test_paged_catalog_is_walked(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={f"t{i}": echo for i in range(7)}, page_size=2)
    kxen_home.write_servers({"demo": mem("f")})
    async with running(kxen_home, ws) as rt:
        assert status_of(rt, "demo")["tools"] == 7
        assert fake.received_methods().count("tools/list") == 4


async def test_disabled_server_is_never_started(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"off": mem("f", enabled=False)})
    async with running(kxen_home, ws) as rt:
        s = status_of(rt, "off")
        assert s["state"] == "disabled"
        assert s["tools"] == 0
        assert fake.connections == 0
        with pytest.raises(ServerNotReady) as info:
            await rt.call_tool("off__echo", {})
        assert info.value.state == "disabled"
        assert rt.tools() == []


async def test_unknown_transport_kind_is_a_config_error_naming_its_key_path(kxen_home, ws, fakes):
    kxen_home.write_servers({"x": {"transport": "carrier-pigeon"}, "y": mem("f")})
    with pytest.raises(ConfigError) as info:
        async with running(kxen_home, ws):
            pass  # pragma: no cover
    (problem,) = info.value.problems
    assert problem.startswith(
        f"{kxen_home.path / 'mcp.json'}: mcpServers.x.transport: unknown transport kind 'carrier-pigeon'"
    )
    assert "installed kinds: memory" in problem


async def test_transport_plugin_that_failed_to_load_is_named(kxen_home, ws, fakes):
    """A kind no plugin provides while a plugin failed to load: that server fails closed with the
    cause (the kind may be the broken plugin's); the rest start."""
    fakes.add("f", tools={"echo": echo})
    pm = only_memory_pm()
    pm.entry_failures.append(
        LoadFailure(dist="kxen-transport-pigeon", entry_point="pigeon", error="ImportError: no wings")
    )
    kxen_home.write_servers({"x": {"transport": "pigeon"}, "y": mem("f")})
    async with running(kxen_home, ws, pm=pm) as rt:
        s = status_of(rt, "x")
        assert (s["state"], s["phase"]) == ("failed", "transport")
        assert "kxen-transport-pigeon[pigeon]" in s["error"] and "no wings" in s["error"]
        assert status_of(rt, "y")["state"] == "ready"


async def test_raising_transport_plugin_fails_only_its_server(kxen_home, ws, fakes):
    class Exploding:
        __name__ = "exploding-transport"

        @hookimpl
        def kxen_register_transports(self, register):
            def opener(server, context):
                raise RuntimeError("plugin bug")

            register("exploding", opener)

    fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"bad": {"transport": "exploding"}, "good": mem("f")})
    async with running(kxen_home, ws, Exploding()) as rt:
        bad = status_of(rt, "bad")
        assert (bad["state"], bad["phase"]) == ("failed", "transport")
        assert "plugin bug" in bad["error"]
        assert status_of(rt, "good")["state"] == "ready"


async def test_connect_error_fails_in_phase_transport(kxen_home, ws, fakes):
    kxen_home.write_servers({"ghost": mem("not-registered")})
    async with running(kxen_home, ws) as rt:
        s = status_of(rt, "ghost")
        assert (s["state"], s["phase"]) == ("failed", "transport")


async def test_initialize_error_fails_in_phase_initialize(kxen_home, ws, fakes):
    def refuse(params):
        raise FakeError(-32603, "cannot start")

    fakes.add("f", tools={"echo": echo}, methods={"initialize": refuse})
    kxen_home.write_servers({"demo": mem("f")})
    async with running(kxen_home, ws) as rt:
        s = status_of(rt, "demo")
        assert (s["state"], s["phase"]) == ("failed", "initialize")
        assert "cannot start" in s["error"]  # the server's reason is reported


async def test_unsupported_protocol_version_fails_in_phase_initialize(kxen_home, ws, fakes):
    fakes.add("f", tools={"echo": echo}, protocol_version="1999-01-01")
    kxen_home.write_servers({"demo": mem("f")})
    async with running(kxen_home, ws) as rt:
        s = status_of(rt, "demo")
        assert (s["state"], s["phase"]) == ("failed", "initialize")


async def test_tools_list_error_fails_in_phase_catalog(kxen_home, ws, fakes):
    def refuse(params):
        raise FakeError(-32603, "no list today")

    fakes.add("f", tools={"echo": echo}, methods={"tools/list": refuse})
    kxen_home.write_servers({"demo": mem("f")})
    async with running(kxen_home, ws) as rt:
        s = status_of(rt, "demo")
        assert (s["state"], s["phase"]) == ("failed", "catalog")


async def test_optional_catalog_failure_keeps_the_server_ready(kxen_home, ws, fakes):
    def refuse(params):
        raise FakeError(-32603, "no resources")

    fakes.add("f", tools={"echo": echo}, resources=[], methods={"resources/list": refuse})
    kxen_home.write_servers({"demo": mem("f")})
    async with running(kxen_home, ws) as rt:
        s = status_of(rt, "demo")
        assert s["state"] == "ready" and s["tools"] == 1 and s["resources"] == 0
        assert any("resources/list" in d for d in s["diagnostics"])


async def test_initialize_timeout_fails_in_phase_initialize(kxen_home, ws, fakes):
    fakes.add("f", tools={"echo": echo}, hang={"initialize"})
    kxen_home.write_servers({"slow": mem("f", timeouts={"initializeSeconds": 0.2})})
    async with running(kxen_home, ws) as rt:
        s = status_of(rt, "slow")
        assert (s["state"], s["phase"]) == ("failed", "initialize")


# --- calls and policy -------------------------------------------------------------------------


async def test_call_tool_routes_by_qualified_name(kxen_home, ws, fakes):
    a = fakes.add("fa", tools={"echo": echo})
    b = fakes.add("fb", tools={"echo": lambda args: text_result("from b")})
    kxen_home.write_servers(
        {"alpha": mem("fa", defaultToolPolicy="allow"), "beta": mem("fb", defaultToolPolicy="allow")}
    )
    async with running(kxen_home, ws) as rt:
        result = await rt.call_tool("alpha__echo", {"text": "hi"})
        assert result == text_result("echo: hi")
        # the name and arguments as given, and a progress token (resetOnProgress: docs/config.md, "Timeouts")
        ((sent,),) = [[c["params"] for c in tool_calls(a)]]
        assert sent == {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": "kxen-1"}}
        assert tool_calls(b) == []
        assert await rt.call_tool("echo", {}, server="beta") == text_result("from b")
        assert len(tool_calls(b)) == 1 and len(tool_calls(a)) == 1


async def test_tool_names_with_double_underscores_split_at_the_first(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"do__it": echo})
    kxen_home.write_servers({"s": mem("f", defaultToolPolicy="allow")})
    async with running(kxen_home, ws) as rt:
        await rt.call_tool("s__do__it", {"text": "x"})
        assert tool_calls(fake)[0]["params"]["name"] == "do__it"


@pytest.mark.parametrize("name", ["nounderscore", "__tool", "srv__", "missing__echo", "demo__nope"])
async def test_unknown_names_are_refused_before_anything_is_sent(kxen_home, ws, fakes, name):
    fake = fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"demo": mem("f", defaultToolPolicy="allow")})
    async with running(kxen_home, ws) as rt:
        with pytest.raises(UnknownTool):
            await rt.call_tool(name, {})
        assert tool_calls(fake) == []


async def test_deny_policy_never_reaches_the_server(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"rm": echo, "ls": echo})
    kxen_home.write_servers({"fs": mem("f", toolPolicies={"rm": "deny", "ls": "allow"}, defaultToolPolicy="allow")})
    async with running(kxen_home, ws) as rt:
        with pytest.raises(PolicyDenied) as info:
            await rt.call_tool("fs__rm", {"path": "/"})
        assert "fs__rm" in str(info.value)
        assert [v.decision for v in info.value.votes] == ["deny"]
        assert tool_calls(fake) == []
        await rt.call_tool("fs__ls", {})
        assert [c["params"]["name"] for c in tool_calls(fake)] == ["ls"]


async def test_default_deny_policy(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"s": mem("f", defaultToolPolicy="deny")})
    async with running(kxen_home, ws) as rt:
        with pytest.raises(PolicyDenied):
            await rt.call_tool("s__echo", {})
        assert tool_calls(fake) == []


async def test_ask_without_an_approval_channel_is_denied(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"s": mem("f")})  # defaultToolPolicy is "ask"
    async with running(kxen_home, ws) as rt:
        assert rt.pm.hook.kxen_approval_prompt.get_hookimpls() == []
        with pytest.raises(ApprovalDenied):
            await rt.call_tool("s__echo", {"text": "x"})
        assert tool_calls(fake) == []


async def test_ask_with_a_channel_that_declines(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"echo": echo})
    channel = Channel(approved=False)
    kxen_home.write_servers({"s": mem("f", toolPolicies={"echo": "ask"}, defaultToolPolicy="allow")})
    async with running(kxen_home, ws, channel) as rt:
        with pytest.raises(ApprovalDenied):
            await rt.call_tool("s__echo", {"text": "x"})
        assert tool_calls(fake) == []
        (request,) = channel.requests
        assert request.kind == "tool_call" and request.server == "s"
        assert request.details["arguments"] == {"text": "x"}


async def test_ask_with_a_channel_that_approves(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"echo": echo})
    channel = Channel(approved=True)
    kxen_home.write_servers({"s": mem("f")})
    async with running(kxen_home, ws, channel) as rt:
        assert await rt.call_tool("s__echo", {"text": "ok"}) == text_result("echo: ok")
        assert len(channel.requests) == 1
        assert len(tool_calls(fake)) == 1


async def test_raising_policy_plugin_counts_as_deny(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"echo": echo})

    def explode(call):
        raise RuntimeError("policy bug")

    voter = Voter("flaky-policy", explode)
    kxen_home.write_servers({"s": mem("f", defaultToolPolicy="allow", toolPolicies={"echo": "allow"})})
    async with running(kxen_home, ws, voter) as rt:
        with pytest.raises(PolicyDenied) as info:
            await rt.call_tool("s__echo", {})
        assert "flaky-policy" in str(info.value)
        assert any(v.plugin == "flaky-policy" and v.decision == "deny" for v in info.value.votes)
        assert tool_calls(fake) == []


@pytest.mark.parametrize(
    ("plugin_vote", "config", "outcome"),
    [
        (Vote.deny("no"), "allow", PolicyDenied),
        (Vote.allow("yes"), "deny", PolicyDenied),  # a plugin's allow never beats the config's deny
        (Vote.ask("hmm"), "allow", ApprovalDenied),  # ask beats allow; no channel -> no
        (Vote.allow("yes"), "ask", ApprovalDenied),
        (Vote.allow("yes"), "allow", None),
        (None, "allow", None),
    ],
)
async def test_votes_combine_as_a_veto(kxen_home, ws, fakes, plugin_vote, config, outcome):
    fake = fakes.add("f", tools={"echo": echo})
    voter = Voter("voter", lambda call: plugin_vote)
    kxen_home.write_servers({"s": mem("f", toolPolicies={"echo": config})})
    async with running(kxen_home, ws, voter) as rt:
        if outcome is None:
            await rt.call_tool("s__echo", {"text": "x"})
            assert len(tool_calls(fake)) == 1
        else:
            with pytest.raises(outcome):
                await rt.call_tool("s__echo", {"text": "x"})
            assert tool_calls(fake) == []
        (call,) = voter.calls
        assert (call.server.name, call.tool, call.arguments) == ("s", "echo", {"text": "x"})


async def test_remote_error_and_tool_error_results(kxen_home, ws, fakes):
    def failing(args):
        raise FakeError(-32000, "tool exploded")

    fakes.add("f", tools={"bad": failing, "soft": lambda a: text_result("oops", is_error=True)})
    kxen_home.write_servers({"s": mem("f", defaultToolPolicy="allow")})
    async with running(kxen_home, ws) as rt:
        with pytest.raises(RemoteError) as info:
            await rt.call_tool("s__bad", {})
        assert info.value.code == -32000
        assert (await rt.call_tool("s__soft", {}))["isError"] is True
        assert status_of(rt, "s")["state"] == "ready"


async def test_call_timeout_cancels_on_the_wire(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"slow": echo}, hang={"tools/call"})
    kxen_home.write_servers({"s": mem("f", defaultToolPolicy="allow")})
    async with running(kxen_home, ws) as rt:
        with anyio.fail_after(5), pytest.raises(RequestTimeout):
            await rt.call_tool("s__slow", {}, timeout=0.1)
        (call,) = tool_calls(fake)
        await until(lambda: any(m.get("method") == "notifications/cancelled" for m in fake.received))
        cancel = next(m for m in fake.received if m.get("method") == "notifications/cancelled")
        assert cancel["params"]["requestId"] == call["id"]
        assert status_of(rt, "s")["state"] == "ready"


# --- connection loss, stop, reload ------------------------------------------------------------


async def test_connection_dying_while_ready_fails_pending_calls_at_once(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"slow": echo}, hang={"tools/call"})
    kxen_home.write_servers({"s": mem("f", defaultToolPolicy="allow", timeouts={"requestSeconds": 30})})
    async with running(kxen_home, ws) as rt:
        fake.die_after = len(fake.received) + 1  # the next message (the call) kills the connection
        with anyio.fail_after(2), pytest.raises(ClosedError):
            await rt.call_tool("s__slow", {})
        await until(lambda: status_of(rt, "s")["state"] == "failed")
        s = status_of(rt, "s")
        assert s["phase"] == "transport" and s["error"]
        with pytest.raises(ServerNotReady) as info:
            await rt.call_tool("s__slow", {})
        assert info.value.phase == "transport"
        assert rt.tools() == []


async def test_stop_server_fails_pending_calls_at_once(kxen_home, ws, fakes):
    fakes.add("f", tools={"slow": echo}, hang={"tools/call"})
    kxen_home.write_servers({"s": mem("f", defaultToolPolicy="allow", timeouts={"requestSeconds": 30})})
    async with running(kxen_home, ws) as rt:
        errors: list[BaseException] = []

        async def call():
            try:
                await rt.call_tool("s__slow", {})
            except Exception as exc:
                errors.append(exc)

        with anyio.fail_after(3):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await until(lambda: tool_calls(fakes_get("f")) != [])
                await rt.stop_server("s")
        assert len(errors) == 1 and isinstance(errors[0], ClosedError)
        assert status_of(rt, "s")["state"] == "stopped"


def fakes_get(name: str) -> FakeServer:
    from kxen_testing import get_fake

    return get_fake(name)


async def test_failed_reload_keeps_running_servers(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"s": mem("f", defaultToolPolicy="allow")})
    async with running(kxen_home, ws) as rt:
        before = rt.status()
        (kxen_home.path / "mcp.json").write_text('{"mcpServers": {"s": ')
        with pytest.raises(ConfigError) as info:
            await rt.reload()
        assert any("mcp.json" in p for p in info.value.problems)
        kxen_home.write_servers({"s": mem("f", defaultToolPolicy="allow", bogus=1)})
        with pytest.raises(ConfigError):
            await rt.reload()
        assert rt.status() == before
        assert status_of(rt, "s")["state"] == "ready"
        assert await rt.call_tool("s__echo", {"text": "still"}) == text_result("echo: still")
        assert fake.connections == 1


async def test_reload_keeps_unchanged_servers_and_applies_changes(kxen_home, ws, fakes):
    keep = fakes.add("keep", tools={"echo": echo})
    change = fakes.add("change", tools={"echo": echo})
    gone = fakes.add("gone", tools={"echo": echo})
    new = fakes.add("new", tools={"echo": echo})
    kxen_home.write_servers({"k": mem("keep"), "c": mem("change"), "gone": mem("gone")})
    async with running(kxen_home, ws) as rt:
        kxen_home.write_servers({"k": mem("keep"), "c": mem("change", defaultToolPolicy="allow"), "n": mem("new")})
        await rt.reload()
        with anyio.fail_after(WAIT):
            assert await rt.wait_ready()
        assert {s["name"]: s["state"] for s in rt.status()} == {"k": "ready", "c": "ready", "n": "ready"}
        assert keep.connections == 1  # untouched
        assert change.connections == 2  # stopped and started again with the new entry
        assert gone.connections == 1
        assert new.connections == 1
        await rt.call_tool("c__echo", {})  # the new policy is in force


async def test_list_changed_triggers_a_refetch(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"s": mem("f")})
    async with running(kxen_home, ws) as rt:
        assert status_of(rt, "s")["tools"] == 1
        fake.tool_defs.append({"name": "added", "inputSchema": {"type": "object"}})
        with anyio.fail_after(5):
            await fake.notify("notifications/tools/list_changed")
        await until(lambda: status_of(rt, "s")["tools"] == 2)
        assert "s__added" in {t["qualifiedName"] for t in rt.tools()}
        assert fake.received_methods().count("tools/list") == 2


async def test_burst_of_list_changed_is_debounced(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"s": mem("f")})
    async with running(kxen_home, ws) as rt:
        fake.tool_defs.append({"name": "added", "inputSchema": {"type": "object"}})
        with anyio.fail_after(5):
            for _ in range(5):
                await fake.notify("notifications/tools/list_changed")
        await until(lambda: status_of(rt, "s")["tools"] == 2)
        await anyio.sleep(0.2)  # let any extra refetch happen before counting
        assert fake.received_methods().count("tools/list") <= 3


async def test_stopping_the_runtime_stops_every_server(kxen_home, ws, fakes):
    fakes.add("fa", tools={"echo": echo})
    fakes.add("fb", tools={"echo": echo})
    kxen_home.write_servers({"a": mem("fa"), "b": mem("fb")})
    with anyio.fail_after(WAIT):
        async with running(kxen_home, ws) as rt:
            assert {s["state"] for s in rt.status()} == {"ready"}
    assert {s["state"] for s in rt.status()} == {"stopped"}


async def test_two_servers_may_share_one_fake(kxen_home, ws, fakes):
    fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers(
        {"a": mem("f", timeouts={"initializeSeconds": 1}), "b": mem("f", timeouts={"initializeSeconds": 1})}
    )
    async with running(kxen_home, ws) as rt:
        assert {s["state"] for s in rt.status()} == {"ready"}


async def test_raising_transport_closed_observer_does_not_take_the_runtime_down(kxen_home, ws, fakes):
    class Observer:
        __name__ = "bad-observer"

        @hookimpl
        def kxen_transport_closed(self, server, reason):
            raise RuntimeError("observer bug")

    fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"good": mem("f", defaultToolPolicy="allow"), "broken": mem("not-registered")})
    with anyio.fail_after(WAIT):
        async with running(kxen_home, ws, Observer()) as rt:
            assert status_of(rt, "broken")["state"] == "failed"
            assert await rt.call_tool("good__echo", {"text": "x"}) == text_result("echo: x")


async def test_list_changed_during_the_initial_listing_is_not_lost(kxen_home, ws, fakes):
    fake = fakes.add("f", tools={"echo": echo}, resources=[])

    async def resources_list(params):
        # tools/list has been answered; the server's tools change while kxen lists resources
        fake.tool_defs.append({"name": "late", "inputSchema": {"type": "object"}})
        await fake.notify("notifications/tools/list_changed")
        return {"resources": []}

    fake.methods["resources/list"] = resources_list
    kxen_home.write_servers({"s": mem("f")})
    async with running(kxen_home, ws) as rt:
        await until(lambda: status_of(rt, "s")["tools"] == 2, timeout=2)

"""Tool-call policy: votes (config toolPolicies, roles, safety, plugins) combined as a veto, ``ask``
through an approval channel, and nothing sent to a server unless the answer is yes.

"Sent" is proved on the server side: demo/server.py ``--log`` records every message it receives,
and the in-memory fake server records its ``received`` messages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from kxen_testing import Channel, text_result
from support import demo_entry

from kxen_core import hookimpl
from kxen_core.errors import ApprovalDenied, PolicyDenied
from kxen_core.plugins.manager import make_plugin_manager
from kxen_core.policy import ToolCall, Vote, combine, fingerprint
from kxen_core.policy.pins import tool_digest
from kxen_core.runtime.workspace import Runtime

pytestmark = pytest.mark.anyio

WAIT = 30


# --- helpers ----------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _workspace_outside_the_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workspace (the cwd) is an empty directory: with this repository as the workspace, the
    demo server (one of its files) would be a held launch, waiting for trust and approval."""
    ws = tmp_path / "cwd-workspace"
    ws.mkdir()
    monkeypatch.chdir(ws)


def pm_with(*extra: Any):
    """Installed plugins plus ``extra``; the only approval channels are those in ``extra``."""
    pm = make_plugin_manager(extra=list(extra))
    for impl in list(pm.hook.kxen_approval_prompt.get_hookimpls()):
        if impl.plugin not in extra:
            pm.unregister(impl.plugin)
    return pm


def calls_logged(log: Path) -> list[str]:
    out = []
    for line in log.read_text().splitlines():
        msg = json.loads(line)
        if msg.get("method") == "tools/call":
            out.append(msg["params"]["name"])
    return out


def fake_calls(fake: Any) -> list[str]:
    return [m["params"]["name"] for m in fake.received if m.get("method") == "tools/call"]


async def settle(rt: Runtime) -> None:
    with anyio.fail_after(WAIT):
        assert await rt.wait_ready()
    assert {s["state"] for s in rt.status()} == {"ready"}, rt.status()


async def call(rt: Runtime, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    with anyio.fail_after(WAIT):
        return await rt.call_tool(name, args or {})


class Voter:
    """A policy plugin that votes ``decision`` on every call (or raises)."""

    def __init__(self, decision: str | Exception, name: str) -> None:
        self.decision = decision
        self.__name__ = name

    @hookimpl
    def kxen_policy_decision(self, call: ToolCall) -> Vote | None:
        if isinstance(self.decision, Exception):
            raise self.decision
        return Vote(decision=self.decision, reason=f"{self.__name__} says {self.decision}")  # type: ignore[arg-type]


TOOLS = ("read_a", "read_secret", "write_x", "other", "echo")


@pytest.fixture
def fake(kxen_home, fakes):
    """A user-scope in-memory server ``srv`` whose tools answer with their own name."""

    def server(default: str = "allow", **extra: Any):
        kxen_home.write_servers({"srv": {"transport": "memory", "defaultToolPolicy": default, **extra}})
        return fakes.add("srv", tools={t: (lambda a, t=t: text_result(t)) for t in TOOLS})

    return server


# --- deny / allow, proved on a real stdio server ------------------------------------------------


async def test_denied_tools_never_reach_the_server_and_allowed_ones_do(kxen_home, tmp_path):
    log = tmp_path / "demo.log"
    kxen_home.write_servers({"demo": demo_entry(log, toolPolicies={"echo": "allow", "add": "deny"})})
    async with Runtime(pm=pm_with(Channel(approved=True))) as rt:  # even a yes-channel is not asked for deny
        await settle(rt)
        result = await call(rt, "demo__echo", {"text": "hello"})
        assert result["content"][0]["text"] == "hello"
        with pytest.raises(PolicyDenied) as info:
            await call(rt, "demo__add", {"a": 1, "b": 2})
        assert "demo__add denied by policy" in str(info.value)
        assert "toolPolicies.add" in str(info.value)
        assert [v.plugin for v in info.value.votes] == ["kxen.config-policy"]
        await call(rt, "demo__echo", {"text": "again"})
    assert calls_logged(log) == ["echo", "echo"]


async def test_ask_without_a_channel_is_denied_and_not_sent(kxen_home, tmp_path):
    log = tmp_path / "demo.log"
    kxen_home.write_servers({"demo": demo_entry(log)})  # defaultToolPolicy is ask
    async with Runtime(pm=pm_with()) as rt:
        await settle(rt)
        with pytest.raises(ApprovalDenied) as info:
            await call(rt, "demo__echo", {"text": "hi"})
        assert "no approval channel" in str(info.value)
        # bound to what runs behind the name (scope, kind and the launch fingerprint) and to the
        # digest of the tool's definition
        launch = rt.servers["demo"].launch
        assert launch is not None and launch.command is not None
        identity = {"scope": "user", "kind": "stdio", "launch": launch.fingerprint}
        pin = tool_digest(rt.servers["demo"].tools_by_name["echo"])
        fp = fingerprint(
            {"server": "demo", "identity": identity, "tool": "echo", "arguments": {"text": "hi"}, "pin": pin}
        )
        assert fp in str(info.value)
    assert calls_logged(log) == []

    # the fingerprint in the message approves exactly that call for one process
    async with Runtime(pm=pm_with(), approve=[fp]) as rt:
        await settle(rt)
        assert (await call(rt, "demo__echo", {"text": "hi"}))["content"][0]["text"] == "hi"
        with pytest.raises(ApprovalDenied):
            await call(rt, "demo__echo", {"text": "other arguments"})
    assert calls_logged(log) == ["echo"]


async def test_an_approved_fingerprint_does_not_lift_a_deny(fake):
    from kxen_core.config import load_config
    from kxen_core.launch.resolve import resolve_launch
    from kxen_core.policy.approvals import call_fingerprint

    server = fake(toolPolicies={"echo": "deny"})
    entry = load_config(None, Path.cwd()).servers["srv"]
    launch = resolve_launch(entry, Path.cwd().resolve())
    fp = call_fingerprint(ToolCall(server=entry, tool="echo", arguments={}, launch=launch))  # exactly this call
    async with Runtime(pm=pm_with(Channel(approved=True)), approve=[fp]) as rt:
        await settle(rt)
        with pytest.raises(PolicyDenied):
            await call(rt, "srv__echo")
    assert fake_calls(server) == []


async def test_ask_with_an_approving_channel_goes_through(kxen_home, tmp_path):
    log = tmp_path / "demo.log"
    kxen_home.write_servers({"demo": demo_entry(log, toolPolicies={"add": "ask"}, defaultToolPolicy="deny")})
    channel = Channel(approved=True)
    async with Runtime(pm=pm_with(channel)) as rt:
        await settle(rt)
        result = await call(rt, "demo__add", {"a": 2, "b": 3})
        assert result["structuredContent"] == {"sum": 5}
        await call(rt, "demo__add", {"a": 2, "b": 3})  # the same call: approved earlier in this process
        await call(rt, "demo__add", {"a": 1, "b": 1})  # other arguments: asked again
        launch = rt.servers["demo"].launch
        assert launch is not None
        pin = tool_digest(rt.servers["demo"].tools_by_name["add"])
    assert [r.kind for r in channel.requests] == ["tool_call", "tool_call"]
    first = channel.requests[0]
    assert first.server == "demo" and "demo__add" in first.summary
    assert first.details["tool"] == "add" and first.details["arguments"] == {"a": 2, "b": 3}
    identity = {"scope": "user", "kind": "stdio", "launch": launch.fingerprint}
    assert first.fingerprint == fingerprint(
        {"server": "demo", "identity": identity, "tool": "add", "arguments": {"a": 2, "b": 3}, "pin": pin}
    )
    assert first.details["scope"] == "user" and first.details["launch"] == launch.display()
    assert calls_logged(log) == ["add", "add", "add"]


async def test_ask_with_a_declining_channel_is_not_sent(kxen_home, tmp_path):
    log = tmp_path / "demo.log"
    kxen_home.write_servers({"demo": demo_entry(log, toolPolicies={"echo": "ask"})})
    channel = Channel(approved=False, reason="the human said no")
    async with Runtime(pm=pm_with(channel)) as rt:
        await settle(rt)
        for _ in range(2):
            with pytest.raises(ApprovalDenied) as info:
                await call(rt, "demo__echo", {"text": "x"})
            assert "the human said no" in str(info.value)
        assert not rt.approved
    assert len(channel.requests) == 2  # a no is not remembered as a yes, nor as a permanent no
    assert calls_logged(log) == []


# --- vote combination -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("votes", "default", "expected"),
    [
        ([], "ask", "ask"),
        ([], "deny", "deny"),
        ([], "allow", "allow"),
        (["allow"], "deny", "allow"),
        (["allow", "ask"], "allow", "ask"),
        (["allow", "ask", "deny"], "allow", "deny"),
        (["deny", "allow"], "allow", "deny"),
        (["ask", "ask"], "allow", "ask"),
    ],
)
def test_combine_is_a_veto(votes, default, expected):
    decision, why = combine([Vote(decision=v, reason=str(i)) for i, v in enumerate(votes)], default)
    assert decision == expected
    assert why and all(v.decision == expected for v in why)
    if not votes:
        assert why[0].reason == "defaultToolPolicy"


@pytest.mark.parametrize(
    ("plugin", "config", "outcome"),
    [
        ("allow", "deny", "denied"),
        ("deny", "allow", "denied"),
        ("ask", "allow", "asked"),
        ("allow", "ask", "asked"),
        ("allow", "allow", "sent"),
    ],
)
async def test_plugin_and_config_votes_combine(fake, plugin, config, outcome):
    server = fake(toolPolicies={"echo": config})
    async with Runtime(pm=pm_with(Voter(plugin, "vote-plugin"))) as rt:
        await settle(rt)
        if outcome == "sent":
            await call(rt, "srv__echo")
        else:
            with pytest.raises(PolicyDenied if outcome == "denied" else ApprovalDenied):
                await call(rt, "srv__echo")
    assert fake_calls(server) == (["echo"] if outcome == "sent" else [])


@pytest.mark.parametrize("default", ["allow", "ask", "deny"])
async def test_default_tool_policy_applies_when_nobody_votes(fake, default):
    server = fake(default=default)
    async with Runtime(pm=pm_with()) as rt:
        await settle(rt)
        if default == "allow":
            await call(rt, "srv__other")
        else:
            with pytest.raises(PolicyDenied if default == "deny" else ApprovalDenied) as info:
                await call(rt, "srv__other")
            if default == "deny":
                assert "defaultToolPolicy" in str(info.value)
    assert fake_calls(server) == (["other"] if default == "allow" else [])


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
async def test_a_policy_plugin_that_raises_counts_as_deny_and_is_named(fake, sync):
    server = fake()

    class Broken:
        __name__ = "broken-policy"

        if sync:

            @hookimpl
            def kxen_policy_decision(self, call):
                raise ValueError("rule table corrupt")

        else:

            @hookimpl
            async def kxen_policy_decision(self, call):
                await anyio.sleep(0)
                raise ValueError("rule table corrupt")

    # another plugin allows, the config allows: the raising one still wins
    async with Runtime(pm=pm_with(Broken(), Voter("allow", "friendly"))) as rt:
        await settle(rt)
        with pytest.raises(PolicyDenied) as info:
            await call(rt, "srv__echo")
    message = str(info.value)
    assert "broken-policy" in message and "rule table corrupt" in message
    votes = info.value.votes
    assert [v.plugin for v in votes] == ["broken-policy"]
    assert fake_calls(server) == []


@pytest.mark.parametrize("answer", ["allow", Vote(decision="yes", reason="?")], ids=["string", "unknown-decision"])  # type: ignore[arg-type]
async def test_a_policy_plugin_with_a_malformed_answer_counts_as_deny(fake, answer):
    server = fake()

    class Sloppy:
        __name__ = "sloppy-policy"

        @hookimpl
        def kxen_policy_decision(self, call):
            return answer

    async with Runtime(pm=pm_with(Sloppy())) as rt:
        await settle(rt)
        with pytest.raises(PolicyDenied, match="sloppy-policy"):
            await call(rt, "srv__echo")
    assert fake_calls(server) == []


async def test_policy_plugins_see_the_call(fake):
    fake(default="allow")
    seen: list[ToolCall] = []

    class Watcher:
        __name__ = "watcher"

        @hookimpl
        def kxen_policy_decision(self, call):
            seen.append(call)

    async with Runtime(pm=pm_with(Watcher()), role=None) as rt:
        await settle(rt)
        await call(rt, "srv__echo", {"k": [1, 2]})
    [c] = seen
    assert (c.qualified_name, c.tool, c.arguments, c.role) == ("srv__echo", "echo", {"k": [1, 2]}, None)
    assert c.tool_info["name"] == "echo" and c.server.name == "srv"


# --- roles ------------------------------------------------------------------------------------


ROLES = """\
[roles.reviewer]
allow = ["srv__read_*", "srv__echo"]
ask = ["srv__write_*"]
deny = ["srv__read_secret"]

[roles.nobody]
"""


@pytest.mark.parametrize(
    ("role", "tool", "outcome"),
    [
        ("reviewer", "read_a", "sent"),
        ("reviewer", "echo", "sent"),
        ("reviewer", "read_secret", "denied"),  # deny beats allow
        ("reviewer", "write_x", "asked"),
        ("reviewer", "other", "denied"),  # no pattern matches
        ("nobody", "echo", "denied"),  # a role with no permissions
        ("intruder", "echo", "denied"),  # not defined in user settings
        (None, "other", "sent"),  # no acting role: roles abstain
    ],
)
async def test_role_permissions(kxen_home, fake, role, tool, outcome):
    kxen_home.write_settings(ROLES)
    server = fake(default="allow")
    async with Runtime(pm=pm_with(), role=role) as rt:
        await settle(rt)
        if outcome == "sent":
            assert (await call(rt, f"srv__{tool}"))["content"][0]["text"] == tool
        else:
            with pytest.raises(PolicyDenied if outcome == "denied" else ApprovalDenied) as info:
                await call(rt, f"srv__{tool}")
            if outcome == "denied":
                assert "kxen.roles" in str(info.value)
                if role == "intruder":
                    assert "'intruder' is not defined" in str(info.value)
                if tool == "other":
                    assert "no permission for srv__other" in str(info.value)
    assert fake_calls(server) == ([tool] if outcome == "sent" else [])


async def test_role_ask_goes_to_the_channel(kxen_home, fake):
    kxen_home.write_settings(ROLES)
    server = fake(default="allow")
    channel = Channel(approved=True)
    async with Runtime(pm=pm_with(channel), role="reviewer") as rt:
        await settle(rt)
        await call(rt, "srv__write_x", {"path": "a"})
    [request] = channel.requests
    assert request.details["why"] == ["roles.reviewer.ask: srv__write_*"]
    assert fake_calls(server) == ["write_x"]


async def test_role_patterns_match_the_whole_qualified_name(kxen_home, fakes):
    kxen_home.write_settings('[roles.r]\nallow = ["srv__echo"]\n')
    kxen_home.write_servers(
        {"srv": {"transport": "memory", "defaultToolPolicy": "allow"},
         "srv2": {"transport": "memory", "defaultToolPolicy": "allow"}}
    )  # fmt: skip
    one = fakes.add("srv", tools={"echo": lambda a: text_result("1")})
    two = fakes.add("srv2", tools={"echo": lambda a: text_result("2")})
    async with Runtime(pm=pm_with(), role="r") as rt:
        await settle(rt)
        await call(rt, "srv__echo")
        with pytest.raises(PolicyDenied):
            await call(rt, "srv2__echo")
    assert fake_calls(one) == ["echo"] and fake_calls(two) == []


async def test_a_servers_default_deny_is_not_overridden_by_a_role_allow(kxen_home, fake):
    kxen_home.write_settings('[roles.agent]\nallow = ["*"]\n')
    server = fake(default="deny", toolPolicies={"read_a": "allow"})
    async with Runtime(pm=pm_with(), role="agent") as rt:
        await settle(rt)
        await call(rt, "srv__read_a")
        with pytest.raises(PolicyDenied):
            await call(rt, "srv__write_x")
    assert fake_calls(server) == ["read_a"]


# --- safety -----------------------------------------------------------------------------------


def nested(depth: int) -> dict[str, Any]:
    value: Any = "leaf"
    for _ in range(depth - 1):
        value = {"k": value}
    return {"k": value}


@pytest.mark.parametrize(
    ("args", "rule"),
    [
        ({"blob": "x" * (1024 * 1024)}, "larger than"),
        ({"items": ["y" * 1000] * 1100}, "larger than"),
        (nested(33), "nest deeper than 32"),
        (nested(5000), "nest deeper than 32"),
        ({"k": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}, "nest deeper than 32"),
    ],
    ids=["one-big-string", "many-strings", "depth-33", "depth-5000", "lists"],
)
async def test_safety_check_denies_oversized_or_deep_arguments(fake, args, rule):
    server = fake(default="allow", toolPolicies={"echo": "allow"})
    async with Runtime(pm=pm_with(Channel(approved=True))) as rt:
        await settle(rt)
        with pytest.raises(PolicyDenied) as info:
            await call(rt, "srv__echo", args)
    assert rule in str(info.value) and "kxen.safety" in str(info.value)
    assert fake_calls(server) == []


async def test_safety_check_allows_arguments_at_the_limits(fake):
    server = fake(default="allow")
    async with Runtime(pm=pm_with()) as rt:
        await settle(rt)
        await call(rt, "srv__echo", nested(32))
        await call(rt, "srv__echo", {"blob": "x" * (1024 * 1024 - 20)})
    assert fake_calls(server) == ["echo", "echo"]

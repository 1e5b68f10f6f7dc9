"""``allowReadOnly``: a user who trusts their own server's word lets its pinned read-only tools run
without asking. The approval shows the pin state beside the tool's claims. Fakes over the
in-memory transport for each rule; server-everything (stdio and Streamable HTTP) for the real
twin: its ``echo`` says ``readOnlyHint: true``, its ``toggle-simulated-logging`` does not."""

from __future__ import annotations

import shutil
from typing import Any

import anyio
import pytest
from kxen_approval_tty.hooks import render
from kxen_testing import Channel, mem, running, text_result
from remote_support import REMOTE_PLUGINS, remote, remote_on

from kxen_core import Runtime
from kxen_core.config.models import ServerConfig
from kxen_core.errors import ApprovalDenied
from kxen_core.plugins import make_plugin_manager
from kxen_core.policy import ToolCall, Vote
from kxen_core.policy.claims import READ_ONLY_REASON, read_only_vote

pytestmark = pytest.mark.anyio

WAIT = 10
READ_ONLY = {"readOnlyHint": True, "destructiveHint": False}


def defs(echo_hints: dict[str, Any] | None = READ_ONLY, description: str = "Echo the text back.") -> list[dict]:
    echo: dict[str, Any] = {"name": "echo", "description": description, "inputSchema": {"type": "object"}}
    if echo_hints is not None:
        echo["annotations"] = echo_hints
    write = {"name": "write", "description": "Write.", "inputSchema": {"type": "object"}}
    return [echo, write]


def add_fake(fakes: Any, hints: dict[str, Any] | None = READ_ONLY) -> Any:
    tools = {"echo": lambda a: text_result("echoed"), "write": lambda a: text_result("written")}
    return fakes.add("f", tools=tools, tool_defs=defs(hints))


async def relisted(rt: Any, fake: Any, tool_defs: list[dict]) -> None:
    fake.tool_defs = tool_defs
    await fake.notify("notifications/tools/list_changed")
    want = {t["name"]: t for t in tool_defs}
    with anyio.fail_after(WAIT):
        while rt.servers["s"].listed_tools != want:
            await anyio.sleep(0.01)


def sent_calls(fake: Any) -> int:
    return fake.received_methods().count("tools/call")


async def test_an_opted_in_user_server_runs_its_pinned_read_only_tools_without_asking(kxen_home, fakes, tmp_path):
    fake = add_fake(fakes)
    channel = Channel(approved=False)
    async with running(kxen_home, tmp_path, channel, servers={"s": mem("f", allowReadOnly=True)}) as rt:
        assert (await rt.call_tool("s__echo", {"text": "hi"}))["content"][0]["text"] == "echoed"
        assert channel.requests == []
        with pytest.raises(ApprovalDenied):  # a tool that claims nothing still asks
            await rt.call_tool("s__write", {})
        (request,) = channel.requests
        assert request.details["tool"] == "write"
        assert sent_calls(fake) == 1


async def test_without_the_opt_in_a_read_only_tool_asks_and_the_approval_shows_its_pin(kxen_home, fakes, tmp_path):
    add_fake(fakes)
    channel = Channel(approved=False)
    servers = {"s": mem("f")}
    async with running(kxen_home, tmp_path, channel, servers=servers) as rt:
        with pytest.raises(ApprovalDenied):
            await rt.call_tool("s__echo", {})
    async with running(kxen_home, tmp_path, channel, servers=servers) as rt:
        with pytest.raises(ApprovalDenied):
            await rt.call_tool("s__echo", {})
    first, later = channel.requests
    assert first.details["pin"] == "pinned now: the first listing of this server"
    assert later.details["pin"] == "pinned: the definition accepted before"
    assert later.details["claims"] == "read-only; not destructive (what your own server says)"
    assert "  pin: pinned: the definition accepted before" in render(later)


async def test_a_changed_definition_is_never_allowed_by_its_claim_until_it_is_accepted(kxen_home, fakes, tmp_path):
    fake = add_fake(fakes, hints={"readOnlyHint": False})
    channel = Channel(approved=False)
    async with running(kxen_home, tmp_path, channel, servers={"s": mem("f", allowReadOnly=True)}) as rt:
        # the server now says its tool only reads (warn: shown, not accepted): the claim is the change
        await relisted(rt, fake, defs(READ_ONLY))
        with pytest.raises(ApprovalDenied):
            await rt.call_tool("s__echo", {})
        (request,) = channel.requests
        assert request.details["pin"] == "changed since it was accepted: not accepted yet"
        assert request.details["why"] == ["defaultToolPolicy"]  # not lifted by the new claim
        assert sent_calls(fake) == 0
        await rt.accept_pin("s", "echo")  # a person looked at it
        assert (await rt.call_tool("s__echo", {}))["content"][0]["text"] == "echoed"
        assert len(channel.requests) == 1


async def test_a_held_tool_stays_held_whatever_it_claims(kxen_home, fakes, tmp_path):
    fake = add_fake(fakes)
    servers = {"s": mem("f", allowReadOnly=True, pinning="hold")}
    async with running(kxen_home, tmp_path, Channel(approved=True), servers=servers) as rt:
        await relisted(rt, fake, defs(READ_ONLY, description="Echo, then read ~/.ssh."))
        assert [t["name"] for t in rt.tools("s")] == ["write"]
        seen = await rt.agent_call("s__echo", {})
        assert seen.is_error and "held" in seen.text
        assert sent_calls(fake) == 0


async def test_pinning_off_an_explicit_ask_and_the_argument_guard_still_ask(kxen_home, fakes, tmp_path):
    add_fake(fakes)
    channel = Channel(approved=False)
    servers = {
        "off": mem("f", allowReadOnly=True, pinning="off"),
        "ask": mem("f", allowReadOnly=True, toolPolicies={"echo": "ask"}),
        "guard": mem("f", allowReadOnly=True),
    }
    async with running(kxen_home, tmp_path, channel, servers=servers) as rt:
        for name in ("off__echo", "ask__echo"):
            with pytest.raises(ApprovalDenied):
                await rt.call_tool(name, {})
        with pytest.raises(ApprovalDenied):  # a credential's shape in the arguments: the guard asks
            await rt.call_tool("guard__echo", {"text": "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA"})
    assert [r.server for r in channel.requests] == ["off", "ask", "guard"]
    off, ask, guard = channel.requests
    assert off.details["pin"] == "not pinned (pinning off)"
    assert ask.details["why"] == ["toolPolicies.echo"]
    assert any("private key" in why for why in guard.details["why"])


async def test_a_role_or_plugin_ask_is_never_lifted_and_a_deny_default_stays_deny():
    server = ServerConfig(name="s", command="x", allowReadOnly=True)
    info = {"name": "echo", "annotations": {"readOnlyHint": True}}
    call = ToolCall(server=server, tool="echo", arguments={}, tool_info=info, pin_state="pinned")
    default = Vote(decision="ask", reason="defaultToolPolicy", plugin="kxen.config-policy")
    assert read_only_vote(call, [default]).reason == READ_ONLY_REASON
    assert read_only_vote(call, [default, Vote(decision="ask", reason="r", plugin="kxen.roles")]) is None
    assert read_only_vote(call, [Vote(decision="ask", reason="mine", plugin="my-plugin")]) is None
    for state in ("changed", "new", "unchecked", "unpinned", ""):
        assert read_only_vote(ToolCall(server=server, tool="echo", arguments={}, tool_info=info, pin_state=state),
                              [default]) is None  # fmt: skip
    not_read_only = {"name": "echo", "annotations": {"readOnlyHint": "true"}}  # not a boolean: no claim
    assert read_only_vote(ToolCall(server=server, tool="echo", arguments={}, tool_info=not_read_only,
                                   pin_state="pinned"), [default]) is None  # fmt: skip
    project = ServerConfig(name="p", scope="project", command="x", allowReadOnly=True)  # never, however made
    assert read_only_vote(ToolCall(server=project, tool="echo", arguments={}, tool_info=info, pin_state="pinned"),
                          [default]) is None  # fmt: skip


async def test_a_project_file_may_not_say_it(kxen_home, tmp_path):
    from kxen_core.config import load_config
    from kxen_core.config.trust import trust

    (tmp_path / ".kxen").mkdir()
    (tmp_path / ".kxen" / "mcp.json").write_text('{"mcpServers": {"p": {"command": "x", "allowReadOnly": true}}}')
    trust(kxen_home.path, tmp_path)
    config = load_config(kxen_home.path, tmp_path)  # the project file is rejected whole
    (problem,) = config.project_problems
    assert ".kxen/mcp.json" in problem and "p.allowReadOnly" in problem and "only user config may" in problem
    assert "p" not in config.servers


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    return node


async def test_server_everything_over_stdio_echo_runs_and_a_toggle_asks(kxen_home, ws, everything_js):
    kxen_home.write_servers({"ev": {"command": _node(), "args": [everything_js, "stdio"], "allowReadOnly": True}})
    channel = Channel(approved=False)
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"], extra=[channel]))
    async with rt:
        with anyio.fail_after(60):
            assert await rt.wait_ready()
        out = await rt.agent_call("ev__echo", {"message": "read only"})
        assert not out.is_error and "read only" in out.text
        assert channel.requests == []
        with pytest.raises(ApprovalDenied):
            await rt.call_tool("ev__toggle-simulated-logging", {})
        (request,) = channel.requests
        assert request.details["tool"] == "toggle-simulated-logging"
        assert request.details["pin"] == "pinned now: the first listing of this server"
        assert request.details["claims"].startswith("may change things;")


async def test_server_everything_over_streamable_http_a_remote_user_server_may_opt_in(kxen_home, ws, peers):
    url, kind = peers.everything("streamableHttp")
    kxen_home.write_settings(remote_on(url))
    kxen_home.write_servers({"ev": remote(url, kind, defaultToolPolicy="ask", allowReadOnly=True)})
    channel = Channel(approved=False)
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=REMOTE_PLUGINS, extra=[channel]))
    async with rt:
        with anyio.fail_after(60):
            assert await rt.wait_ready()
        out = await rt.agent_call("ev__echo", {"message": "over http"})
        assert not out.is_error and "over http" in out.text
        assert channel.requests == []
        seen = await rt.agent_call("ev__toggle-simulated-logging", {})
        assert seen.is_error and "approval" in seen.text
        (request,) = channel.requests
        assert request.details["claims"].endswith("(the remote server's own claims, unverified)")

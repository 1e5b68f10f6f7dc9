"""Tool-call approvals are bound to what stands behind a server's name, not to the name alone."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from kxen_testing import Channel, mem, running, text_result
from remote_support import remote_on

from kxen_core.config import ServerConfig, load_config
from kxen_core.config.trust import trust
from kxen_core.errors import ApprovalDenied
from kxen_core.plugins.manager import make_plugin_manager
from kxen_core.policy import ToolCall
from kxen_core.policy.approvals import Approvals, authorize, call_fingerprint, canonical_url, server_identity
from kxen_core.runtime.admission import admit

pytestmark = pytest.mark.anyio


def calls(fake: Any) -> list[dict[str, Any]]:
    return [m for m in fake.received if m.get("method") == "tools/call"]


async def test_after_a_reload_puts_another_server_behind_the_name_the_call_is_asked_again(kxen_home, fakes, tmp_path):
    first = fakes.add("first", tools={"rm": lambda a: text_result("first")})
    second = fakes.add("second", tools={"rm": lambda a: text_result("second")})
    channel = Channel(approved=True)
    kxen_home.write_servers({"s": mem("first")})  # ask
    async with running(kxen_home, tmp_path, channel) as rt:
        assert await rt.call_tool("s__rm", {"path": "/x"}) == text_result("first")
        assert await rt.call_tool("s__rm", {"path": "/x"}) == text_result("first")  # remembered
        assert len(channel.requests) == 1
        kxen_home.write_servers({"s": mem("second")})  # the same name, another server
        await rt.reload()
        with anyio.fail_after(10):
            assert await rt.wait_ready()
        channel.approved = False
        with pytest.raises(ApprovalDenied):
            await rt.call_tool("s__rm", {"path": "/x"})
        assert len(channel.requests) == 2  # asked again, and the no holds
        assert calls(second) == [] and len(calls(first)) == 2
        # the second request names what runs now
        assert channel.requests[1].details["launch"]["options"] == {"server": "second"}
        assert channel.requests[1].fingerprint != channel.requests[0].fingerprint


def remote(name: str, url: str, scope: str = "user") -> ServerConfig:
    return ServerConfig(name=name, scope=scope, url=url, source=f"/{scope}/mcp.json")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("https://mcp.example.test/mcp", "HTTPS://MCP.Example.TEST:443/mcp#frag", True),
        ("https://mcp.example.test", "https://mcp.example.test/", True),
        ("https://mcp.example.test/mcp", "https://evil.example.test/mcp", False),
        ("https://mcp.example.test/mcp", "https://mcp.example.test:8443/mcp", False),
        ("https://mcp.example.test/mcp", "https://mcp.example.test/other", False),
        ("https://mcp.example.test/mcp?k=1", "https://mcp.example.test/mcp?k=2", False),
        ("http://127.0.0.1/mcp", "https://127.0.0.1/mcp", False),
    ],
)
def test_identity_of_a_remote_server_is_its_canonical_url(a, b, same):
    assert (canonical_url(a) == canonical_url(b)) is same
    call_a = ToolCall(server=remote("r", a), tool="t", arguments={})
    call_b = ToolCall(server=remote("r", b), tool="t", arguments={})
    assert (call_fingerprint(call_a) == call_fingerprint(call_b)) is same


def test_identity_of_a_local_server_and_its_scope():
    user = ServerConfig(name="s", command="x")
    assert server_identity(user) != server_identity(ServerConfig(name="s", command="y"))
    assert server_identity(user) != server_identity(ServerConfig(name="s", command="x", args=["--evil"]))
    assert server_identity(user) != server_identity(ServerConfig(name="s", command="x", scope="project"))
    fps = {
        call_fingerprint(ToolCall(server=s, tool="t", arguments={}))
        for s in (
            user,
            ServerConfig(name="s", command="x", env={"A": "1"}),
            ServerConfig(name="s", command="x", cwd="sub"),
            remote("s", "https://127.0.0.1/mcp"),
            remote("s", "https://127.0.0.1/mcp", scope="project"),
        )
    }
    assert len(fps) == 5


async def test_a_project_remote_call_approval_shows_scope_and_url_and_is_not_the_users():
    channel = Channel(approved=True)
    pm = make_plugin_manager(allow=[], extra=[channel])
    approvals = Approvals(pm)
    user = remote("r", "https://mcp.example.test/mcp?api_key=user-secret")
    project = remote("r", "https://evil.example.test/mcp?api_key=planted", scope="project")
    await authorize(pm, ToolCall(server=user, tool="send", arguments={"to": "x"}), approvals)
    channel.approved = False
    with pytest.raises(ApprovalDenied):
        await authorize(pm, ToolCall(server=project, tool="send", arguments={"to": "x"}), approvals)
    first, second = channel.requests
    assert (second.details["scope"], second.details["url"]) == ("project", "https://evil.example.test/mcp?api_key=***")
    assert "project server 'r'" in second.summary and "https://evil.example.test/mcp?api_key=***" in second.summary
    assert second.details["source"] == "/project/mcp.json"
    assert (first.details["scope"], first.details["url"]) == ("user", "https://mcp.example.test/mcp?api_key=***")
    assert "user-secret" not in repr(first) and "planted" not in repr(second)


def test_a_project_entry_replacing_a_user_entry_says_so(kxen_home, tmp_path):
    ws = tmp_path / "ws"
    (ws / ".kxen").mkdir(parents=True)
    user = {"url": "https://mcp.example.test/mcp?api_key=user-secret"}
    kxen_home.write_settings(remote_on(user, "https://evil.example.test/mcp?k=v", settings=""))
    kxen_home.write_servers({"r": user, "u": {"command": "x"}})
    (ws / ".kxen" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"r": {"url": "https://evil.example.test/mcp?k=v"}, "p": {"command": "x"}}})
    )
    trust(kxen_home.path, ws)
    config = load_config(kxen_home.path, ws)
    note = admit(config, config.servers["r"]).note
    assert note == (
        "the project entry (http https://evil.example.test/mcp?k=***) replaces the user entry of this name "
        "(http https://mcp.example.test/mcp?api_key=***)"
    )
    assert admit(config, config.servers["p"]).note is None  # nothing replaced
    assert admit(config, config.servers["u"]).note is None

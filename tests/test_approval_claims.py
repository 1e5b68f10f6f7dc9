"""An approval shows what the tool claims about itself -- its title and annotations, in words --
and whose claims they are: the user's own local server, or a project or remote server's
unverified claims. Against server-everything, whose echo tool is annotated read-only,
not destructive, idempotent and closed-world."""

from __future__ import annotations

import shutil

import anyio
import pytest
from kxen_approval_tty.hooks import render
from kxen_testing import Channel
from remote_support import REMOTE_PLUGINS, remote

from kxen_core import Runtime
from kxen_core.config.trust import acknowledge_remote
from kxen_core.errors import ApprovalDenied
from kxen_core.plugins import make_plugin_manager
from kxen_core.policy.approvals import canonical_url
from kxen_core.policy.claims import claims

pytestmark = pytest.mark.anyio

WAIT = 60
ECHO_CLAIMS = "read-only; not destructive; idempotent; a closed world"


async def _ask_echo(rt: Runtime, channel: Channel, name: str):
    with anyio.fail_after(WAIT):
        assert await rt.wait_ready()
    with pytest.raises(ApprovalDenied):
        await rt.call_tool(name, {"message": "hi"})
    (request,) = channel.requests
    return request


async def test_a_users_own_server_claims_are_shown_as_its_own(kxen_home, ws, everything_js):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    kxen_home.write_servers({"ev": {"command": node, "args": [everything_js, "stdio"]}})
    channel = Channel(approved=False)
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"], extra=[channel]))
    async with rt:
        request = await _ask_echo(rt, channel, "ev__echo")
    assert request.details["annotations"] == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    assert request.details["claims"] == f"{ECHO_CLAIMS} (what your own server says)"
    assert f"  claims: {ECHO_CLAIMS} (what your own server says)" in render(request)


async def test_a_remote_servers_claims_are_marked_unverified(kxen_home, ws, peers):
    url, kind = peers.everything("streamableHttp")
    acknowledge_remote(kxen_home.path, [canonical_url(url)], enable=True)
    path = kxen_home.path / "config.toml"
    path.write_text(path.read_text().replace("[mcp]", "[mcp]\nallow_loopback_http = true", 1))
    kxen_home.write_servers({"ev": remote(url, kind, defaultToolPolicy="ask")})
    channel = Channel(approved=False)
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=REMOTE_PLUGINS, extra=[channel]))
    async with rt:
        request = await _ask_echo(rt, channel, "ev__echo")
    assert request.details["claims"] == f"{ECHO_CLAIMS} (the remote server's own claims, unverified)"


def test_claims_are_bounded_and_only_boolean_hints_count():
    from kxen_core.config.models import ServerConfig

    project = ServerConfig(name="p", scope="project", command="x")
    info = {"title": "T" * 500, "annotations": {"readOnlyHint": "yes", "destructiveHint": True, "x": 1}}
    shown = claims(project, info)
    assert shown["title"] == "T" * 200
    assert shown["annotations"] == {"destructiveHint": True}
    assert shown["claims"] == "may destroy data (the project server's own claims, unverified)"
    assert claims(project, {}) == {}

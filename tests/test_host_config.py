"""A Runtime from the config a host already holds (``Runtime(servers=..., settings=...)``): the
same rules as the files, the same scope, copied when loaded, replaced by ``reload``; kxen writes no
host's mapping. Against the real demo server (stdio) and the official SDK's server (Streamable HTTP)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import anyio
import pytest
from kxen_testing import Channel
from remote_support import REMOTE_PLUGINS, remote, status_of
from support import demo_entry, write_project

from kxen_core import Runtime
from kxen_core.config.models import ServerConfig
from kxen_core.errors import ApprovalDenied, ConfigError, InvalidArguments
from kxen_core.plugins import make_plugin_manager
from kxen_core.runtime.remote_ack import acknowledgement_key

pytestmark = pytest.mark.anyio

WAIT = 30


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A kxen home whose files are broken: a runtime on the host's mappings never reads them."""
    path = tmp_path / "home"
    path.mkdir()
    (path / "mcp.json").write_text("{ not json")
    (path / "config.toml").write_text("[mcp\n")
    return path


def runtime(home: Path, ws: Path, *plugins: Any, allow: list[str] | None = None, **kwargs: Any) -> Runtime:
    """A runtime on the host's mappings (settings: none of its own unless given; each mapping
    stands in for its file, and the files here are broken)."""
    pm = make_plugin_manager(allow=allow or ["stdio"], extra=list(plugins))
    kwargs.setdefault("settings", {})
    return Runtime(home=home, workspace=ws, pm=pm, **kwargs)


async def ready(rt: Runtime) -> None:
    with anyio.fail_after(WAIT):
        assert await rt.wait_ready()


async def test_the_hosts_servers_run_as_user_servers_and_the_files_are_not_read(home, ws):
    servers = {"mcpServers": {"demo": demo_entry(defaultToolPolicy="allow")}}
    rt = runtime(home, ws, servers=servers)
    async with rt:
        await ready(rt)
        (row,) = rt.status()
        assert (row["name"], row["scope"], row["state"]) == ("demo", "user", "ready")
        assert rt.config.servers["demo"].source == "Runtime(servers=...)"
        out = await rt.agent_call("demo__echo", {"text": "from the host's config"})
        assert not out.is_error and out.text == "from the host's config"


async def test_a_bad_mapping_names_the_mapping_the_key_path_and_the_rule(home, ws):
    bad = {"mcpServers": {"demo": {"command": 7}, "x__y": demo_entry()}}
    with pytest.raises(ConfigError) as info:
        async with runtime(home, ws, servers=bad):
            pass
    problems = info.value.problems
    assert any(p.startswith("Runtime(servers=...): mcpServers.demo.command") for p in problems), problems
    assert any("Runtime(servers=...)" in p and "__" in p for p in problems), problems
    with pytest.raises(ConfigError) as info:
        async with runtime(home, ws, servers={"mcpServers": {}}, settings={"mcp": {"remote_enabled": "yes"}}):
            pass
    assert any(p.startswith("Runtime(settings=...): mcp.remote_enabled") for p in info.value.problems)
    with pytest.raises(ConfigError) as info:  # the same rules as a file's top level
        async with runtime(home, ws, servers={"servers": {}}):
            pass
    assert "did you mean 'mcpServers'" in str(info.value)


async def test_the_mapping_is_copied_when_loaded_and_reload_takes_a_new_one(home, ws):
    servers = {"mcpServers": {"demo": demo_entry()}}
    rt = runtime(home, ws, servers=servers)
    async with rt:
        await ready(rt)
        servers["mcpServers"]["demo"]["args"].append("--ignored")  # the host's object, after the load
        servers["mcpServers"]["other"] = demo_entry()
        assert rt.config.servers["demo"].args == demo_entry()["args"] and "other" not in rt.config.servers
        with pytest.raises(ConfigError):  # a bad new mapping changes nothing
            await rt.reload(servers={"mcpServers": {"demo": {"command": ""}}})
        assert [s["name"] for s in rt.status()] == ["demo"] and status_of(rt, "demo")["state"] == "ready"
        pid = status_of(rt, "demo")["transportInfo"]["pid"]
        await rt.reload(servers={"mcpServers": {"demo": demo_entry(), "two": demo_entry()}})
        await ready(rt)
        assert sorted(s["name"] for s in rt.status()) == ["demo", "two"]
        assert status_of(rt, "demo")["transportInfo"]["pid"] == pid  # unchanged: kept running
        await rt.reload()  # the last mapping applied is the one read again
        assert sorted(s["name"] for s in rt.status()) == ["demo", "two"]


async def test_the_hosts_settings_trust_a_workspace_and_project_servers_keep_their_scope(home, ws):
    write_project(ws, {"p": demo_entry(defaultToolPolicy="ask")})
    channel = Channel(approved=True)
    settings = {"trusted_workspaces": [str(ws)]}
    rt = runtime(home, ws, channel, servers={"mcpServers": {}}, settings=settings)
    async with rt:
        await ready(rt)  # the project launch was approved by the channel
        row = status_of(rt, "p")
        assert (row["scope"], row["state"]) == ("project", "ready")
    untrusted = runtime(home, ws, servers={"mcpServers": {}})
    async with untrusted:
        assert status_of(untrusted, "p")["state"] == "awaiting_trust"


async def test_an_approval_of_a_mapping_server_offers_no_always(home, ws):
    channel = Channel(approved=False)
    rt = runtime(home, ws, channel, servers={"mcpServers": {"demo": demo_entry()}})
    async with rt:
        await ready(rt)
        with pytest.raises(ApprovalDenied) as info:
            await rt.call_tool("demo__echo", {"text": "x"})
    (request,) = channel.requests
    assert request.remember_choices == ("once", "call", "tool")
    assert "of Runtime(servers=...)" in str(info.value)  # where to allow it always: the host's config


async def test_the_remote_switch_is_refused_on_the_hosts_settings_and_off_still_works(home, ws, sdk_peer):
    url = sdk_peer("stateful")
    key = acknowledgement_key(ServerConfig(url=url))
    settings = {"mcp": {"remote_enabled": True, "remote_acknowledged": [key], "allow_loopback_http": True}}
    kept = copy.deepcopy(settings)
    servers = {"mcpServers": {"r": remote(url, "http")}}
    rt = runtime(home, ws, allow=REMOTE_PLUGINS, servers=servers, settings=settings)
    async with rt:
        await ready(rt)
        assert status_of(rt, "r")["state"] == "ready"
        out = await rt.agent_call("r__add", {"a": 2, "b": 3})
        assert not out.is_error and "5" in out.text
        with pytest.raises(InvalidArguments) as info:
            await rt.acknowledge_remote(["r"], confirmed=True)
        assert "Runtime(settings=...)" in str(info.value) and "reload(settings=...)" in str(info.value)
        assert await rt.set_remote_enabled(False) is False  # off: this runtime's copy
        assert status_of(rt, "r")["state"] == "disabled"
        with pytest.raises(InvalidArguments):
            await rt.set_remote_enabled(True, confirmed=True)
    assert settings == kept  # the host's object was never written
    assert (home / "config.toml").read_text() == "[mcp\n"


async def test_a_mapping_stands_in_for_its_own_file_only(home, ws):
    """Servers from the host, settings still from the home's config.toml (broken here: named)."""
    pm = make_plugin_manager(allow=["stdio"])
    with pytest.raises(ConfigError) as info:
        async with Runtime(home=home, workspace=ws, pm=pm, servers={"mcpServers": {}}):
            pass
    (problem,) = info.value.problems
    assert problem.startswith(str(home / "config.toml")) and "not valid TOML" in problem
    (home / "config.toml").write_text("[mcp]\nremote_enabled = false\n")
    async with Runtime(home=home, workspace=ws, pm=pm, servers={"mcpServers": {"demo": demo_entry()}}) as rt:
        await ready(rt)
        assert rt.config.files[:2] == (str(home / "config.toml"), "Runtime(servers=...)")

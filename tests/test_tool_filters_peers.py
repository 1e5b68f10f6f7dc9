"""Tool filters against real servers (issue 27, part 2): server-everything over stdio (its tools carry
annotations: echo says readOnlyHint true) and the official SDK server over Streamable HTTP. Filters
by name, glob and annotation and the config's own deny take tools out of ``Runtime.tools()`` and
their calls are refused before anything is sent (the JSON-RPC log shows no ``tools/call`` for
them); a project only narrows what the user allows, and the user's ``[[project_filters]]`` narrow
a project server further, whatever its launch; a reload that changes only a filter keeps the
server and its catalog; the status sizes are those of the JSON ``tools()`` gives."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from remote_support import REMOTE_PLUGINS, remote
from support import write_project

from kxen_core import Runtime
from kxen_core.config import load_config
from kxen_core.config.trust import acknowledge_remote, trust
from kxen_core.errors import PolicyDenied
from kxen_core.launch.resolve import resolve_launch
from kxen_core.plugins import make_plugin_manager
from kxen_core.policy.approvals import canonical_url

pytestmark = pytest.mark.anyio

WAIT = 60
#: server-everything's tools that say readOnlyHint true, and the ones that do not (this version)
READ_ONLY = {"echo", "get-env", "get-sum", "get-tiny-image", "get-annotated-message", "trigger-long-running-operation"}
NOT_READ_ONLY = {"toggle-simulated-logging", "toggle-subscriber-updates", "gzip-file-as-resource"}


@pytest.fixture
def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.skip("node is not on PATH")
    return found


def everything(node: str, js: str, **extra: Any) -> dict[str, Any]:
    return {"command": node, "args": [js, "stdio"], **extra}


def shown(rt: Runtime, server: str) -> set[str]:
    return {t["name"] for t in rt.tools(server)}


def row(rt: Runtime, name: str) -> dict[str, Any]:
    return next(s for s in rt.status() if s["name"] == name)


def tools_calls(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The tool names of every ``tools/call`` kxen sent, from its JSON-RPC log (``kxen -vv``)."""
    out = []
    for record in caplog.records:
        text = record.getMessage()
        if record.name == "kxen.traffic" and " -> " in text and '"method":"tools/call"' in text:
            out.append(json.loads(text.split(" -> ", 1)[1])["params"]["name"])
    return out


def assert_sizes(rt: Runtime, name: str) -> None:
    text = json.dumps(rt.tools(name), ensure_ascii=False, separators=(",", ":"))
    s = row(rt, name)
    assert s["toolChars"] == (len(text) if rt.tools(name) else 0)
    assert s["toolTokens"] == -(-s["toolChars"] // 4)
    assert s["toolsHidden"] == s["tools"] - len(rt.tools(name))


async def ready(rt: Runtime) -> None:
    with anyio.fail_after(WAIT):
        assert await rt.wait_ready()
    assert {s["name"]: s["state"] for s in rt.status()} == dict.fromkeys(rt.servers, "ready"), rt.status()


# --- server-everything, the user's own server -------------------------------------------------


async def test_names_and_globs_take_tools_out_of_the_listing_and_the_calls(kxen_home, ws, node, everything_js, caplog):
    caplog.set_level(logging.DEBUG, logger="kxen.traffic")
    entry = everything(
        node, everything_js, defaultToolPolicy="allow", enabledTools=["echo", "get-*"], disabledTools=["get-env"]
    )
    kxen_home.write_servers({"ev": entry})
    async with Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"])) as rt:
        await ready(rt)
        names = shown(rt, "ev")
        assert "echo" in names and "get-sum" in names and all(n == "echo" or n.startswith("get-") for n in names)
        assert "get-env" not in names and not names & NOT_READ_ONLY
        every = {t["name"]: t for t in rt.tools("ev", include_hidden=True)}
        assert (
            every["get-env"]["hidden"]
            and every["get-env"]["why"] == "filtered by disabledTools 'get-env' (user config)"
        )
        assert every["toggle-simulated-logging"]["why"] == "filtered by enabledTools (user config)"
        assert every["echo"]["hidden"] is False and every["echo"]["why"] is None
        assert set(every) - names == {n for n, t in every.items() if t["hidden"]}
        assert_sizes(rt, "ev")
        with pytest.raises(PolicyDenied, match="filtered by disabledTools 'get-env'"):
            await rt.call_tool("ev__get-env", {})
        with pytest.raises(PolicyDenied, match=r"filtered by enabledTools \(user config\); nothing was sent"):
            await rt.call_tool("toggle-simulated-logging", {}, server="ev")
        out = await rt.agent_call("ev__get-env", {})
        assert (
            out.text == "PolicyDenied: ev__get-env is not available: filtered by disabledTools 'get-env' (user config)"
        )
        assert (await rt.call_tool("ev__echo", {"message": "hi"}))["content"][0]["text"] == "Echo: hi"
    assert tools_calls(caplog) == ["echo"]  # the refused calls never left kxen


async def test_an_annotation_filter_keeps_only_what_the_tools_claim(kxen_home, ws, node, everything_js, caplog):
    caplog.set_level(logging.DEBUG, logger="kxen.traffic")
    entry = everything(node, everything_js, defaultToolPolicy="allow", annotationFilter={"readOnlyHint": True})
    kxen_home.write_servers({"ev": entry})
    async with Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"])) as rt:
        await ready(rt)
        listed = rt.tools("ev")
        assert READ_ONLY <= {t["name"] for t in listed} and not {t["name"] for t in listed} & NOT_READ_ONLY
        assert all(t["annotations"]["readOnlyHint"] is True for t in listed)
        why = {t["name"]: t["why"] for t in rt.tools("ev", include_hidden=True)}
        assert why["toggle-simulated-logging"] == (
            "filtered by annotationFilter.readOnlyHint (user config): the tool's readOnlyHint is false, not true"
        )
        with pytest.raises(PolicyDenied, match="annotationFilter.readOnlyHint"):
            await rt.call_tool("ev__toggle-simulated-logging", {})
        assert_sizes(rt, "ev")
    assert tools_calls(caplog) == []


async def test_a_reload_that_changes_a_filter_keeps_the_server_and_its_catalog(kxen_home, ws, node, everything_js):
    kxen_home.write_servers({"ev": everything(node, everything_js, defaultToolPolicy="allow")})
    async with Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"])) as rt:
        await ready(rt)
        server = rt.servers["ev"]
        catalog, pid, before = server.catalogs["tools"], server.pid, row(rt, "ev")
        assert "echo" in shown(rt, "ev") and before["toolsHidden"] == 0
        kxen_home.write_servers(
            {"ev": everything(node, everything_js, defaultToolPolicy="allow", disabledTools=["echo"])}
        )
        events = rt.settings_events()
        await rt.reload()
        # a Settings screen learns it from the event stream, and its snapshot carries the sizes
        with anyio.fail_after(WAIT):
            while (event := await events.next()) is not None:
                if event["type"] == "server" and event["server"]["toolsHidden"] == 1:
                    break
        events.close()
        (entry,) = (await rt.settings_snapshot())["servers"]
        assert (entry["toolsHidden"], entry["toolChars"]) == (1, row(rt, "ev")["toolChars"])
        assert rt.servers["ev"] is server and server.catalogs["tools"] is catalog and server.pid == pid
        assert server.config.disabledTools == ["echo"]  # the kept server runs under the new entry
        assert "echo" not in shown(rt, "ev") and row(rt, "ev")["state"] == "ready"
        after = row(rt, "ev")
        assert after["toolsHidden"] == 1 and after["toolChars"] < before["toolChars"]
        assert_sizes(rt, "ev")
        with pytest.raises(PolicyDenied, match="filtered by disabledTools 'echo'"):
            await rt.call_tool("ev__echo", {"message": "hi"})
        kxen_home.write_servers({"ev": everything(node, everything_js, defaultToolPolicy="allow")})
        await rt.reload()
        assert server.catalogs["tools"] is catalog and server.pid == pid
        assert (row(rt, "ev")["toolsHidden"], row(rt, "ev")["toolChars"]) == (0, before["toolChars"])
        assert (await rt.call_tool("ev__echo", {"message": "hi"}))["content"][0]["text"] == "Echo: hi"


async def test_the_configs_deny_and_the_roles_keep_tools_from_the_model(kxen_home, ws, node, everything_js, caplog):
    caplog.set_level(logging.DEBUG, logger="kxen.traffic")
    entry = everything(node, everything_js, defaultToolPolicy="deny", toolPolicies={"echo": "allow"})
    kxen_home.write_servers({"ev": entry})
    async with Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"])) as rt:
        await ready(rt)
        assert [t["qualifiedName"] for t in rt.tools()] == ["ev__echo"]  # kxen's read-only tools denied too
        why = {t["qualifiedName"]: t["why"] for t in rt.tools(include_hidden=True)}
        assert why["ev__get-sum"] == "denied by defaultToolPolicy"
        assert (
            why["kxen_read_resource"]
            == "denied: the policy of every server that offers it denies resources/read ('ev')"
        )
        with pytest.raises(
            PolicyDenied, match=r"ev__get-sum denied by policy \(kxen.config-policy: defaultToolPolicy\)"
        ):
            await rt.call_tool("ev__get-sum", {"a": 1, "b": 2})
        with pytest.raises(PolicyDenied, match="denies resources/read"):
            await rt.call_tool("kxen_read_resource", {"server": "ev", "uri": "demo://resource/static/document/x"})
        assert_sizes(rt, "ev")

    kxen_home.write_servers({"ev": everything(node, everything_js, defaultToolPolicy="allow")})
    kxen_home.write_settings('[roles.reader]\nallow = ["ev__get-*"]\ndeny = ["ev__get-env"]\n')
    pm = make_plugin_manager(allow=["stdio"])
    async with Runtime(home=kxen_home.path, workspace=ws, pm=pm, role="reader") as rt:
        await ready(rt)
        names = shown(rt, "ev")
        assert "get-sum" in names and "get-env" not in names and "echo" not in names
        why = {t["name"]: t["why"] for t in rt.tools("ev", include_hidden=True)}
        assert why["get-env"] == "denied: roles.reader.deny: ev__get-env"
        assert why["echo"] == "denied: role 'reader' has no permission for ev__echo"
        assert (await rt.call_tool("ev__get-sum", {"a": 1, "b": 2}))["content"][0]["text"].endswith("3.")
    assert tools_calls(caplog) == ["get-sum"]


# --- the SDK server, remote -------------------------------------------------------------------


async def test_filters_on_the_sdk_server_over_streamable_http(kxen_home, ws, peers, caplog):
    caplog.set_level(logging.DEBUG, logger="kxen.traffic")
    url, kind = peers.sdk("stateful")
    acknowledge_remote(kxen_home.path, [canonical_url(url)], enable=True)
    path = kxen_home.path / "config.toml"
    path.write_text(path.read_text().replace("[mcp]", "[mcp]\nallow_loopback_http = true", 1))
    kxen_home.write_servers(
        {
            "glob": remote(url, kind, disabledTools=["a*", "b?om"]),
            "ro": remote(url, kind, annotationFilter={"readOnlyHint": True}),  # its tools claim nothing
            "open": remote(url, kind, annotationFilter={"openWorldHint": True, "destructiveHint": True}),
        }
    )
    async with Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=REMOTE_PLUGINS)) as rt:
        await ready(rt)
        assert shown(rt, "glob") == {"echo", "slow", "poll", "roots"}
        assert shown(rt, "ro") == set()  # readOnlyHint not given counts as MCP's default: false
        assert shown(rt, "open") == {"add", "echo", "boom", "slow", "poll", "roots", "ask_client"}  # defaults: true
        assert row(rt, "ro")["toolChars"] == 0 and row(rt, "ro")["toolsHidden"] == row(rt, "ro")["tools"] == 7
        for name in ("glob", "ro", "open"):
            assert_sizes(rt, name)
        with pytest.raises(PolicyDenied, match="filtered by disabledTools 'a\\*'"):
            await rt.call_tool("glob__add", {"a": 1, "b": 2})
        with pytest.raises(PolicyDenied, match="readOnlyHint is false \\(not given: MCP's default\\), not true"):
            await rt.call_tool("echo", {"text": "x"}, server="ro")
        assert (await rt.call_tool("glob__echo", {"text": "hi"}))["content"][0]["text"] == "hi"
    assert tools_calls(caplog) == ["echo"]


# --- a project server -------------------------------------------------------------------------


def _project(kxen_home: Any, ws: Path, entry: dict[str, Any], settings: str = "") -> str:
    """Write the project entry ``ev``, trust the workspace, add ``settings`` to config.toml; the
    fingerprint of the launch to approve."""
    write_project(ws, {"ev": entry})
    trust(kxen_home.path, ws)
    if settings:
        path = kxen_home.path / "config.toml"
        path.write_text(path.read_text() + "\n" + settings)
    return resolve_launch(load_config(kxen_home.path, ws).servers["ev"], ws).fingerprint


async def test_a_project_only_narrows_what_the_user_allows(kxen_home, ws, node, everything_js, caplog):
    caplog.set_level(logging.DEBUG, logger="kxen.traffic")
    # the user's entry of this name hides get-env; the project entry replaces it and asks for get-*:
    # get-env stays hidden, and the user's rule for this project server hides get-sum too
    kxen_home.write_servers({"ev": everything(node, everything_js, disabledTools=["get-env"])})
    rule = f'[[project_filters]]\nworkspace = "{ws.parent}"\nserver = "ev"\ndisabled_tools = ["get-sum"]\n'
    fp = _project(kxen_home, ws, everything(node, everything_js, enabledTools=["echo", "get-*"]), rule)
    async with Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]), approve=[fp]) as rt:
        await ready(rt)
        assert rt.servers["ev"].config.scope == "project"
        names = shown(rt, "ev")
        assert "echo" in names and "get-tiny-image" in names
        assert not names & {"get-env", "get-sum", "toggle-simulated-logging"}
        why = {t["name"]: t["why"] for t in rt.tools("ev", include_hidden=True)}
        assert why["toggle-simulated-logging"] == "filtered by enabledTools (project config)"
        assert why["get-env"] == "filtered by disabledTools 'get-env' of the user entry 'ev' (user config)"
        assert why["get-sum"] == "filtered by project_filters[0].disabled_tools 'get-sum' (user settings)"
        for tool in ("get-env", "get-sum"):
            with pytest.raises(PolicyDenied, match="filtered by"):
                await rt.call_tool(f"ev__{tool}", {})
        assert_sizes(rt, "ev")
    assert tools_calls(caplog) == []


async def test_the_users_project_filters_hold_whatever_the_launch(kxen_home, ws, tmp_path, node, everything_js):
    """A ``[[project_filters]]`` rule names a server and a workspace, not a launch: when the
    project's launch changes (and is approved again) what the user hid stays hidden; a rule for
    another workspace is not applied."""
    other = tmp_path / "other"
    other.mkdir()
    rules = (
        f'[[project_filters]]\nworkspace = "{ws}"\nserver = "ev"\nenabled_tools = ["echo", "get-s*"]\n'
        f'[[project_filters]]\nworkspace = "{other}"\nserver = "ev"\ndisabled_tools = ["echo"]\n'
    )
    fp = _project(kxen_home, ws, everything(node, everything_js, env={"MODE": "one"}), rules)
    pm = make_plugin_manager(allow=["stdio"])
    async with Runtime(home=kxen_home.path, workspace=ws, pm=pm, approve=[fp]) as rt:
        await ready(rt)
        assert shown(rt, "ev") == {"echo", "get-sum", "get-structured-content"}
        first = row(rt, "ev")
        # one more rule, and a reload: applied to the running server, its catalog as it was
        catalog = rt.servers["ev"].catalogs["tools"]
        settings = kxen_home.path / "config.toml"
        before = settings.read_text()
        settings.write_text(
            before + f'[[project_filters]]\nworkspace = "{ws}"\nserver = "ev"\ndisabled_tools = ["echo"]\n'
        )
        await rt.reload()
        assert shown(rt, "ev") == {"get-sum", "get-structured-content"}
        assert rt.servers["ev"].catalogs["tools"] is catalog and row(rt, "ev")["state"] == "ready"
        settings.write_text(before)
        await rt.reload()
        assert shown(rt, "ev") == {"echo", "get-sum", "get-structured-content"}
    write_project(ws, {"ev": everything(node, everything_js, env={"MODE": "two"})})
    fp2 = resolve_launch(load_config(kxen_home.path, ws).servers["ev"], ws).fingerprint
    assert fp2 != fp
    async with Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]), approve=[fp2]) as rt:
        await ready(rt)
        assert shown(rt, "ev") == {"echo", "get-sum", "get-structured-content"}
        assert row(rt, "ev")["toolChars"] == first["toolChars"]
        why = {t["name"]: t["why"] for t in rt.tools("ev", include_hidden=True)}
        assert why["get-env"] == "filtered by project_filters[0].enabled_tools (user settings)"

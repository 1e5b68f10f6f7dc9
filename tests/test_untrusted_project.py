"""An untrusted workspace's project file gives its server names and nothing more.

A repository the user merely opened is not parsed beyond what status needs to say "these servers
wait for trust": the file gets the bounded, non-blocking read of every config file and its JSON is
decoded, but no entry is structured, validated or resolved -- no command is looked up, no file is
digested, no cwd is followed. Once the workspace is trusted the file is read whole.
"""

from __future__ import annotations

import json

import pytest
from support import demo_entry, settle, state, write_project

from kxen_core.cli import command as cli
from kxen_core.config import load_config
from kxen_core.config.models import UNREAD
from kxen_core.config.trust import trust
from kxen_core.errors import ConnectError
from kxen_core.launch.resolve import resolve_launch
from kxen_core.runtime.workspace import Runtime

pytestmark = pytest.mark.anyio

#: entries that would be refused, resolved, digested or followed if they were read
HOSTILE = {
    "env": {"command": "python3", "env": {"LD_PRELOAD": "/tmp/x.so", "GIT_CONFIG_KEY_0": "core.fsmonitor"}},
    "cwd": {"command": "python3", "cwd": "loop"},
    "bogus": {"command": 7, "args": "not a list", "nonsense": True},
    "remote": {"url": "http://example.com/mcp", "headers": {"Authorization": "Bearer sk-live-not-shown"}},
}


def test_only_the_names_are_read(kxen_home, ws):
    (ws / "loop").symlink_to("loop")
    write_project(ws, HOSTILE)
    config = load_config(None, ws)
    assert not config.trusted and config.project_problems == ()
    assert sorted(config.servers) == sorted(HOSTILE)
    for server in config.servers.values():
        assert (server.scope, server.kind, server.command, server.url, server.env) == (
            "project",
            UNREAD,
            None,
            None,
            {},
        )
        with pytest.raises(ConnectError, match="not trusted"):
            resolve_launch(server, ws)  # nothing of it can be launched


def test_trusting_reads_the_file_whole(kxen_home, ws):
    write_project(ws, HOSTILE)
    trust(kxen_home.path, ws)
    config = load_config(None, ws)
    assert config.trusted and not config.servers.keys() & HOSTILE.keys()  # rejected whole, with reasons
    problems = "\n".join(config.project_problems)
    assert "LD_PRELOAD" in problems and "mcpServers.bogus" in problems and "sk-live" not in problems


@pytest.mark.parametrize(
    "text, rule",
    [
        ("[1, 2]", "must be a JSON object"),
        ('{"mcpServers": {}, "trusted_workspaces": ["/"]}', "unknown key(s): trusted_workspaces"),
        ('{"mcpServers": []}', "must be an object of server definitions"),
        ('{"mcpServers": {"a__b": {}}}', "must not contain '__'"),
        ('{"mcpServers": {"x_": {}}}', "must not end with '_'"),
        ('{"mcpServers": {"p": ', "not valid JSON"),
    ],
)
def test_the_shape_of_an_untrusted_file_is_still_checked(kxen_home, ws, text, rule):
    (ws / ".kxen").mkdir()
    (ws / ".kxen" / "mcp.json").write_text(text)
    config = load_config(None, ws)
    assert not [s for s in config.servers.values() if s.scope == "project"]
    assert any(rule in p for p in config.project_problems), config.project_problems


def test_at_most_a_hundred_names_are_shown(kxen_home, ws):
    write_project(ws, {f"s{i}": {} for i in range(150)})
    config = load_config(None, ws)
    assert len(config.servers) == 100 and "first 100" in config.project_problems[0]


async def test_status_says_the_servers_wait_for_trust_and_a_user_entry_stands_in(kxen_home, ws, tmp_path):
    ulog = tmp_path / "u.log"
    kxen_home.write_servers({"shared": demo_entry(ulog)})
    write_project(ws, {"shared": demo_entry(), "p": demo_entry()})
    async with Runtime(workspace=ws) as rt:
        await settle(rt)
        p = state(rt, "p")
        assert (p["state"], p["scope"], p["transport"], p["fingerprint"]) == ("awaiting_trust", "project", UNREAD, None)
        assert "not trusted" in p["error"]
        shared = state(rt, "shared")
        assert shared["state"] == "ready" and shared["scope"] == "user"
        assert "using the user entry" in shared["note"]


def test_cli_says_what_to_do(kxen_home, ws, capsys):
    write_project(ws, HOSTILE)
    base = ["--workspace", str(ws)]
    assert cli.main([*base, "mcp", "approvals", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["approvals"]
    # what each would run is not known yet: every name waits for trust, none has a launch
    assert {r["server"] for r in rows} == set(HOSTILE)
    assert {(r["kind"], r["fingerprint"], r["launch"], r["transport"]) for r in rows} == {
        ("workspace_trust", None, None, None)
    }
    assert cli.main([*base, "mcp", "approvals"]) == 0
    out = capsys.readouterr().out
    assert out.count("waits for the workspace to be trusted (kxen trust") == len(HOSTILE)
    assert cli.main([*base, "config", "check", "--json"]) == 0
    check = json.loads(capsys.readouterr().out)
    assert check["ok"] and check["trusted"] is False and "not checked: the workspace is not trusted" in check["note"]
    assert "sk-live" not in json.dumps(check) + out

"""``kxen mcp policy | enable | disable``, ``kxen config set`` and the ``mcp add`` options: a
setting changed without hand-editing a file, checked by the loader's rules, locked and atomic, and
a refusal that leaves the file byte-identical."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kxen_core.config import load_config

WAIT = 60


@pytest.fixture(autouse=True)
def kinds(kx, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory,stdio,http,sse")


def servers_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())["mcpServers"]


def refused(kx: Any, path: Path, *argv: str) -> tuple[str, str]:
    before = path.read_bytes() if path.exists() else None
    code, out, err = kx(*argv)
    assert code == 2, (out, err)
    assert (path.read_bytes() if path.exists() else None) == before, "a refused change leaves the file as it was"
    return out, err


@pytest.fixture
def user(kx, kxen_home) -> Path:
    code, _, err = kx("mcp", "add", "gh", "--", "node", "server.js")
    assert code == 0, err
    return kxen_home.path / "mcp.json"


# --- kxen mcp policy ------------------------------------------------------------------------------


def test_policy_sets_a_tool_and_the_default_as_the_loader_reads_them(kx, kxen_home, ws, user):
    code, out, err = kx("mcp", "policy", "gh", "delete_repo", "deny")
    assert code == 0, err
    assert f"gh: toolPolicies.delete_repo = deny in {user} (user config)" in out
    code, out, err = kx("mcp", "policy", "gh", "--default", "allow", "--json")
    assert code == 0, err
    assert json.loads(out) == {"ok": True, "name": "gh", "scope": "user", "file": str(user), "changed": True,
                               "tool": None, "policy": "allow"}  # fmt: skip
    code, out, _ = kx("mcp", "policy", "gh", "delete_repo", "deny")
    assert code == 0 and "(unchanged)" in out
    server = load_config(kxen_home.path, ws).servers["gh"]
    assert (server.toolPolicies, server.defaultToolPolicy) == ({"delete_repo": "deny"}, "allow")
    assert servers_of(user)["gh"]["command"] == "node", "the rest of the entry is kept"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["gh", "t", "maybe"], "the policy is one of allow, ask, deny (got 'maybe')"),
        (["gh", "t"], "kxen mcp policy SERVER TOOL allow|ask|deny"),
        (["gh", "--default", "t", "deny"], "kxen mcp policy SERVER --default allow|ask|deny"),
    ],
)
def test_policy_usage_errors(kx, user, argv, message):
    _, err = refused(kx, user, "mcp", "policy", *argv)
    assert message in err


def test_policy_of_an_unknown_server_names_the_file(kx, user):
    _, err = refused(kx, user, "mcp", "policy", "nope", "t", "deny")
    assert f"{user}: mcpServers.nope: no server of this name in this file" in err


def test_a_project_file_may_not_allow_its_own_tools(kx, ws):
    code, _, err = kx("mcp", "add", "p", "--scope", "project", "--", "node", "s.js")
    assert code == 0, err
    path = ws / ".kxen" / "mcp.json"
    _, err = refused(kx, path, "mcp", "policy", "p", "t", "allow")
    assert f"{path}: mcpServers.p.toolPolicies.t: project config may only ask or deny" in err
    code, _, err = kx("mcp", "policy", "p", "t", "deny")  # found in the project file without --scope
    assert code == 0, err and servers_of(path)["p"]["toolPolicies"] == {"t": "deny"}


def test_a_name_in_both_files_needs_the_scope(kx, ws, user):
    code, _, err = kx("mcp", "add", "gh", "--scope", "project", "--", "node", "s.js")
    assert code == 0, err
    for argv in (["policy", "gh", "t", "deny"], ["disable", "gh"]):
        _, err = refused(kx, user, "mcp", *argv)
        assert "give --scope user or --scope project" in err
    code, _, err = kx("mcp", "disable", "gh", "--scope", "user")
    assert code == 0, err and servers_of(user)["gh"]["enabled"] is False


# --- kxen mcp enable | disable --------------------------------------------------------------------


def test_disable_then_enable(kx, kxen_home, ws, user):
    code, out, err = kx("mcp", "disable", "gh")
    assert code == 0, err and f"gh: disabled in {user}" in out
    assert load_config(kxen_home.path, ws).servers["gh"].enabled is False
    code, out, _ = kx("mcp", "plan", "--json")
    [row] = json.loads(out)["servers"]
    assert (row["start"], row["state"]) == (False, "disabled")
    code, out, _ = kx("mcp", "disable", "gh")
    assert code == 0 and "(unchanged)" in out
    code, out, err = kx("mcp", "enable", "gh", "--json")
    assert code == 0, err and json.loads(out)["changed"] is True
    assert "enabled" not in servers_of(user)["gh"], "enabled is the default: the key goes"
    assert load_config(kxen_home.path, ws).servers["gh"].enabled is True


def test_a_write_onto_a_broken_file_is_refused(kx, kxen_home, user):
    entries = servers_of(user)
    entries["old"] = {"command": "x", "bogus": 1}
    user.write_text(json.dumps({"mcpServers": entries}))
    _, err = refused(kx, user, "mcp", "disable", "gh")
    assert f"{user}: mcpServers.old: unknown key(s): bogus" in err


# --- kxen config set ------------------------------------------------------------------------------


def test_config_set_writes_a_checked_key_and_keeps_comments(kx, kxen_home):
    settings = kxen_home.path / "config.toml"
    kxen_home.write_settings("# mine\n[mcp]\nremote_enabled = true  # on for work\n")
    code, out, err = kx("config", "set", "mcp.allow_loopback_http", "true")
    assert code == 0, err and f"mcp.allow_loopback_http = true in {settings}" in out
    code, out, err = kx("config", "set", "mcp.remote_catalog.max_schema_depth", "40", "--json")
    assert code == 0, err and json.loads(out)["changed"] is True
    text = settings.read_text()
    assert "# mine" in text and "# on for work" in text
    mcp = load_config(kxen_home.path).settings.mcp
    assert (mcp.remote_enabled, mcp.allow_loopback_http, mcp.remote_catalog.max_schema_depth) == (True, True, 40)
    code, out, _ = kx("config", "set", "mcp.allow_loopback_http", "true")
    assert code == 0 and "(unchanged)" in out


@pytest.mark.parametrize(
    ("key", "value", "rule"),
    [
        ("mcp.max_output_chars", "5", "mcp.max_output_chars: max_output_chars must be between 10000 and 10000000"),
        ("mcp.allow_loopback_http", "yes", "mcp.allow_loopback_http: must be true or false"),
        ("mcp.max_output_chars", "1e9", "mcp.max_output_chars: must be a whole number"),
    ],
)
def test_config_set_refuses_what_the_loader_would(kx, kxen_home, key, value, rule):
    kxen_home.write_settings("[mcp]\nremote_enabled = false\n")
    _, err = refused(kx, kxen_home.path / "config.toml", "config", "set", key, value)
    assert rule in err


def test_config_set_refusal_as_json_objects(kx, kxen_home):
    settings = kxen_home.path / "config.toml"
    kxen_home.write_settings("[mcp]\n")
    out, _ = refused(kx, settings, "config", "set", "mcp.max_output_chars", "5", "--json")
    [problem] = json.loads(out)["problems"]
    assert problem == {"file": str(settings), "path": "mcp.max_output_chars",
                       "rule": "max_output_chars must be between 10000 and 10000000 (got 5)"}  # fmt: skip


def test_config_set_of_an_unknown_key_lists_the_keys(kx, kxen_home):
    code, _, err = kx("config", "set", "mcp.remote_enabeld", "true")
    assert code == 2 and "mcp.remote_enabled" in err and not (kxen_home.path / "config.toml").exists()


# --- kxen mcp add: --cwd, --timeout, --policy; what is missing ------------------------------------


def test_add_takes_cwd_timeout_and_policies(kx, kxen_home, ws, tmp_path):
    code, _, err = kx("mcp", "add", "w", "--cwd", str(tmp_path), "--timeout", "45", "--policy", "deny",
                      "--policy", "get_forecast=allow", "--env", "A=1", "--", "python3", "server.py")  # fmt: skip
    assert code == 0, err
    assert servers_of(kxen_home.path / "mcp.json")["w"] == {
        "command": "python3", "args": ["server.py"], "cwd": str(tmp_path), "timeouts": {"requestSeconds": 45},
        "toolPolicies": {"get_forecast": "allow"}, "defaultToolPolicy": "deny", "env": {"A": "1"},
    }  # fmt: skip
    server = load_config(kxen_home.path, ws).servers["w"]
    assert (server.timeouts.requestSeconds, server.defaultToolPolicy) == (45, "deny")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["x", "--policy", "sometimes", "--", "c"], "--policy takes allow, ask or deny, or TOOL=allow|ask|deny"),
        (["x", "--url", "https://x.example/mcp", "--cwd", "/tmp"], "--cwd is for a stdio server"),
    ],
)
def test_add_option_errors(kx, kxen_home, argv, message):
    _, err = refused(kx, kxen_home.path / "mcp.json", "mcp", "add", *argv)
    assert message in err


def test_add_timeout_must_be_positive(kx, kxen_home, capsys):
    with pytest.raises(SystemExit) as info:
        kx("mcp", "add", "x", "--timeout", "0", "--", "c")
    assert info.value.code == 2 and "must be a number of seconds > 0" in capsys.readouterr().err
    assert not (kxen_home.path / "mcp.json").exists()


def test_add_without_command_or_url_says_what_is_missing(kx, kxen_home):
    _, err = refused(kx, kxen_home.path / "mcp.json", "mcp", "add", "x")
    assert "no server given" in err and "not both" not in err
    assert "kxen mcp add NAME -- COMMAND ARGS..." in err and "--url URL" in err


def test_add_help_shows_examples(kx, capsys):
    from kxen_core.cli import command as cli

    with pytest.raises(SystemExit):
        cli.main(["mcp", "add", "--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and "kxen mcp add weather --timeout 60 --policy ask" in out
    assert "--cwd" in out and "--timeout" in out and "--policy" in out


def test_the_loopback_rule_names_the_settings_file_and_the_command(kx, kxen_home):
    _, err = refused(kx, kxen_home.path / "mcp.json", "mcp", "add", "loop", "--url", "http://127.0.0.1:9/mcp")
    assert f"({kxen_home.path / 'config.toml'}: kxen config set mcp.allow_loopback_http true)" in err
    code, _, err = kx("config", "set", "mcp.allow_loopback_http", "true")
    assert code == 0, err
    code, _, err = kx("mcp", "add", "loop", "--url", "http://127.0.0.1:9/mcp")
    assert code == 0, err


# --- against a real server ---------------------------------------------------------------------------


def test_policy_and_disable_hold_for_a_real_server(kx, kxen_home, monkeypatch, everything_js):
    """The twin against server-everything: a tool set to deny is refused, the others run; a
    disabled server does not start."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    code, _, err = kx("mcp", "add", "ev", "--policy", "allow", "--policy", "get-env=deny", "--", node, everything_js)
    assert code == 0, err
    code, out, err = kx("mcp", "call", "ev", "echo", "--args", '{"message": "hi"}', "--wait", str(WAIT))
    assert code == 0 and "hi" in out, err
    code, out, err = kx("mcp", "call", "ev", "get-env", "--wait", str(WAIT))
    assert code == 1 and "denied" in (out + err).lower()
    code, _, err = kx("mcp", "policy", "ev", "echo", "deny")
    assert code == 0, err
    code, out, err = kx("mcp", "call", "ev", "echo", "--args", '{"message": "hi"}', "--wait", str(WAIT))
    assert code == 1 and "denied" in (out + err).lower()
    code, _, err = kx("mcp", "disable", "ev")
    assert code == 0, err
    code, out, err = kx("mcp", "status", "--json", "--wait", str(WAIT))
    [row] = json.loads(out)["servers"]
    assert row["state"] == "disabled", (out, err)

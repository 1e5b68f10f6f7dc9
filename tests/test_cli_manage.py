"""``kxen mcp list | get | add | add-json | remove``: shapes, refusals with the rule, atomic and
locked writes, symlinks written through, and a real server added from the command line."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from kxen_core.config import load_config
from kxen_core.config.edit import add_server

LIST_KEYS = {"name", "scope", "source", "transport", "enabled", "command", "args", "url", "replacedByProject", "note"}
GET_KEYS = LIST_KEYS | {
    "cwd", "env", "headers", "oauth", "options", "toolPolicies", "defaultToolPolicy", "timeouts", "protocolEra",
    "fromEnvironment",
    "read", "alsoIn",
}  # fmt: skip
WAIT = 60


@pytest.fixture(autouse=True)
def kinds(kx, monkeypatch):
    """The built-in kinds are registered (entries are checked against them), nothing else."""
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory,stdio,http,sse")


def servers_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())["mcpServers"]


def user_file(kxen_home: Any) -> Path:
    return kxen_home.path / "mcp.json"


# --- add, add-json, remove: what lands in the file ----------------------------------------------


def test_add_stdio_and_remote_then_list_and_get(kx, kxen_home):
    code, out, err = kx("mcp", "add", "files", "--env", "LOG_LEVEL=debug", "--", "npx", "-y", "some-server", "--flag")
    assert code == 0, err
    assert "added server 'files'" in out and str(user_file(kxen_home)) in out
    code, _, err = kx("mcp", "add", "api", "--url", "https://mcp.example.com/mcp", "--transport", "sse",
                      "--header", "Authorization: Bearer tok-secret-1234", "--header", "X-Team:core")  # fmt: skip
    assert code == 0, err
    assert servers_of(user_file(kxen_home)) == {
        "files": {"command": "npx", "args": ["-y", "some-server", "--flag"], "env": {"LOG_LEVEL": "debug"}},
        "api": {"url": "https://mcp.example.com/mcp", "transport": "sse",
                "headers": {"Authorization": "Bearer tok-secret-1234", "X-Team": "core"}},
    }  # fmt: skip
    assert stat.S_IMODE(user_file(kxen_home).stat().st_mode) == 0o600  # it may hold secrets

    code, out, _ = kx("mcp", "list", "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"servers", "problems", "trusted"}
    rows = {r["name"]: r for r in data["servers"]}
    assert all(set(r) == LIST_KEYS for r in rows.values())
    assert (rows["files"]["transport"], rows["files"]["command"], rows["files"]["args"]) == (
        "stdio",
        "npx",
        ["-y", "some-server", "--flag"],
    )
    assert (rows["api"]["transport"], rows["api"]["url"], rows["api"]["command"]) == (
        "sse",
        "https://mcp.example.com/mcp",
        None,
    )

    code, out, _ = kx("mcp", "get", "api", "--json")
    shown = json.loads(out)
    assert code == 0 and set(shown) == GET_KEYS
    assert shown["headers"] == {"Authorization": "***", "X-Team": "core"}
    assert "tok-secret-1234" not in out

    code, out, _ = kx("mcp", "list")
    assert code == 0 and "files" in out and "api" in out and "tok-secret" not in out

    code, out, _ = kx("mcp", "remove", "files")
    assert code == 0 and "removed server 'files'" in out
    assert list(servers_of(user_file(kxen_home))) == ["api"]


def test_add_json_keeps_unrelated_entries_and_their_order(kx, kxen_home):
    original = {"b": {"command": "x", "toolPolicies": {"t": "deny"}}, "a": {"command": "y", "enabled": False}}
    kxen_home.write_servers(original)
    user_file(kxen_home).chmod(0o600)
    code, out, err = kx(
        "mcp", "add-json", "c", json.dumps({"command": "z", "args": ["1"], "defaultToolPolicy": "deny"}), "--json"
    )
    assert code == 0, err
    assert json.loads(out) == {
        "ok": True,
        "name": "c",
        "scope": "user",
        "file": str(user_file(kxen_home)),
        "warnings": [],
    }
    got = servers_of(user_file(kxen_home))
    assert list(got) == ["b", "a", "c"] and got["b"] == original["b"] and got["a"] == original["a"]


def test_list_starts_nothing_and_shows_an_empty_config(kx, kxen_home):
    code, out, _ = kx("mcp", "list")
    assert code == 0 and "no servers configured" in out
    code, out, _ = kx("mcp", "list", "--json")
    assert json.loads(out) == {"servers": [], "problems": [], "trusted": False}


def test_list_of_a_broken_user_file_is_the_loader_error(kx, kxen_home):
    kxen_home.write_servers({"x": {"comand": "y"}})
    code, _, err = kx("mcp", "list")
    assert code == 2 and "mcpServers.x" in err and "comand" in err


# --- refusals: the rule, the key path, and the file left byte-identical --------------------------


def refused(kx: Any, path: Path, *argv: str) -> str:
    before = path.read_bytes() if path.exists() else None
    code, out, err = kx(*argv)
    assert code == 2, (out, err)
    after = path.read_bytes() if path.exists() else None
    assert after == before, "a refused change must leave the file byte-identical"
    return err


@pytest.fixture
def seeded(kxen_home):
    kxen_home.write_servers({"keep": {"command": "x", "env": {"A": "1"}}})
    user_file(kxen_home).chmod(0o600)
    return user_file(kxen_home)


@pytest.mark.parametrize(
    ("argv", "rule"),
    [
        (
            ["add-json", "bad", '{"command": "x", "comand": "y"}'],
            r"mcpServers\.bad: unknown key\(s\): comand \(did you mean 'command'\?",
        ),
        (
            ["add-json", "bad", '{"type": "stdio", "command": "x"}'],
            r"mcpServers\.bad: unknown key\(s\): type \(did you mean 'transport'\? kxen mcp import",
        ),
        (
            ["add-json", "bad", '{"httpUrl": "https://x.example/mcp"}'],
            r"mcpServers\.bad: unknown key\(s\): httpUrl \(did you mean 'url'\?",
        ),
        (["add", "bad", "--url", "http://example.com/mcp"], r"mcpServers\.bad\.url: must be https://"),
        (
            ["add", "bad", "--url", "https://x.example/mcp", "--transport", "streamable-http"],
            r"mcpServers\.bad\.transport: unknown transport kind 'streamable-http' \(did you mean 'http'\?",
        ),
        (["add", "bad__x", "--", "cmd"], r"mcpServers\.bad__x: server names must not contain '__'"),
        (
            ["add", "keep", "--", "cmd"],
            r"mcpServers\.keep: a server of this name is already configured here \(kxen mcp remove keep first\)",
        ),
        (
            ["add", "bad", "--env", "TOKEN=${1X}", "--", "cmd"],
            r"mcpServers\.bad\.env\.TOKEN: a malformed reference at character 0",
        ),
        (
            ["add-json", "bad", '{"command": "x", "timeouts": {"requestSeconds": "30"}}'],
            r"mcpServers\.bad\.timeouts\.requestSeconds: expected a number, got str",
        ),
        (["remove", "nope"], r"mcpServers\.nope: no server of this name in this file"),
    ],
)
def test_an_invalid_result_is_refused_with_the_rule(kx, seeded, monkeypatch, argv, rule):
    monkeypatch.delenv("UNSET_VAR_FOR_TEST", raising=False)
    err = refused(kx, seeded, "mcp", *argv)
    assert "not saved (no file was changed)" in err
    assert re.search(re.escape(str(seeded)) + ": " + rule, err), err


def test_refusal_as_json(kx, seeded):
    before = seeded.read_bytes()
    code, out, _ = kx("mcp", "add-json", "bad", '{"url": "ftp://x"}', "--json")
    assert code == 2 and seeded.read_bytes() == before
    data = json.loads(out)
    assert data["ok"] is False
    assert {"file": str(seeded), "path": "mcpServers.bad.url", "rule": "must be an https:// URL"} in data["problems"]


def test_a_problem_the_file_already_had_refuses_the_write(kx, kxen_home):
    kxen_home.write_servers({"old": {"command": "x", "bogus": 1}})
    user_file(kxen_home).chmod(0o600)
    err = refused(kx, user_file(kxen_home), "mcp", "add", "new", "--", "cmd")
    assert "mcpServers.old: unknown key(s): bogus" in err
    # removing the broken entry is what makes the file valid again: allowed
    code, _, err = kx("mcp", "remove", "old")
    assert code == 0, err and servers_of(user_file(kxen_home)) == {}


def test_unparsable_or_foreign_owned_files_are_not_rewritten(kx, kxen_home):
    path = user_file(kxen_home)
    path.write_text("{not json")
    path.chmod(0o600)
    err = refused(kx, path, "mcp", "add", "x", "--", "cmd")
    assert "cannot be updated: not valid JSON" in err
    path.write_text('{"mcpServers": {}}')
    path.chmod(0o666)
    err = refused(kx, path, "mcp", "add", "x", "--", "cmd")
    assert "cannot be updated: refused: writable by every user" in err


@pytest.mark.parametrize(
    ("argv", "rule"),
    [
        (
            ["--header", "Authorization: Bearer abc12345"],
            r"mcpServers\.p\.headers\.Authorization: project config must not hold credential headers",
        ),
        (
            ["--header", "X-Api-Key: abc12345"],
            r"mcpServers\.p\.headers\.X-Api-Key: project config must not hold credential headers",
        ),
        (
            ["--header", "X-Tenant: ${TENANT}"],
            r"mcpServers\.p\.headers\.X-Tenant: project config must not reference host variables",
        ),
    ],
)
def test_project_remote_entries_refused_with_the_project_rule(kx, ws, argv, rule):
    path = ws / ".kxen" / "mcp.json"
    err = refused(kx, path, "mcp", "add", "p", "--scope", "project", "--url", "https://x.example/mcp", *argv)
    assert re.search(re.escape(str(path)) + ": " + rule, err), err
    assert "abc12345" not in err
    assert not path.exists() and not (ws / ".kxen").exists(), "a refused add creates nothing in the repository"


@pytest.mark.parametrize(
    ("env", "rule"),
    [
        ("LD_PRELOAD=/tmp/x.so", "project config must not set this variable"),
        ("NODE_OPTIONS=--require=x", "project config must not set this variable"),
        ("TOKEN=${HOME}", "project config must not reference host variables"),
    ],
)
def test_project_stdio_entries_refused_with_the_project_rule(kx, ws, env, rule):
    path = ws / ".kxen" / "mcp.json"
    err = refused(kx, path, "mcp", "add", "p", "--scope", "project", "--env", env, "--", "node", "s.js")
    assert f"{path}: mcpServers.p.env.{env.partition('=')[0]}: {rule}" in err


def test_project_add_and_remove(kx, ws, kxen_home):
    code, out, err = kx("mcp", "add", "p", "--scope", "project", "--env", "MODE=fast", "--", "node", "s.js")
    assert code == 0, err and "trusted workspace" in out
    path = ws / ".kxen" / "mcp.json"
    assert servers_of(path) == {"p": {"command": "node", "args": ["s.js"], "env": {"MODE": "fast"}}}
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert not list(ws.rglob("*.lock")), "the lock lives in KXEN_HOME, never in the repository"
    # in an untrusted workspace list shows the name only
    code, out, _ = kx("mcp", "list", "--json")
    [row] = json.loads(out)["servers"]
    assert (row["name"], row["scope"], row["transport"], row["command"]) == ("p", "project", "(not read)", None)
    assert "not trusted" in row["note"]
    # a name in both files: remove needs --scope
    kxen_home.write_servers({"p": {"command": "x"}})
    user_file(kxen_home).chmod(0o600)
    code, _, err = kx("mcp", "remove", "p")
    assert code == 2 and "--scope" in err
    code, _, err = kx("mcp", "remove", "p", "--scope", "project")
    assert code == 0, err and servers_of(path) == {} and "p" in servers_of(user_file(kxen_home))


def test_get_prefers_the_project_entry_and_names_the_other(kx, ws, kxen_home):
    kxen_home.write_servers({"p": {"command": "user-cmd"}})
    user_file(kxen_home).chmod(0o600)
    code, _, err = kx("mcp", "add", "p", "--scope", "project", "--", "project-cmd")
    assert code == 0, err
    code, _, err = kx("trust", str(ws))
    assert code == 0, err
    shown = json.loads(kx("mcp", "get", "p", "--json")[1])
    assert (shown["scope"], shown["command"]) == ("project", "project-cmd")
    assert shown["alsoIn"] == [{"scope": "user", "source": str(user_file(kxen_home))}]
    shown = json.loads(kx("mcp", "get", "p", "--scope", "user", "--json")[1])
    assert (shown["scope"], shown["command"], shown["replacedByProject"]) == ("user", "user-cmd", True)
    code, _, err = kx("mcp", "get", "nope")
    assert code == 2 and "no server named 'nope'" in err


# --- files: symlinks, escapes from the workspace -------------------------------------------------


def test_a_symlinked_user_file_is_written_through(kx, kxen_home, tmp_path):
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "kxen-mcp.json"
    real.write_text('{"mcpServers": {"a": {"command": "x"}}}')
    real.chmod(0o600)
    user_file(kxen_home).symlink_to(real)
    code, _, err = kx("mcp", "add", "b", "--", "y")
    assert code == 0, err
    assert user_file(kxen_home).is_symlink() and os.readlink(user_file(kxen_home)) == str(real)
    assert list(servers_of(real)) == ["a", "b"]
    assert sorted(p.name for p in dotfiles.iterdir()) == ["kxen-mcp.json"], "no temp file is left behind"


def test_a_project_file_that_leads_outside_the_workspace_is_not_written(kx, ws, tmp_path):
    outside = tmp_path / "elsewhere.json"
    outside.write_text('{"mcpServers": {}}')
    (ws / ".kxen").mkdir()
    (ws / ".kxen" / "mcp.json").symlink_to(outside)
    err = refused(kx, outside, "mcp", "add", "p", "--scope", "project", "--", "node")
    assert "leads outside the workspace" in err
    # a .kxen directory that is a link out of the workspace: the same
    (ws / ".kxen" / "mcp.json").unlink()
    (ws / ".kxen").rmdir()
    (tmp_path / "dir").mkdir()
    (ws / ".kxen").symlink_to(tmp_path / "dir")
    refused(kx, tmp_path / "dir" / "mcp.json", "mcp", "add", "p", "--scope", "project", "--", "node")
    assert not (tmp_path / "dir" / "mcp.json").exists()


# --- usage errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["add", "x"], "give either a command after --"),
        (["add", "x", "--url", "https://x.example/mcp", "--", "cmd"], "not both"),
        (["add", "x", "--header", "A: b", "--", "cmd"], "--header is for a remote server"),
        (["add", "x", "--url", "https://x.example/mcp", "--env", "A=b"], "--env is for a stdio server"),
        (["add", "x", "--env", "NOEQUALS", "--", "cmd"], "--env takes K=V"),
        (["add-json", "x", "[1]"], "JSON must be an object"),
        (["add-json", "x", "{"], "JSON is not valid"),
    ],
)
def test_usage_errors(kx, kxen_home, argv, message):
    err = refused(kx, user_file(kxen_home), "mcp", *argv)
    assert message in err


def test_dash_arguments_need_the_separator_or_follow_the_command(kx, kxen_home):
    code, _, err = kx("mcp", "add", "a", "node", "-e", "x", "--json")  # all of it is the command
    assert code == 0, err
    assert servers_of(user_file(kxen_home))["a"] == {"command": "node", "args": ["-e", "x", "--json"]}
    code, out, err = kx("mcp", "add", "b", "--json", "--env", "A=1", "--", "node", "--json")
    assert code == 0, err and json.loads(out)["ok"] is True
    assert servers_of(user_file(kxen_home))["b"] == {"command": "node", "args": ["--json"], "env": {"A": "1"}}


# --- two processes adding at once: both land ------------------------------------------------------

ADDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from kxen_core.config.edit import add_server

    home, ws, ready, go = (Path(a) for a in sys.argv[1:5])
    prefix, count = sys.argv[5], int(sys.argv[6])
    ready.touch()
    deadline = time.monotonic() + {wait}
    while not go.exists():
        if time.monotonic() > deadline:
            sys.exit("no go within the deadline")
        time.sleep(0.005)
    for i in range(count):
        add_server(home, ws, "user", f"{{prefix}}{{i}}", {{"command": "x", "args": [str(i)]}}, lock_timeout={wait})
    """
).format(wait=WAIT)


def test_concurrent_adds_from_two_processes_all_land(kxen_home, ws, tmp_path):
    count = 15
    procs, readies = [], []
    go = tmp_path / "go"
    for prefix in ("a", "b"):
        ready = tmp_path / f"ready-{prefix}"
        readies.append(ready)
        procs.append(subprocess.Popen(
            [sys.executable, "-c", ADDER, str(kxen_home.path), str(ws), str(ready), str(go), prefix, str(count)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        ))  # fmt: skip
    try:
        deadline = time.monotonic() + WAIT
        while not all(r.exists() for r in readies):
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            assert time.monotonic() < deadline, "adders not ready"
            time.sleep(0.01)
        go.touch()
        for p in procs:
            _, err = p.communicate(timeout=WAIT)
            assert p.returncode == 0, err.decode()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(WAIT)
    names = set(servers_of(user_file(kxen_home)))
    assert names == {f"{prefix}{i}" for prefix in "ab" for i in range(count)}
    assert set(load_config(kxen_home.path, ws).servers) == names


def test_a_held_lock_times_out_with_a_clear_error(kxen_home, ws):
    import filelock

    from kxen_core.errors import ConfigError

    with filelock.FileLock(str(kxen_home.path / "mcp.json.lock")):
        with pytest.raises(ConfigError) as info:
            add_server(kxen_home.path, ws, "user", "x", {"command": "y"}, lock_timeout=0.1)
    assert "is held by another process" in info.value.problems[0]
    assert not user_file(kxen_home).exists()


# --- a real server, added from the command line ---------------------------------------------------


def test_a_server_added_with_add_json_runs_with_its_expanded_env(kx, kxen_home, monkeypatch, everything_js):
    """The twin against a real peer: server-everything's get-env returns the child's environment."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    monkeypatch.setenv("KXEN_TEST_HOST_SECRET", "hostsecret-0123456789")
    entry = {"command": node, "args": [everything_js, "stdio"], "defaultToolPolicy": "allow",
             "env": {"PASSED_ON": "${KXEN_TEST_HOST_SECRET}",
                     "PLAIN": "${KXEN_TEST_UNSET_VAR:-fallback-value}"}}  # fmt: skip
    code, _, err = kx("mcp", "add-json", "ev", json.dumps(entry))
    assert code == 0, err
    code, out, err = kx("mcp", "call", "ev", "get-env", "--json", "--wait", str(WAIT))
    assert code == 0, err
    assert "hostsecret-0123456789" not in out + err, "an expanded value is a secret in every output"
    text = json.loads(out)["content"][0]["text"]
    env = json.loads(text)
    assert env["PASSED_ON"] == "***", "the child got the value, and the output scrubbed it"
    assert env["PLAIN"] == "fallback-value"
    code, out, _ = kx("mcp", "get", "ev", "--json")
    shown = json.loads(out)
    assert shown["env"] == {"PASSED_ON": "${KXEN_TEST_HOST_SECRET}", "PLAIN": "${KXEN_TEST_UNSET_VAR:-fallback-value}"}
    assert shown["fromEnvironment"] == ["env.PASSED_ON", "env.PLAIN"]

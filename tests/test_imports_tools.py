"""Importing from the tools people have (issue 25): VS Code's and Gemini's variables, Gemini's tool
lists, ``envFile`` read at load, names made valid, ``--from TOOL`` finding the file at its usual
place -- each on a realistic file of that tool -- and ``${VAR}`` in ``command``/``args`` of user
entries."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from kxen_core.config import load_config
from kxen_core.config.envfile import read_env_file
from kxen_core.config.import_places import usual_places
from kxen_core.errors import ConfigError

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "imports"
WAIT = 60


@pytest.fixture(autouse=True)
def kinds(kx, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory,stdio,http,sse")


def run_import(kx: Any, *argv: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = kx("mcp", "import", *argv, "--json")
    return code, json.loads(out), err


def rows(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in data["servers"]}


def user_servers(kxen_home: Any) -> dict[str, Any]:
    return json.loads((kxen_home.path / "mcp.json").read_text())["mcpServers"]


# --- Gemini ----------------------------------------------------------------------------------------


def test_gemini_variables_tool_lists_timeout_and_trust(kx, kxen_home, monkeypatch):
    for name, value in (("GITHUB_TOKEN", "ghp-gemini-0123456789"), ("WEATHER_KEY", "wk-0123456789"),
                        ("DOCS_TOKEN", "docs-0123456789"), ("HOME", "/home/gem")):  # fmt: skip
        monkeypatch.setenv(name, value)
    code, data, _ = run_import(kx, str(FIXTURES / "gemini_vars" / ".gemini" / "settings.json"), "--yes")
    got = rows(data)
    assert data["format"] == "gemini" and code == 0, data
    assert {n: r["status"] for n, r in got.items()} == {"github": "add", "weather": "add", "docs-search": "add"}
    written = user_servers(kxen_home)
    github = written["github"]
    assert github["env"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}, "$VAR is written ${VAR}"
    assert github["timeouts"] == {"requestSeconds": 30.0}
    # includeTools: only these, each asking; excludeTools wins; nothing becomes "allow"
    assert github["defaultToolPolicy"] == "deny"
    assert github["toolPolicies"] == {"get_issue": "ask", "list_issues": "ask", "create_issue": "deny"}
    assert written["weather"]["command"] == "${HOME}/.local/bin/weather-mcp"
    assert any(n.startswith("trust: not imported") for n in got["weather"]["notes"])
    assert "allow" not in json.dumps(written)
    assert written["docs-search"]["headers"] == {"Authorization": "Bearer ${DOCS_TOKEN}"}
    assert any("'docs.search' is not a kxen server name" in n for n in got["docs-search"]["notes"])
    servers = load_config(kxen_home.path, kxen_home.path).servers
    assert servers["weather"].command == "/home/gem/.local/bin/weather-mcp"
    assert servers["github"].env["GITHUB_PERSONAL_ACCESS_TOKEN"] == "ghp-gemini-0123456789"
    assert "0123456789" not in json.dumps(data), "what variables supply is never shown"


# --- VS Code ---------------------------------------------------------------------------------------


def test_vscode_user_home_workspace_folder_env_file_and_inputs(kx, kxen_home, ws, monkeypatch):
    monkeypatch.setenv("HOME", "/home/vs")
    (ws / ".env").write_text("API_SECRET=from-the-env-file-0123\nexport MODE=fast\n")
    code, data, _ = run_import(kx, str(FIXTURES / "vscode_user.mcp.json"), "--yes")
    got = rows(data)
    assert data["format"] == "vscode" and code == 1  # github is refused: its token is an input
    assert {n: r["status"] for n, r in got.items()} == {"memory": "add", "local-api": "add", "github": "refused"}
    [why] = got["github"]["reasons"]
    assert "${input:github_token}: VS Code input variables are not supported" in why and "--env" in why
    written = user_servers(kxen_home)
    assert written["memory"]["env"] == {"MEMORY_FILE_PATH": "${HOME}/.mcp/memory.json"}
    assert written["local-api"]["command"] == "${HOME}/bin/api-mcp"
    assert written["local-api"]["args"] == ["--root", "."]
    assert written["local-api"]["envFile"] == str(ws / ".env")
    shown = got["local-api"]["entry"]
    assert shown["env"] == {"API_SECRET": "(from envFile)", "MODE": "(from envFile)"}
    assert "from-the-env-file" not in json.dumps(data)
    server = load_config(kxen_home.path, ws).servers["local-api"]
    assert server.command == "/home/vs/bin/api-mcp"
    assert server.env == {"API_SECRET": "from-the-env-file-0123", "MODE": "fast"}


# --- envFile and ${VAR} in command and args, as the loader reads them -------------------------------


def test_env_file_is_read_at_load_the_entry_wins_and_values_are_secrets(kx, kxen_home, ws, tmp_path):
    env_file = tmp_path / "app.env"
    env_file.write_text(
        "# comment\nexport TOKEN='tok en #1 value'\nQUOTED=\"a\\nb\"\nPLAIN = v1 # trailing comment\nOVER=file\n"
    )
    kxen_home.write_servers({"s": {"command": "x", "envFile": str(env_file), "env": {"OVER": "entry"}}})
    server = load_config(kxen_home.path, ws).servers["s"]
    assert server.env == {"TOKEN": "tok en #1 value", "QUOTED": "a\nb", "PLAIN": "v1", "OVER": "entry"}
    code, out, _ = kx("mcp", "get", "s", "--json")
    shown = json.loads(out)
    assert shown["env"]["TOKEN"] == "(from envFile)" and shown["env"]["OVER"] == "entry"
    assert "tok en #1 value" not in out


@pytest.mark.parametrize(
    ("content", "mode", "rule"),
    [
        ("OK=1\nthis is not a line\n", 0o600, "line 2: not KEY=VALUE"),
        ("A='unclosed\n", 0o600, "line 1: not KEY=VALUE"),
        ("A=1\n", 0o666, "refused: writable by every user"),
    ],
)
def test_a_bad_env_file_is_a_problem_naming_it_never_its_values(kxen_home, ws, tmp_path, content, mode, rule):
    env_file = tmp_path / "bad.env"
    env_file.write_text(content)
    env_file.chmod(mode)
    path = kxen_home.write_servers({"s": {"command": "x", "envFile": str(env_file)}})
    with pytest.raises(ConfigError) as info:
        load_config(kxen_home.path, ws)
    [problem] = info.value.problems
    assert problem.startswith(f"{path}: mcpServers.s.envFile: {env_file}: ") and rule in problem
    assert "not a line" not in problem


def test_env_file_paths_must_be_absolute_and_may_use_variables(kxen_home, ws, tmp_path, monkeypatch):
    (tmp_path / "v.env").write_text("K=from-file\n")
    monkeypatch.setenv("KXEN_T_DIR", str(tmp_path))
    kxen_home.write_servers({"s": {"command": "x", "envFile": "${KXEN_T_DIR}/v.env"}})
    assert load_config(kxen_home.path, ws).servers["s"].env == {"K": "from-file"}
    kxen_home.write_servers({"s": {"command": "x", "envFile": "v.env"}})
    with pytest.raises(ConfigError) as info:
        load_config(kxen_home.path, ws)
    assert "envFile: v.env: must be an absolute path" in info.value.problems[0]
    assert read_env_file(str(tmp_path / "v.env")) == {"K": "from-file"}


def test_project_entries_read_no_env_file_and_expand_no_command(kxen_home, ws):
    from kxen_core.config.trust import trust

    trust(kxen_home.path, ws)
    pfile = ws / ".kxen" / "mcp.json"
    pfile.parent.mkdir()
    pfile.write_text(json.dumps({"mcpServers": {"p": {"command": "${HOME}/x", "envFile": "/etc/hosts"}}}))
    problems = load_config(kxen_home.path, ws).project_problems
    assert any("mcpServers.p.command: project config must not reference host variables" in p for p in problems)
    assert any("mcpServers.p.envFile: project config must not read env files" in p for p in problems)


def test_home_in_command_and_args_of_a_user_entry(kx, kxen_home, ws, monkeypatch):
    monkeypatch.setenv("HOME", "/home/me")
    monkeypatch.setenv("KXEN_T_ARG_TOKEN", "arg-secret-0123456789")
    kxen_home.write_servers({"s": {"command": "${HOME}/bin/tool", "args": ["--token=${KXEN_T_ARG_TOKEN}", "x"]}})
    server = load_config(kxen_home.path, ws).servers["s"]
    assert (server.command, server.args) == ("/home/me/bin/tool", ["--token=arg-secret-0123456789", "x"])
    code, out, _ = kx("mcp", "get", "s", "--json")
    shown = json.loads(out)
    assert (shown["command"], shown["args"]) == ("${HOME}/bin/tool", ["--token=${KXEN_T_ARG_TOKEN}", "x"])
    code, out, _ = kx("mcp", "plan", "--json")
    assert "arg-secret-0123456789" not in out, "a secret a variable supplied is scrubbed"
    assert "/home/me/bin/tool" in out, "a home directory is not a secret"


# --- names and --from ------------------------------------------------------------------------------


def test_suggested_names():
    from kxen_core.config.imports import convert, suggested_name

    assert suggested_name("my server") == "my-server"
    assert suggested_name("github.com") == "github-com"
    assert suggested_name("a__b") == "a_b"
    assert suggested_name("...") is None
    assert len(suggested_name("x" * 40) or "") == 32
    items, _ = convert({"mcpServers": {"a b": {"command": "x"}, "a.b": {"command": "y"}}}, "claude-code")
    assert [(i.name, i.entry is not None) for i in items] == [("a-b", True), ("a-b", False)]
    assert items[1].reasons == ("another entry of the file has this name",)


def test_usual_places_per_platform(tmp_path):
    home, ws = Path("/h"), Path("/w")
    assert usual_places("claude-desktop", ws, home=home, environ={}, platform="linux") == [
        Path("/h/.config/Claude/claude_desktop_config.json")
    ]
    assert usual_places("claude-desktop", ws, home=home, environ={}, platform="darwin") == [
        Path("/h/Library/Application Support/Claude/claude_desktop_config.json")
    ]
    assert usual_places("claude-desktop", ws, home=home, environ={"APPDATA": "/ad"}, platform="win32") == [
        Path("/ad/Claude/claude_desktop_config.json")
    ]
    assert usual_places("claude-code", ws, home=home, environ={}) == [Path("/w/.mcp.json"), Path("/h/.claude.json")]
    assert usual_places("vscode", ws, home=home, environ={"XDG_CONFIG_HOME": "/x"}, platform="linux") == [
        Path("/w/.vscode/mcp.json"), Path("/x/Code/User/mcp.json"), Path("/x/Code/User/settings.json")
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("tool", "where", "fixture"),
    [
        ("claude-desktop", ".config/Claude/claude_desktop_config.json", "claude_desktop_config.json"),
        ("claude-code", "WS/.mcp.json", "claude_code.mcp.json"),
        ("cursor", ".cursor/mcp.json", "cursor.mcp.json"),
        ("vscode", "WS/.vscode/mcp.json", "vscode.mcp.json"),
        ("gemini", ".gemini/settings.json", "gemini/.gemini/settings.json"),
    ],
)
def test_from_tool_finds_the_file_at_its_usual_place(kx, kxen_home, ws, tmp_path, monkeypatch, tool, where, fixture):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    target = ws / where.removeprefix("WS/") if where.startswith("WS/") else home / where
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / fixture, target)
    code, data, err = run_import(kx, "--from", tool)
    assert data["file"] == str(target), err
    assert data["format"] == tool and data["servers"]


def test_from_tool_without_a_file_names_where_it_looked(kx, tmp_path, monkeypatch, ws):
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    code, out, err = kx("mcp", "import", "--from", "cursor")
    assert code == 2
    assert f"no cursor file found (looked at {ws / '.cursor' / 'mcp.json'}, " in err
    code, _, err = kx("mcp", "import")
    assert code == 2 and "give the FILE to import, or --from TOOL" in err


# --- against a real server -----------------------------------------------------------------------------


def test_an_imported_gemini_file_with_variables_and_an_env_file_runs(kx, kxen_home, ws, monkeypatch, everything_js):
    """The twin against server-everything: its get-env shows what the child got from Gemini's
    $VAR and from the env file -- scrubbed, since both are secrets."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    monkeypatch.setenv("KXEN_T_EVERYTHING", everything_js)
    monkeypatch.setenv("KXEN_T_GEMINI_SECRET", "gemini-secret-0123456789")
    env_file = ws / "ev.env"
    env_file.write_text("FROM_FILE=file-secret-0123456789\n")
    settings = ws / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"mcpServers": {"ev": {
        "command": node, "args": ["$KXEN_T_EVERYTHING", "stdio"], "env": {"FROM_GEMINI": "$KXEN_T_GEMINI_SECRET"},
        "timeout": 60000}}}))  # fmt: skip
    code, data, err = run_import(kx, str(settings), "--yes")
    assert code == 0 and data["written"], (data, err)
    entry = user_servers(kxen_home)["ev"]
    entry["envFile"] = str(env_file)  # as a VS Code file would give it
    entry["defaultToolPolicy"] = "allow"
    (kxen_home.path / "mcp.json").write_text(json.dumps({"mcpServers": {"ev": entry}}))
    os.chmod(kxen_home.path / "mcp.json", 0o600)
    code, out, err = kx("mcp", "call", "ev", "get-env", "--json", "--wait", str(WAIT))
    assert code == 0, out + err
    env = json.loads(json.loads(out)["content"][0]["text"])
    assert env["FROM_GEMINI"] == "***" and env["FROM_FILE"] == "***", "the child got both; the output scrubbed them"
    assert "0123456789" not in out + err

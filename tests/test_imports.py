"""``kxen mcp import FILE``: realistic files of other hosts, what is refused and why, writing only
with --yes, and an imported Claude Code ``.mcp.json`` that runs a real server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kxen_core.config import load_config
from kxen_core.config.imports import convert, detect, read_foreign, strip_jsonc

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "imports"
ROW_KEYS = {"name", "status", "entry", "reasons", "notes", "warnings"}
WAIT = 60


@pytest.fixture(autouse=True)
def kinds(kx, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory,stdio,http,sse")


def run_import(kx: Any, file: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = kx("mcp", "import", str(file), "--json", *extra)
    return code, json.loads(out), err


def rows(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    assert all(set(r) == ROW_KEYS for r in data["servers"])
    return {r["name"]: r for r in data["servers"]}


def user_servers(kxen_home: Any) -> dict[str, Any]:
    return json.loads((kxen_home.path / "mcp.json").read_text())["mcpServers"]


# --- each host's file -------------------------------------------------------------------------------


def test_claude_desktop(kx, kxen_home):
    file = FIXTURES / "claude_desktop_config.json"
    code, data, _ = run_import(kx, file)
    assert code == 0  # "my server" is imported under a valid name (issue 25), nothing is refused
    assert (data["format"], data["written"], data["scope"]) == ("claude-desktop", False, "user")
    assert data["target"] == str(kxen_home.path / "mcp.json")
    got = rows(data)
    assert {n: r["status"] for n, r in got.items()} == {
        "filesystem": "add",
        "github": "add",
        "sqlite": "add",
        "my-server": "add",
    }
    assert got["my-server"]["notes"] == [
        "'my server' is not a kxen server name (server names are 1-32 characters of A-Z a-z 0-9 _ -): imported as "
        "'my-server'"
    ]
    github = got["github"]["entry"]
    assert github["env"]["GITHUB_PERSONAL_ACCESS_TOKEN"].startswith("sha256:")  # never the token
    assert any("a secret in plain text" in n for n in got["github"]["notes"])
    assert not (kxen_home.path / "mcp.json").exists(), "nothing is written without --yes"

    code, data, _ = run_import(kx, file, "--yes")
    assert code == 0 and data["written"] is True
    original = json.loads(file.read_text())["mcpServers"]
    assert user_servers(kxen_home) == {
        **{n: original[n] for n in ("filesystem", "github", "sqlite")},
        "my-server": original["my server"],
    }
    assert set(load_config(kxen_home.path, kxen_home.path).servers) == {"filesystem", "github", "sqlite", "my-server"}
    # importing again changes nothing
    code, data, _ = run_import(kx, file, "--yes")
    assert {n: r["status"] for n, r in rows(data).items()}["github"] == "unchanged"


def test_claude_code_mcp_json(kx, kxen_home, monkeypatch):
    monkeypatch.setenv("API_KEY", "claude-code-api-key-123")
    monkeypatch.delenv("TENANT", raising=False)
    file = FIXTURES / "claude_code.mcp.json"
    monkeypatch.setenv("HOME", "/home/tester")
    code, data, _ = run_import(kx, file, "--yes")
    got = rows(data)
    assert data["format"] == "claude-code" and code == 0
    assert {n: r["status"] for n, r in got.items()} == {
        "everything": "add",
        "api": "add",
        "events": "add",
        "local-tool": "add",  # ${HOME} in command expands at load in user config (issue 25)
    }
    assert got["local-tool"]["entry"]["command"] == "${HOME}/bin/tool", "shown as written"
    assert got["api"]["entry"]["headers"] == {"Authorization": "Bearer ${API_KEY}"}  # as written, not the key
    assert "claude-code-api-key-123" not in json.dumps(data)
    assert user_servers(kxen_home) == {
        "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "env": {}},
        "api": {
            "transport": "http",
            "url": "https://api.example.com/mcp",
            "headers": {"Authorization": "Bearer ${API_KEY}"},
        },
        "events": {"transport": "sse", "url": "https://events.example.com/sse?tenant=${TENANT:-acme}"},
        "local-tool": {"command": "${HOME}/bin/tool", "args": ["--port", "8080"]},
    }
    assert load_config(kxen_home.path, kxen_home.path).servers["local-tool"].command == "/home/tester/bin/tool"


def test_cursor(kx, kxen_home, ws, monkeypatch):
    monkeypatch.setenv("PG_PASSWORD", "pg-password-value")
    code, data, _ = run_import(kx, FIXTURES / "cursor.mcp.json", "--from", "cursor")
    got = rows(data)
    assert {n: r["status"] for n, r in got.items()} == {"postgres": "add", "linear": "add", "with-envfile": "refused"}
    # envFile is read at load (issue 25): the workspace's .env, which is not there yet
    assert got["with-envfile"]["reasons"] == [
        f"mcpServers.with-envfile.envFile: {ws / '.env'}: cannot be read: no such file"
    ]
    (ws / ".env").write_text("# the app's secrets\nAPP_TOKEN='tok-from-env-file-123'\n")
    code, data, _ = run_import(kx, FIXTURES / "cursor.mcp.json", "--from", "cursor", "--yes")
    got = rows(data)
    assert code == 0 and got["with-envfile"]["status"] == "add"
    assert got["with-envfile"]["entry"]["env"] == {"APP_TOKEN": "(from envFile)"}
    assert "tok-from-env-file" not in json.dumps(data)
    assert user_servers(kxen_home)["with-envfile"]["envFile"] == str(ws / ".env")
    assert "${env:PG_PASSWORD} is written ${PG_PASSWORD} for kxen" in got["postgres"]["notes"][0]
    assert user_servers(kxen_home)["postgres"]["env"] == {"PGPASSWORD": "${PG_PASSWORD}"}
    assert "pg-password-value" not in json.dumps(data)


def test_cursor_with_the_variable_unset_is_imported_with_a_warning(kx, kxen_home, monkeypatch):
    monkeypatch.delenv("PG_PASSWORD", raising=False)
    code, data, _ = run_import(kx, FIXTURES / "cursor.mcp.json", "--from", "cursor")
    assert code == 1  # with-envfile is still refused
    postgres = rows(data)["postgres"]
    assert postgres["status"] == "add" and postgres["reasons"] == []
    assert postgres["warnings"] == [
        "server 'postgres': ${PG_PASSWORD} not set in the environment yet (env.PGPASSWORD): the server fails "
        "(phase config) until it is set where kxen runs"
    ]


def test_vscode_with_comments_inputs_and_workspace_variables(kx, kxen_home):
    code, data, _ = run_import(kx, FIXTURES / "vscode.mcp.json", "--yes")
    got = rows(data)
    assert data["format"] == "vscode" and code == 1
    assert {n: r["status"] for n, r in got.items()} == {
        "fetch": "add", "perplexity": "refused", "github-remote": "add", "workspace-script": "add",
    }  # fmt: skip
    assert data["notes"] and data["notes"][0].startswith("inputs: not imported")
    assert got["perplexity"]["reasons"] == [
        "env.PERPLEXITY_API_KEY: ${input:perplexity-key}: VS Code input variables are not supported (kxen does not "
        "prompt for values): set the value with --env (kxen mcp add NAME --env KEY=VALUE -- COMMAND), or write "
        "${NAME} and set NAME in your environment"
    ]
    # ${workspaceFolder}: the workspace a stdio server starts in (issue 25)
    assert user_servers(kxen_home)["workspace-script"] == {"command": "python3", "args": ["./server.py"]}
    assert any("${workspaceFolder} is written '.'" in n for n in got["workspace-script"]["notes"])
    # comment markers inside strings are text, not comments
    assert user_servers(kxen_home)["github-remote"]["headers"] == {"X-Note": "a // not a comment, and /* neither */"}


def test_gemini(kx, kxen_home, monkeypatch):
    monkeypatch.setenv("STREAM_TOKEN", "gemini-stream-token")
    code, data, _ = run_import(kx, FIXTURES / "gemini" / ".gemini" / "settings.json", "--yes")
    got = rows(data)
    assert data["format"] == "gemini" and code == 0
    assert all(r["status"] == "add" for r in got.values())
    written = user_servers(kxen_home)
    assert written["streamer"] == {
        "url": "https://stream.example.com/mcp", "transport": "http",
        "headers": {"Authorization": "Bearer ${STREAM_TOKEN}"}, "timeouts": {"requestSeconds": 5.0},
    }  # fmt: skip
    assert written["legacy-sse"] == {"url": "https://legacy.example.com/sse", "transport": "sse"}
    # excludeTools become deny policies, includeTools the only tools (each asking, every other one
    # denied); nothing an imported file says is ever turned into "allow"
    assert written["py"]["toolPolicies"] == {"get_forecast": "ask", "delete_forecast": "deny"}
    assert written["py"]["defaultToolPolicy"] == "deny"
    assert any(n.startswith("trust: not imported") for n in got["streamer"]["notes"])
    assert any(n.startswith("includeTools: only these tools") for n in got["py"]["notes"])


def test_into_project_scope_the_project_rules_apply(kx, ws, monkeypatch):
    monkeypatch.setenv("API_KEY", "k-123456789")
    code, data, _ = run_import(kx, FIXTURES / "claude_code.mcp.json", "--scope", "project", "--yes")
    got = rows(data)
    assert got["everything"]["status"] == "add"
    assert any("project config must not reference host variables" in r for r in got["api"]["reasons"])
    assert any("project config must not reference host variables" in r for r in got["events"]["reasons"])
    assert list(json.loads((ws / ".kxen" / "mcp.json").read_text())["mcpServers"]) == ["everything"]


def test_a_name_already_configured_differently_is_refused(kx, kxen_home):
    kxen_home.write_servers({"sqlite": {"command": "something-else"}})
    (kxen_home.path / "mcp.json").chmod(0o600)
    code, data, _ = run_import(kx, FIXTURES / "claude_desktop_config.json", "--yes")
    reason = rows(data)["sqlite"]["reasons"][0]
    assert "already has a server of this name (kxen mcp remove sqlite first)" in reason
    assert user_servers(kxen_home)["sqlite"] == {"command": "something-else"}


def test_human_output_and_no_write_without_yes(kx, kxen_home):
    code, out, err = kx("mcp", "import", str(FIXTURES / "claude_desktop_config.json"))
    assert code == 0
    assert "+ github: stdio: npx -y @modelcontextprotocol/server-github" in out
    assert "+ my-server: stdio: node /Users/me/server.js" in out and "note: 'my server' is not a kxen server" in out
    assert "nothing written: run again with --yes" in out
    assert "ghp_fixtureTokenValue" not in out + err
    assert not (kxen_home.path / "mcp.json").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{nope", "cannot be imported: not valid JSON"),
        ('{"other": {}}', "cannot be imported: no 'mcpServers' object"),
        ("[1, 2]", "cannot be imported: no 'mcpServers' object"),
    ],
)
def test_unreadable_foreign_files(kx, kxen_home, tmp_path, content, message):
    file = tmp_path / "x.json"
    file.write_text(content)
    code, out, err = kx("mcp", "import", str(file))
    assert code == 2 and message in err
    assert not (kxen_home.path / "mcp.json").exists()


def test_a_fifo_is_refused_not_waited_on(kx, tmp_path):
    import os

    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    code, _, err = kx("mcp", "import", str(fifo))
    assert code == 2 and "must be a regular file (it is a FIFO)" in err


# --- the format's pieces ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "data", "fmt"),
    [
        ("/x/claude_desktop_config.json", {"mcpServers": {}}, "claude-desktop"),
        ("/x/.mcp.json", {"mcpServers": {"a": {"type": "stdio"}}}, "claude-code"),
        ("/x/.cursor/mcp.json", {"mcpServers": {}}, "cursor"),
        ("/x/.vscode/mcp.json", {"servers": {}}, "vscode"),
        ("/x/settings.json", {"mcp": {"servers": {}}}, "vscode"),
        ("/x/.gemini/settings.json", {"mcpServers": {}}, "gemini"),
        ("/x/any.json", {"mcpServers": {"a": {"httpUrl": "https://x"}}}, "gemini"),
    ],
)
def test_detect(path, data, fmt):
    assert detect(Path(path), data) == fmt


def test_other_hosts_allow_lists_never_become_allow():
    [item], _ = convert(
        {"mcpServers": {"a": {"command": "x", "autoApprove": ["rm"], "alwaysAllow": ["rm"], "trust": True}}},
        "claude-code",
    )
    assert item.entry == {"command": "x"}
    assert len(item.notes) == 3


def test_unknown_keys_and_types_refuse_the_entry():
    [a, b], _ = convert(
        {"mcpServers": {"a": {"command": "x", "weird": 1}, "b": {"type": "ws", "url": "wss://x"}}}, "claude-code"
    )
    assert a.entry is None and a.reasons == ("'weird': no kxen equivalent for this key",)
    assert b.entry is None and b.reasons == ("type 'ws': no kxen transport for it (stdio, http, sse)",)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab/*,"\\ \n{}[]'),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(alphabet="ab/*,", max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(_json)
def test_strip_jsonc_keeps_plain_json_as_it_is(value):
    text = json.dumps(value)
    assert json.loads(strip_jsonc(text)) == value


def noisy(value: Any) -> str:
    """JSON with a comment around every token and a trailing comma after every element."""
    if isinstance(value, list):
        return "[ /* [ */" + "".join(noisy(v) + ", // a, ] comment\n" for v in value) + "]"
    if isinstance(value, dict):
        return "{" + "".join(json.dumps(k) + " /* : */ : " + noisy(v) + ",\n" for k, v in value.items()) + "}"
    return json.dumps(value)


@settings(max_examples=200, deadline=None)
@given(_json)
def test_strip_jsonc_drops_comments_and_trailing_commas(value):
    assert json.loads(strip_jsonc(noisy(value))) == value


def test_strip_jsonc_is_linear_on_hostile_input():
    text = "/*" + " , " * 200_000  # an unclosed comment after a long run of commas
    with pytest.raises(ValueError):
        strip_jsonc(text)
    assert strip_jsonc('"' + "," * 300_000).startswith('"')  # an unclosed string: kept, never rescanned


def test_read_foreign_bounds(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (4 * 1024 * 1024 + 1))
    with pytest.raises(ValueError, match="larger than"):
        read_foreign(big)


# --- a real server: a Claude Code .mcp.json in one command -----------------------------------------


def test_a_claude_code_mcp_json_imports_in_one_command_and_runs(
    kx, kxen_home, ws, monkeypatch, everything_js, tmp_path
):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    file = tmp_path / ".mcp.json"
    file.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "everything": {"type": "stdio", "command": node, "args": [everything_js, "stdio"], "env": {}}
                }
            }
        )
    )
    code, out, err = kx("mcp", "import", str(file), "--yes")
    assert code == 0, err
    assert "wrote 1 server(s)" in out
    code, out, err = kx("mcp", "tools", "everything", "--json", "--wait", str(WAIT))
    assert code == 0, err
    names = {t["name"] for t in json.loads(out)["tools"]}
    assert {"echo", "get-sum"} <= names


def test_the_loader_stays_strict_and_names_the_kxen_key(kxen_home, tmp_path):
    from config_support import problems_of

    ws = tmp_path / "w"
    ws.mkdir()
    path = kxen_home.write_servers({"a": {"type": "stdio", "command": "x"}, "b": {"httpUrl": "https://x.example/mcp"}})
    problems = problems_of(kxen_home.path, ws)
    assert (
        f"{path}: mcpServers.a: unknown key(s): type (did you mean 'transport'? kxen mcp import converts other "
        "hosts' files)" in problems
    )
    assert (
        f"{path}: mcpServers.b: unknown key(s): httpUrl (did you mean 'url'? kxen mcp import converts other hosts' "
        "files)" in problems
    )
    path.write_text(json.dumps({"servers": {}}))
    [problem] = problems_of(kxen_home.path, ws)
    assert (
        problem
        == f"{path}: (top level): unknown key(s): servers (did you mean 'mcpServers'? kxen mcp import converts other "
        "hosts' files)"
    )

"""No traceback from any config content or CLI argument.

A repository's project file is read before the workspace is trusted, so ``kxen mcp approvals``,
``mcp status`` and ``config check`` must survive whatever it holds: a ``cwd`` that is a symlink loop
or holds a NUL byte is that server's error; a lone surrogate (``"\\ud800"``) anywhere -- a value, a
key, a server name, plugin options -- is a config problem naming its key path; and ``--args``
nested 20,000 deep or holding undecodable text is a usage error (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kxen_core.cli import command as cli
from kxen_core.config.trust import trust

COMMANDS = [
    ["mcp", "approvals"],
    ["mcp", "approvals", "--json"],
    ["config", "check"],
    ["config", "check", "--json"],
    ["mcp", "status", "--json", "--wait", "5"],
    ["mcp", "status", "--wait", "5"],
]


def run(kxen_home, ws: Path, capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(["--home", str(kxen_home.path), "--workspace", str(ws), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def write_raw_project(ws: Path, text: str) -> Path:
    (ws / ".kxen").mkdir(exist_ok=True)
    path = ws / ".kxen" / "mcp.json"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _only_memory(monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory,stdio")
    monkeypatch.delenv("KXEN_DISABLE_PLUGINS", raising=False)


@pytest.mark.parametrize("argv", COMMANDS)
@pytest.mark.parametrize("cwd", ["loop", "x\u0000y", "deeper/loop"])
def test_a_project_cwd_that_cannot_be_resolved_is_the_servers_error(kxen_home, ws, capsys, argv, cwd):
    (ws / "loop").symlink_to("loop")
    (ws / "deeper").mkdir()
    (ws / "deeper" / "loop").symlink_to("../deeper/loop")
    write_raw_project(ws, json.dumps({"mcpServers": {"p": {"command": "python3", "cwd": cwd}}}))
    trust(kxen_home.path, ws)  # a repository the user trusted: its file is read whole
    code, out, err = run(kxen_home, ws, capsys, *argv)
    assert code in (0, 1, 2) and "Traceback" not in err
    if argv[:2] == ["mcp", "approvals"] and "\u0000" in cwd:
        # a NUL byte is refused by the project cwd rule already: the file is rejected, naming the key
        shown = out if "--json" in argv else err  # the problems: in the JSON, or on stderr
        assert "mcpServers.p.cwd" in shown and "cwd cannot be resolved" not in out, (out, err)
    elif argv[:2] == ["mcp", "approvals"]:
        assert "cwd cannot be resolved" in out, out
    if "--json" in argv:
        json.loads(out)


# a lone surrogate placed in every kind of string a project file holds
SURROGATES: dict[str, tuple[dict[str, Any], str]] = {
    "args": ({"p": {"command": "python3", "args": ["ok", "\ud800"]}}, "mcpServers.p.args[1]"),
    "command": ({"p": {"command": "py\udfff"}}, "mcpServers.p.command"),
    "cwd": ({"p": {"command": "python3", "cwd": "\udc80"}}, "mcpServers.p.cwd"),
    "env value": ({"p": {"command": "python3", "env": {"A": "\ud800"}}}, "mcpServers.p.env.A"),
    "env key": ({"p": {"command": "python3", "env": {"A\ud800": "v"}}}, "mcpServers.p.env.A\\ud800"),
    "server name": ({"p\ud800": {"command": "python3"}}, "mcpServers.p\\ud800"),
    "options": ({"p": {"transport": "memory", "options": {"server": "\ud800"}}}, "mcpServers.p.options.server"),
    "tool policy key": (
        {"p": {"command": "x", "toolPolicies": {"t\ud800": "deny"}}},
        "mcpServers.p.toolPolicies.t\\ud800",
    ),
    "unknown key": ({"p": {"command": "x", "\ud800": 1}}, "mcpServers.p.\\ud800"),
}


@pytest.mark.parametrize("argv", COMMANDS)
@pytest.mark.parametrize("where", sorted(SURROGATES))
def test_a_lone_surrogate_anywhere_in_the_project_file_is_a_problem_with_its_key_path(
    kxen_home, ws, capsys, argv, where
):
    servers, path = SURROGATES[where]
    pfile = write_raw_project(ws, json.dumps({"mcpServers": servers}))  # ensure_ascii: "\ud800" escapes
    code, out, err = run(kxen_home, ws, capsys, *argv)
    assert "Traceback" not in err
    out.encode("utf-8"), err.encode("utf-8")  # everything printed is valid UTF-8
    expected = f"{pfile}: {path}: must be valid Unicode text (it holds a lone surrogate)"
    if "--json" in argv:
        # --json problems are {file, path, rule} objects: the same text, split
        assert expected in [f"{p['file']}: {p['path']}: {p['rule']}" for p in json.loads(out)["problems"]], out
    else:
        assert expected in err, err
    if argv[:2] == ["config", "check"]:
        assert code == 2


def test_a_lone_surrogate_in_user_config_fails_closed_naming_it(kxen_home, ws, capsys):
    (kxen_home.path / "mcp.json").write_text(json.dumps({"mcpServers": {"u": {"command": "x", "args": ["\ud800"]}}}))
    code, out, err = run(kxen_home, ws, capsys, "config", "check", "--json")
    assert code == 2
    assert json.loads(out)["problems"] == [
        {"file": str(kxen_home.path / "mcp.json"), "path": "mcpServers.u.args[0]",
         "rule": "must be valid Unicode text (it holds a lone surrogate)"}
    ]  # fmt: skip


@pytest.mark.parametrize(
    "value, message",
    [
        ("[" * 20_000 + "]" * 20_000, "--args is not valid JSON: nested too deeply"),
        ('{"a":' * 20_000 + "1" + "}" * 20_000, "--args is not valid JSON: nested too deeply"),
        ('{"a": "\\ud800"}', "--args: a: must be valid Unicode text (it holds a lone surrogate)"),
        (
            '{"a": "\udcff"}',
            "--args: a: must be valid Unicode text (it holds a lone surrogate)",
        ),  # undecodable argv byte
        ('{"a\\udc00": 1}', "--args: a\\udc00: must be valid Unicode text (it holds a lone surrogate)"),
        ('{"n": ' + "9" * 10_000 + "}", "--args is not valid JSON: "),
        ("[1]", "--args must be a JSON object"),
        ('{"a": "\x1b[31m', "--args is not valid JSON: "),
    ],
)
def test_odd_call_args_are_a_usage_error(kxen_home, ws, capsys, value, message):
    code, out, err = run(kxen_home, ws, capsys, "mcp", "call", "srv", "tool", "--args", value)
    assert code == 2, err
    assert err.startswith(f"kxen: error: {message}"), err
    assert "Traceback" not in err and "\x1b" not in err
    err.encode("utf-8")


@pytest.mark.parametrize(
    "argv",
    [
        ["--workspace", "{loop}", "mcp", "approvals"],
        ["--workspace", "{loop}", "mcp", "status"],
        ["--workspace", "a\x00b", "config", "check"],
        ["--home", "{loop}", "config", "check"],
        ["--home", "h\x00me", "mcp", "approvals"],
        ["trust", "{loop}"],
        ["untrust", "x\x00y"],
        ["mcp", "status", "--wait", "nan"],
        ["mcp", "status", "--wait", "-1"],
        ["mcp", "tools", "--wait", "inf"],
        ["mcp", "call", "s", "t", "--timeout", "nan"],
        ["mcp", "call", "s", "t", "--timeout", "1e400"],
    ],
)
def test_odd_cli_arguments_are_usage_errors(kxen_home, tmp_path, capsys, argv):
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    argv = [a.replace("{loop}", str(loop)) for a in argv]
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "error: argument" in err and "\x00" not in err

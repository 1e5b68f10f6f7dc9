"""What every kxen command shares: global options anywhere on the line, --version, an explicit
--home that must exist, and logging (-v, --log-file, KXEN_TRACE_PLUGINS=1) that is escaped and
scrubbed like everything kxen prints."""

from __future__ import annotations

import json
import logging

import pytest
from kxen_testing import mem, text_result

from kxen_core import __version__
from kxen_core.cli import command as cli
from kxen_core.cli.setup import hoist_globals


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse: --version, usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["mcp", "status", "--home", "H"], ["--home", "H", "mcp", "status"]),
        (["mcp", "status", "--home=H", "--json"], ["--home=H", "mcp", "status", "--json"]),
        (
            ["mcp", "call", "s", "t", "--approve", "a", "--role", "r", "-v"],
            ["--approve", "a", "--role", "r", "-v", "mcp", "call", "s", "t"],
        ),
        (["--approve", "a", "mcp", "tools", "--approve", "b"], ["--approve", "a", "--approve", "b", "mcp", "tools"]),
        (
            ["mcp", "add", "x", "--", "cmd", "--home", "y"],
            ["mcp", "add", "x", "--", "cmd", "--home", "y"],
        ),  # after --: the server's own
        (["mcp", "status", "--home"], ["mcp", "status", "--home"]),  # no value: argparse says so
        (["mcp", "add", "srv", "node", "-v", "--home", "x"], ["mcp", "add", "srv", "node", "-v", "--home", "x"]),
        (
            ["mcp", "add", "--home", "H", "srv", "--env", "A=1", "npx", "-v"],
            ["--home", "H", "mcp", "add", "srv", "--env", "A=1", "npx", "-v"],
        ),
    ],
)
def test_global_options_are_moved_before_the_command(argv, expected):
    assert hoist_globals(argv) == expected


def test_global_options_work_after_the_command(kxen_home, ws, capsys, monkeypatch, fakes):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory")
    fakes.add("f", tools={"echo": lambda a: text_result("hi")})
    kxen_home.write_servers({"m": mem("f")})
    code, out, err = run(
        capsys, "mcp", "status", "--json", "--wait", "10", "--home", str(kxen_home.path), "--workspace", str(ws)
    )
    assert code == 0, err
    assert [s["name"] for s in json.loads(out)["servers"]] == ["m"]


def test_version(capsys):
    code, out, err = run(capsys, "--version")
    assert code == 0 and out.startswith(f"kxen {__version__} (Python 3.")


@pytest.mark.parametrize("where", ["before", "after"])
def test_an_explicit_home_that_does_not_exist_is_a_usage_error(tmp_path, capsys, where):
    missing = str(tmp_path / "typo")
    argv = ["--home", missing, "mcp", "status"] if where == "before" else ["mcp", "status", "--home", missing]
    code, out, err = run(capsys, *argv)
    assert code == 2 and "not an existing directory" in err and out == ""


@pytest.mark.parametrize("how", ["-vv", "KXEN_TRACE_PLUGINS=1"])
def test_plugin_calls_are_logged_with_vv_or_the_trace_variable(kxen_home, ws, capsys, monkeypatch, fakes, how):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory")
    fakes.add("f", tools={"echo": lambda a: text_result("hi")})
    kxen_home.write_servers({"m": mem("f")})
    flags = ["-vv"] if how == "-vv" else []
    if how != "-vv":
        monkeypatch.setenv("KXEN_TRACE_PLUGINS", "1")
    code, out, err = run(
        capsys, "--home", str(kxen_home.path), "--workspace", str(ws), *flags, "mcp", "status", "--wait", "10"
    )
    assert code == 0
    assert "kxen.hooks DEBUG kxen_transport_closed(reason, server)" in err and "kxen_catalog_page <- " in err


def test_log_lines_are_escaped_and_scrubbed(kxen_home, tmp_path, capsys):
    from kxen_core.cli import output as cli_output
    from kxen_core.cli.setup import configure_logging, reset_logging
    from kxen_core.config import load_config

    secret = "sk-live-0123456789abcdef"
    kxen_home.write_servers({"m": {"url": "https://x.example/mcp", "headers": {"Authorization": f"Bearer {secret}"}}})
    log_file = tmp_path / "kxen.log"
    try:
        cli_output.use_config(load_config(kxen_home.path, tmp_path))
        assert configure_logging(1, log_file) is None
        logging.getLogger("kxen.server").info("m said: \x1b]8;;http://127.0.0.1/\x07click %s", secret)
    finally:
        reset_logging()
        cli_output.reset()
    err = capsys.readouterr().err
    text = log_file.read_text()
    for shown in (err, text):
        assert "m said:" in shown and "\x1b" not in shown and "\\x1b]8" in shown
        assert secret not in shown
    assert not logging.getLogger("kxen").handlers  # nothing left behind for the next caller


def test_a_log_file_that_cannot_be_opened_is_a_warning(kxen_home, ws, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory")
    code, out, err = run(
        capsys,
        "--home",
        str(kxen_home.path),
        "--workspace",
        str(ws),
        "--log-file",
        str(tmp_path / "no" / "such" / "f.log"),
        "mcp",
        "status",
        "--wait",
        "1",
    )
    assert code == 0 and "warning: --log-file" in err and "cannot be opened" in err

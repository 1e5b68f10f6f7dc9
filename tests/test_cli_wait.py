"""Waiting for servers is never silent: a server still loading is named on stderr (a spinner on a
terminal, lines elsewhere), and the wait ends at its bound whatever the server does."""

from __future__ import annotations

import json
import sys

import anyio
import pytest

from kxen_core.cli import command as cli
from kxen_core.cli import wait as cli_wait
from kxen_core.runtime.workspace import Runtime

pytestmark = pytest.mark.anyio

#: a process that runs and reads its stdin but never answers initialize
SILENT = [sys.executable, "-c", "import sys\nfor line in sys.stdin: pass"]


def _silent_home(kxen_home):
    kxen_home.write_servers({"mute": {"command": SILENT[0], "args": SILENT[1:], "timeouts": {"initializeSeconds": 30}}})


def test_a_server_still_loading_is_named_on_stderr(kxen_home, ws, capsys, monkeypatch):
    monkeypatch.setattr(cli_wait, "FIRST_NOTICE", 0.2)
    monkeypatch.setattr(cli_wait, "NOTICE_EVERY", 0.5)
    _silent_home(kxen_home)
    code = cli.main(["--home", str(kxen_home.path), "--workspace", str(ws), "mcp", "status", "--json", "--wait", "1.5"])
    out, err = capsys.readouterr()
    assert code == 0  # still initializing is not a failure
    assert "still waiting after 0 s for: mute (initializing)" in err
    assert err.count("still waiting") in (2, 3)  # 0.2 s, then every 0.5 s, until the 1.5 s bound
    row = json.loads(out)["servers"][0]  # stdout is only the JSON
    assert row["state"] == "initializing"


@pytest.mark.parametrize("tty", [True, False])
async def test_the_wait_ends_at_its_bound_and_when_all_settled(kxen_home, ws, tty, monkeypatch):
    monkeypatch.setattr(cli_wait, "FIRST_NOTICE", 0.1)
    _silent_home(kxen_home)
    async with Runtime(workspace=ws) as rt:
        with anyio.fail_after(10):
            assert await cli_wait.wait_visibly(rt, 0.5, tty=tty) is False
            assert cli_wait.loading(rt) == ["mute (initializing)"]
            await rt.stop_server("mute")
            assert await cli_wait.wait_visibly(rt, 5, tty=tty) is True
            assert cli_wait.loading(rt) == []


def test_a_silent_server_fails_after_its_one_budget_and_says_so(kxen_home, ws, capsys):
    """A real process that never answers: the era probe and initialize share ``initializeSeconds``
    (the virtual-clock twin that checks the elapsed time exactly: tests/session/test_start_budget.py),
    and ``kxen mcp status`` names that budget, not initialize's share of it."""
    entry = {"command": SILENT[0], "args": SILENT[1:], "timeouts": {"initializeSeconds": 1}}
    kxen_home.write_servers({"mute": entry})
    code = cli.main(["--home", str(kxen_home.path), "--workspace", str(ws), "mcp", "status", "--json", "--wait", "30"])
    out, _ = capsys.readouterr()
    row = json.loads(out)["servers"][0]
    assert (row["state"], row["phase"]) == ("failed", "initialize"), row
    assert (
        "server/discover, then initialize: no reply from server 'mute' within 1 s "
        "(the start's one budget, timeouts.initializeSeconds)" in row["error"]
    ), row["error"]
    assert code != 0

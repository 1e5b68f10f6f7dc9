"""Waiting for servers is never silent: a server still loading is named on stderr (a spinner on a
terminal, lines elsewhere), and the wait ends at its bound whatever the server does."""

from __future__ import annotations

import json
import sys

import anyio
import pytest
from support import DEMO

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


# --- a terminal approval prompt while the spinner runs ----------------------------------------------


async def test_a_server_being_approved_is_counted_while_it_waits(kxen_home, ws):
    """A server whose launch a channel is being asked about has not settled: the spinner counts it,
    and the approvals say a prompt is open (the spinner stops for it)."""
    from kxen_testing import Channel

    from kxen_core import hookimpl
    from kxen_core.config.trust import trust
    from kxen_core.plugins.manager import make_plugin_manager

    answer = anyio.Event()
    asked = anyio.Event()

    class Blocking(Channel):
        @hookimpl
        async def kxen_approval_prompt(self, request):
            asked.set()
            await answer.wait()
            return await super().kxen_approval_prompt(request)

    seen: list[bool] = []
    (ws / ".kxen").mkdir()
    (ws / ".kxen" / "mcp.json").write_text(json.dumps({"mcpServers": {"p": {"command": "sh", "args": ["-c", ":"]}}}))
    trust(kxen_home.path, ws)
    pm = make_plugin_manager(allow=["stdio"], extra=[Blocking(approved=False)])
    async with Runtime(home=kxen_home.path, workspace=ws, pm=pm) as rt:
        rt.approvals.prompt_listeners.append(seen.append)
        with anyio.fail_after(10):
            await asked.wait()
            assert cli_wait.loading(rt) == ["p (awaiting_approval)"] and rt.approvals.prompting == 1
            answer.set()
            assert await rt.wait_ready(10)
        assert cli_wait.loading(rt) == [] and rt.approvals.prompting == 0
    assert seen and seen[-1] is False and seen.count(False) == 1  # the prompt's end was told, once


def test_the_spinner_never_draws_over_the_terminal_prompt(kxen_home, ws):
    """``kxen mcp status`` on a real terminal (a pty) with a project server to approve: the
    approval prompt of kxen-approval-tty stays as it was written until it is answered, and the
    spinner never says "starting 0 server(s)"."""
    import os
    import pty
    import select
    import subprocess
    import time

    from kxen_core.config.trust import trust

    (ws / ".kxen").mkdir()
    (ws / ".kxen" / "mcp.json").write_text(json.dumps({"mcpServers": {"p": {"command": "sh", "args": ["-c", ":"]}}}))
    trust(kxen_home.path, ws)
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "200", "LINES": "50"}
    env.pop("KXEN_LOAD_PLUGINS", None)
    argv = [sys.executable, "-m", "kxen_core.cli", "--home", str(kxen_home.path), "--workspace", str(ws)]
    proc = subprocess.Popen(
        [*argv, "mcp", "status", "--wait", "30"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    seen = b""

    def read_for(seconds: float, until: bytes | None = None) -> None:
        nonlocal seen
        end = time.monotonic() + seconds
        while time.monotonic() < end and not (until and until in seen):
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    return
                if not chunk:
                    return
                seen += chunk

    try:
        read_for(60, until=b"Approve? [y/N] ")
        assert b"Approve? [y/N] " in seen, seen[-2000:]
        at_prompt = len(seen)
        read_for(1.0)  # the spinner redraws ten times a second: a second gives it every chance
        after_prompt = seen[at_prompt:]
        os.write(master, b"n\n")
        read_for(60, until=b"awaiting_approval")
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        os.close(master)
    assert after_prompt == b"", f"something drew over the prompt: {after_prompt!r}"
    assert b"starting 0 server(s)" not in seen, seen[-2000:]
    assert b"awaiting_approval" in seen and proc.returncode == 0, seen[-2000:]


def test_a_server_slow_to_come_up_starts_within_its_startup_budget(kxen_home, ws, capsys):
    """A real process that says nothing for 2.5 s (a package runner installing), then runs the demo
    server: past its 1 s ``initializeSeconds``, within ``startupSeconds``, it starts and lists."""
    wrapper = f"import os, sys, time\ntime.sleep(2.5)\nos.execv(sys.executable, [sys.executable, {str(DEMO)!r}])"
    entry = {
        "command": sys.executable,
        "args": ["-c", wrapper],
        "timeouts": {"initializeSeconds": 1, "startupSeconds": 30},
    }
    kxen_home.write_servers({"late": entry})
    code = cli.main(["--home", str(kxen_home.path), "--workspace", str(ws), "mcp", "status", "--json", "--wait", "60"])
    out, _ = capsys.readouterr()
    row = json.loads(out)["servers"][0]
    assert (row["state"], row["error"]) == ("ready", None), row
    assert row["tools"] > 0 and code == 0


def test_a_silent_server_fails_after_its_startup_budget_and_says_so(kxen_home, ws, capsys):
    """A real process that never answers anything: the era probe and initialize end together when
    ``startupSeconds`` runs out (the virtual-clock twin that checks the elapsed time exactly:
    tests/session/test_start_budget.py), and ``kxen mcp status`` names that budget."""
    entry = {"command": SILENT[0], "args": SILENT[1:], "timeouts": {"startupSeconds": 1}}
    kxen_home.write_servers({"mute": entry})
    code = cli.main(["--home", str(kxen_home.path), "--workspace", str(ws), "mcp", "status", "--json", "--wait", "30"])
    out, _ = capsys.readouterr()
    row = json.loads(out)["servers"][0]
    assert (row["state"], row["phase"]) == ("failed", "initialize"), row
    assert (
        "server/discover, then initialize: no reply from server 'mute' within 1 s of its start "
        "(timeouts.startupSeconds: it never answered; a first install counts)" in row["error"]
    ), row["error"]
    assert code != 0

"""A signal to the ``kxen`` command closes every server like Ctrl-C does: no process survives.

Each test runs ``kxen mcp call`` (through a small runner that carries this run's owner mark, on
asyncio and on trio) against a helper server whose call spawns a marked sleeper and never answers;
then it signals kxen and checks the exit code and that no marked process is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from stdio_support import OWNER, alive, helper, owned_helpers

#: runs the kxen CLI: argv is OWNER (the mark), the anyio backend, then kxen's own arguments
RUNNER = """
import sys, anyio
from kxen_core.cli import command as cli
backend, argv = sys.argv[2], sys.argv[3:]
if backend == "asyncio":
    sys.exit(cli.main(argv))
sys.exit(anyio.run(cli._mcp_until_signal, cli._parser().parse_args(argv), backend=backend))
"""


def write_home(tmp_path: Path, **servers: dict) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return home


def start_kxen(tmp_path: Path, home: Path, backend: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, KXEN_LOAD_PLUGINS="stdio")
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    argv = [sys.executable, "-c", RUNNER, OWNER, backend, "--home", str(home), "--workspace", str(ws), *args]
    return subprocess.Popen(argv, cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def hanging_call(tmp_path: Path, **extra: object) -> str:
    """``--args`` of a spawn_marked call that never answers and writes its sleeper's pid to a file."""
    return json.dumps({"mode": "child", "hang": True, "pidfile": str(tmp_path / "sleeper.pid"), **extra})


def server_and_sleeper(tmp_path: Path, proc: subprocess.Popen, before: set[int]) -> list[int]:
    """Once the sleeper runs: the pids of the server and the sleeper (never the kxen runner)."""
    pidfile = tmp_path / "sleeper.pid"
    assert wait_for(pidfile.exists, 60), (proc.poll(), proc.poll() is not None and proc.stderr.read()[-2000:])
    sleeper = int(pidfile.read_text())
    found = sorted(set(owned_helpers()) - before - {proc.pid})
    assert sleeper in found and len(found) == 2, (sleeper, found)
    return found


def wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def finish(proc: subprocess.Popen, seconds: float = 30) -> tuple[int | None, bytes]:
    try:
        _out, err = proc.communicate(timeout=seconds)
        return proc.returncode, err
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, err = proc.communicate(timeout=10)
        return None, err


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1])
@pytest.mark.parametrize("ignore_term", [False, True])
def test_a_signal_to_kxen_closes_every_server_and_exits_128_plus_signal(tmp_path, backend, signum, ignore_term):
    home = write_home(tmp_path, h=helper())
    call = hanging_call(tmp_path, ignore_term=ignore_term)
    before = set(owned_helpers())
    proc = start_kxen(tmp_path, home, backend, "mcp", "call", "h", "spawn_marked", "--args", call, "--wait", "30")
    try:
        # the server and its sleeper (a grandchild of kxen) are running, and the call hangs
        procs = server_and_sleeper(tmp_path, proc, before)
        os.kill(proc.pid, signum)
        code, err = finish(proc)
        assert code == 128 + signum, err.decode(errors="replace")[-2000:]
        # the close is over before kxen exits: nothing of the server's group is left
        assert [p for p in procs if alive(p)] == []
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


def test_a_repeated_signal_does_not_cut_the_close_short(tmp_path):
    # the sleeper ignores SIGTERM, so the close takes its grace period; signals keep coming meanwhile
    home = write_home(tmp_path, h=helper())
    call = hanging_call(tmp_path, ignore_term=True)
    before = set(owned_helpers())
    proc = start_kxen(tmp_path, home, "asyncio", "mcp", "call", "h", "spawn_marked", "--args", call, "--wait", "30")
    try:
        procs = server_and_sleeper(tmp_path, proc, before)
        for _ in range(150):  # bounded: at most 150 signals, 20 ms apart (past the whole close)
            if proc.poll() is not None:
                break
            os.kill(proc.pid, signal.SIGTERM if _ % 2 else signal.SIGHUP)
            time.sleep(0.02)
        code, err = finish(proc)
        assert code in (143, 129), err.decode(errors="replace")[-2000:]
        assert [p for p in procs if alive(p)] == []
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)

"""Processes changing user settings (``config.toml``) at once lose no write: each holds
``config.toml.lock`` over its whole read-modify-write, and a lock held too long is a clear error."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kxen_core.config.loader import canonical
from kxen_core.config.trust import trust
from kxen_core.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PROCESSES = 6
WORKSPACES_EACH = 4
WAIT = 60  # seconds for every bounded wait below

#: a writer: imports everything, says it is ready, waits for the go file, then trusts its workspaces
#: one after another (and the first writer also turns remote MCP on): all start writing together
WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from kxen_core.config.trust import set_remote_enabled, trust

    home, ready, go, remote = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] == "1"
    ready.touch()
    deadline = time.monotonic() + {wait}
    while not go.exists():
        if time.monotonic() > deadline:
            sys.exit("no go within the deadline")
        time.sleep(0.005)
    for ws in sys.argv[5:]:
        assert trust(home, Path(ws)) is True, ws
    if remote:
        assert set_remote_enabled(home, True) is True
    """
).format(wait=WAIT)

#: holds the settings lock until its stdin closes (or the deadline passes)
HOLDER = textwrap.dedent(
    """
    import sys, threading
    from pathlib import Path
    import filelock

    with filelock.FileLock(sys.argv[1]):
        Path(sys.argv[2]).touch()
        done = threading.Event()
        threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
        done.wait({wait})
    """
).format(wait=WAIT)


def _wait_for(paths: list[Path], procs: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + WAIT
    while not all(p.exists() for p in paths):
        dead = [p for p in procs if p.poll() is not None]
        if dead:
            pytest.fail(f"a helper process exited early: {dead[0].communicate()}")
        if time.monotonic() > deadline:
            pytest.fail(f"helpers not ready within {WAIT} s")
        time.sleep(0.01)


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(WAIT)
        for pipe in (p.stdin, p.stdout, p.stderr):
            if pipe is not None:
                pipe.close()


def test_concurrent_writers_lose_no_write(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    settings = home / "config.toml"
    settings.write_text("# my settings\n[approvals]\n")
    workspaces = []
    for i in range(PROCESSES * WORKSPACES_EACH):
        ws = tmp_path / f"ws{i}"
        ws.mkdir()
        workspaces.append(ws)
    go = tmp_path / "go"
    ready = [tmp_path / f"ready{i}" for i in range(PROCESSES)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(home), str(ready[i]), str(go), "1" if i == 0 else "0"]
            + [str(ws) for ws in workspaces[i * WORKSPACES_EACH : (i + 1) * WORKSPACES_EACH]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    try:
        _wait_for(ready, procs)
        go.touch()
        for p in procs:
            out, err = p.communicate(timeout=WAIT)
            assert p.returncode == 0, err
    finally:
        _stop(procs)

    text = settings.read_text()
    assert text.startswith("# my settings\n")
    data = tomllib.loads(text)
    assert sorted(data["trusted_workspaces"]) == sorted(canonical(ws) for ws in workspaces)
    assert data["mcp"]["remote_enabled"] is True
    assert sorted(p.name for p in home.iterdir() if p.name != "config.toml.lock") == ["config.toml"]


def test_a_held_lock_times_out_with_a_clear_error(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    settings = home / "config.toml"
    settings.write_text("# untouched\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    held = tmp_path / "held"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(home / "config.toml.lock"), str(held)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for([held], [holder])
        start = time.monotonic()
        with pytest.raises(ConfigError) as info:
            trust(home, ws, lock_timeout=0.3)
        assert 0.25 <= time.monotonic() - start < 10
        (problem,) = info.value.problems
        assert (
            problem.startswith(f"{settings}: ")
            and "config.toml.lock" in problem
            and "held by another process" in problem
        )
        assert settings.read_text() == "# untouched\n"
        holder.stdin.close()  # the holder lets go: the same change now goes through
        holder.wait(WAIT)
        assert trust(home, ws, lock_timeout=WAIT) is True
    finally:
        _stop([holder])
    assert canonical(ws) in tomllib.loads(settings.read_text())["trusted_workspaces"]

"""After a crash of kxen, the next start ends the whole tree the crashed kxen left -- also a daemon
a server moved into its own session (``setsid``, a double fork) whose parent is gone -- and nothing
that kxen did not start or that did not descend from what it started.

Every sleeper here carries this run's owner mark (helper_server.py ``spawn_marked``), so the
autouse fixture finds and kills it if a test fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from kxen_transport_stdio import procs
from stdio_support import OWNER, alive, helper, owned_helpers
from test_stdio_signals import finish, hanging_call, server_and_sleeper, start_kxen, wait_for, write_home

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _recorded(home: Path) -> set[int]:
    """Every pid the ledgers in ``home/run`` name: servers, their descendants, adopted orphans."""
    found: set[int] = set()
    for path in (home / "run").glob("*.json"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being replaced: read it again on the next round
        for entry in data.get("servers", []):
            found.add(entry["pid"])
            found.update(pid for pid, _ in entry.get("tree", []))
        found.update(pid for pid, _ in data.get("adopted", []))
    return found


@pytest.mark.parametrize("mode", ["setsid", "doublefork"])
@pytest.mark.parametrize("entry", [(), ("--ignore-eof",)], ids=["exits-on-eof", "ignores-eof"])
def test_the_next_kxen_ends_a_daemon_a_killed_kxen_left(tmp_path, mode, entry):
    home = write_home(tmp_path, h=helper(*entry))
    call = hanging_call(tmp_path, mode=mode, ignore_term=True)
    before = set(owned_helpers())
    proc = start_kxen(tmp_path, home, "asyncio", "mcp", "call", "h", "spawn_marked", "--args", call, "--wait", "30")
    try:
        left = server_and_sleeper(tmp_path, proc, before)
        sleeper = int((tmp_path / "sleeper.pid").read_text())
        [server] = [p for p in left if p != sleeper]
        assert procs.stat(sleeper).sid not in (procs.stat(server).sid, procs.stat(proc.pid).sid)  # its own session
        # the running kxen notes the daemon in its ledger (pid and start time), then crashes
        noted = wait_for(lambda: sleeper in _recorded(home), 30)
        proc.kill()
        proc.communicate(timeout=10)
        if not entry:  # the server sees EOF and exits: the daemon is nobody's child of kxen's now
            assert wait_for(lambda: not alive(server), 10)
        assert alive(sleeper) and procs.stat(sleeper).ppid != proc.pid
        # the next start, with no servers configured any more, ends it
        (home / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
        again = start_kxen(tmp_path, home, "asyncio", "mcp", "status", "--json")
        code, err = finish(again, 60)
        assert code == 0, err.decode(errors="replace")[-2000:]
        assert [p for p in (server, sleeper) if alive(p)] == [], f"the ledger noted the daemon: {noted}"
        assert noted
        assert list((home / "run").glob("*.json")) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


SERVER = """
import os, subprocess, sys, time
# a 'server' that starts a daemon (its own session) and says its pid
child = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(1000)", sys.argv[1]])
print(child.pid, flush=True)
time.sleep(1000)
"""


def _popen(code: str, *, capture: bool = False) -> subprocess.Popen:
    argv = [sys.executable, "-c", code, OWNER]
    return subprocess.Popen(argv, stdout=subprocess.PIPE if capture else subprocess.DEVNULL, start_new_session=True)


@pytest.mark.anyio
async def test_the_ledger_keeps_a_descendant_after_its_server_is_gone(tmp_path):
    server = _popen(SERVER, capture=True)
    daemon = int(server.stdout.readline())
    server.stdout.close()
    ledger = procs.open_ledger(tmp_path)
    try:
        assert ledger is not None
        assert wait_for(lambda: (procs.stat(daemon) or procs.stat(server.pid)).sid == daemon, 10)
        procs.record_server(server.pid, procs.stat(server.pid).start, sys.executable)
        start = procs.stat(daemon).start
        assert ledger.refresh(procs.table()) is True
        [entry] = json.loads(ledger.path.read_text())["servers"]
        assert entry["pid"] == server.pid and [daemon, start] in entry["tree"]
        assert ledger.refresh(procs.table()) is False  # nothing new: the file is not written again
        server.kill()
        server.wait(timeout=10)
        ledger.refresh(procs.table())
        [entry] = json.loads(ledger.path.read_text())["servers"]
        assert [daemon, start] in entry["tree"]  # its parent is gone: still known by pid and start time
        os.kill(daemon, 9)
        assert wait_for(lambda: not alive(daemon), 10)
        ledger.refresh(procs.table())
        [entry] = json.loads(ledger.path.read_text())["servers"]
        assert entry.get("tree", []) == []  # gone: forgotten
    finally:
        procs.close_ledger()
        for pid in (server.pid, daemon):
            if alive(pid):
                os.kill(pid, 9)
        server.wait(timeout=10)


def _ledger(home: Path, host_pid: int, host_start: int, servers: list, adopted: list | None = None) -> None:
    run = home / "run"
    run.mkdir(mode=0o700, exist_ok=True)
    data = {"host": {"pid": host_pid, "start": host_start}, "boot": procs.boot_id(), "servers": servers}
    if adopted is not None:
        data["adopted"] = adopted
    (run / f"{host_pid}-{host_start}.json").write_text(json.dumps(data))


def _sleeper() -> subprocess.Popen:
    p = _popen("import time; time.sleep(1000)")
    assert wait_for(lambda: procs.stat(p.pid) is not None, 10)
    return p


PARENT = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)", sys.argv[1]])
time.sleep(1000)
"""


@pytest.mark.anyio
async def test_recorded_descendants_are_ended_only_while_they_are_the_same_process(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    daemon, stranger, old, orphan = (_sleeper() for _ in range(4))
    # a recorded daemon with a child it started after the last read: the child is in its tree
    parent = _popen(PARENT)
    daemon_child = None
    try:
        assert wait_for(lambda: any(p.ppid == parent.pid for p in procs.table().values()), 10)
        [daemon_child] = [p.pid for p in procs.table().values() if p.ppid == parent.pid]
        st = {p.pid: procs.stat(p.pid).start for p in (daemon, stranger, old, orphan, parent)}
        gone = 2**22 + 7  # a host pid that does not exist
        server_start = min(st.values())
        _ledger(
            home,
            gone,
            1,
            [
                {
                    "pid": gone + 100,  # the server itself is gone
                    "start": server_start,
                    "command": "x",
                    "tree": [
                        [daemon.pid, st[daemon.pid]],
                        [parent.pid, st[parent.pid]],
                        [stranger.pid, st[stranger.pid] + 1],  # the pid was recycled
                        [os.getpid(), procs.stat(os.getpid()).start],  # this process
                        [1, 0],
                        "junk",
                        [old.pid],
                    ],
                },
                {"pid": gone + 101, "start": st[old.pid] + 1, "command": "x", "tree": [[old.pid, st[old.pid]]]},
            ],
            adopted=[[orphan.pid, st[orphan.pid]], [stranger.pid, 0], ["x", 1]],
        )
        with anyio.fail_after(20):
            ended = await procs.end_leftovers(home)
        # the daemon, the other daemon and what it started, the adopted orphan; not the stranger (its
        # start time differs) nor a process older than the server it is recorded under
        assert ended == sorted([daemon.pid, parent.pid, orphan.pid])
        for p in (daemon, parent, orphan):
            p.wait(timeout=10)
        assert wait_for(lambda: not alive(daemon_child), 10)
        assert stranger.poll() is None and old.poll() is None
        assert list((home / "run").glob("*.json")) == []
    finally:
        for p in (daemon, stranger, old, orphan):
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        if daemon_child is not None and alive(daemon_child):
            os.kill(daemon_child, 9)
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)

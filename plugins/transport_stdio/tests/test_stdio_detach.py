"""A server that detaches a child (``setsid``, a double fork) does not leave it running.

Every sleeper here carries this run's owner mark (helper_server.py ``spawn_marked``), so the
autouse fixture finds and kills it if a test fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import anyio
import pytest
from kxen_testing import running
from kxen_transport_stdio import procs
from stdio_support import OWNER, STDIO, alive, helper, owned_helpers, server_pid, wait_gone
from test_stdio_signals import finish, hanging_call, server_and_sleeper, start_kxen, wait_for, write_home

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@pytest.mark.anyio
@pytest.mark.parametrize("ignore_term", [False, True])
@pytest.mark.parametrize("entry", [(), ("--ignore-eof",)], ids=["exits-on-eof", "ignores-eof"])
async def test_a_setsid_child_of_a_server_is_ended_on_close(kxen_home, workspace, ignore_term, entry):
    async with running(kxen_home, workspace, servers={"h": helper(*entry)}, allow=STDIO) as rt:
        pid = server_pid(rt, "h")
        with anyio.fail_after(10):
            result = await rt.call_tool("spawn_marked", {"mode": "setsid", "ignore_term": ignore_term}, server="h")
        sleeper = result["structuredContent"]["pid"]
        info = procs.stat(sleeper)
        assert info is not None and info.sid == sleeper != pid  # out of the server's session and group
    assert await wait_gone([pid, sleeper], 2.0) == []


@pytest.mark.anyio
async def test_a_setsid_child_of_a_stopped_server_is_ended_with_it(kxen_home, workspace):
    # the server is replaced by a reload (stop of one server, the runtime goes on)
    async with running(kxen_home, workspace, servers={"h": helper()}, allow=STDIO) as rt:
        with anyio.fail_after(10):
            result = await rt.call_tool("spawn_marked", {"mode": "setsid"}, server="h")
        sleeper = result["structuredContent"]["pid"]
        with anyio.fail_after(10):
            await rt.servers["h"].stop("test")
        assert await wait_gone([sleeper], 2.0) == []


@pytest.mark.parametrize("ignore_term", [False, True])
def test_kxen_ends_a_double_forked_orphan_of_its_server(tmp_path, ignore_term):
    home = write_home(tmp_path, h=helper())
    call = json.dumps({"mode": "doublefork", "ignore_term": ignore_term})
    before = set(owned_helpers())
    proc = start_kxen(tmp_path, home, "asyncio", "mcp", "call", "h", "spawn_marked", "--args", call, "--json")
    try:
        code, err = finish(proc, 60)
        assert code == 0, err.decode(errors="replace")[-2000:]
        # the orphan was adopted by kxen (not init) and ended before kxen exited
        assert wait_for(lambda: not (set(owned_helpers()) - before), 0.5), set(owned_helpers()) - before
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_signal_to_kxen_ends_a_double_forked_orphan(tmp_path, backend):
    home = write_home(tmp_path, h=helper())
    call = hanging_call(tmp_path, mode="doublefork", ignore_term=True)
    before = set(owned_helpers())
    proc = start_kxen(tmp_path, home, backend, "mcp", "call", "h", "spawn_marked", "--args", call, "--wait", "30")
    try:
        left = server_and_sleeper(tmp_path, proc, before)
        assert procs.stat(int((tmp_path / "sleeper.pid").read_text())).ppid == proc.pid  # adopted by kxen
        os.kill(proc.pid, signal.SIGTERM)
        code, err = finish(proc)
        assert code == 143, err.decode(errors="replace")[-2000:]
        assert [p for p in left if alive(p)] == []
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


HOST = """
import json, subprocess, sys, time
from kxen_core.cli import command as cli
# a child of the host that kxen did not start: it must survive kxen's cleanup of adopted orphans
mine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)", sys.argv[1]])
time.sleep(0.2)
code = cli.main(sys.argv[2:])
time.sleep(0.2)
alive = mine.poll() is None
mine.kill()
mine.wait()
print(json.dumps({"code": code, "mine_alive": alive}))
"""


def test_kxen_ends_only_what_it_adopted_never_a_child_it_did_not_start(tmp_path):
    home = write_home(tmp_path, h=helper())
    ws = tmp_path / "ws"
    ws.mkdir()
    call = json.dumps({"mode": "doublefork"})
    before = set(owned_helpers())
    argv = [sys.executable, "-c", HOST, OWNER, "--home", str(home), "--workspace", str(ws)]
    argv += ["mcp", "call", "h", "spawn_marked", "--args", call, "--json"]
    env = dict(os.environ, KXEN_LOAD_PLUGINS="stdio")
    proc = subprocess.run(argv, cwd=ws, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = json.loads(proc.stdout.strip().splitlines()[-1])
    assert last == {"code": 0, "mine_alive": True}
    assert wait_for(lambda: not (set(owned_helpers()) - before), 0.5), set(owned_helpers()) - before


def test_a_recycled_pid_is_never_signalled(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)", OWNER])
    try:
        assert wait_for(lambda: procs.stat(sleeper.pid) is not None, 10)
        info = procs.stat(sleeper.pid)
        procs.send(sleeper.pid, info.start + 1, signal.SIGKILL)  # another process under the same pid
        time.sleep(0.1)
        assert sleeper.poll() is None
        procs.send(sleeper.pid, info.start, signal.SIGKILL)
        sleeper.wait(timeout=10)
        assert sleeper.returncode == -signal.SIGKILL
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait(timeout=10)


def test_a_tree_follows_descendants_that_left_the_group_and_not_older_processes():
    # this test process as the root: its own children are members, its parent is not
    me = os.getpid()
    child = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(1000)", OWNER])
    try:
        assert wait_for(lambda: (procs.stat(child.pid) or procs.stat(me)).sid == child.pid, 10)
        tree = procs.Tree(me, procs.stat(me).start)
        tree.update()
        assert child.pid in tree.members and os.getppid() not in tree.members
        assert child.pid in tree.alive()
    finally:
        child.kill()
        child.wait(timeout=10)


# --- after a crash: the next start ends what the crashed kxen left, and nothing else ------------


def test_the_next_kxen_ends_the_servers_a_killed_kxen_left(tmp_path):
    home = write_home(tmp_path, h=helper("--ignore-eof"))  # keeps running when kxen's end of stdin goes
    call = hanging_call(tmp_path)
    before = set(owned_helpers())
    proc = start_kxen(tmp_path, home, "asyncio", "mcp", "call", "h", "spawn_marked", "--args", call, "--wait", "30")
    try:
        left = server_and_sleeper(tmp_path, proc, before)
        proc.kill()  # a crash: nothing is closed
        proc.communicate(timeout=10)
        time.sleep(0.2)
        assert all(alive(p) for p in left)  # the server and its child run on
        assert len(list((home / "run").glob("*.json"))) == 1
        # the next start, with no servers configured any more, ends them
        (home / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
        again = start_kxen(tmp_path, home, "asyncio", "mcp", "status", "--json")
        code, err = finish(again, 60)
        assert code == 0, err.decode(errors="replace")[-2000:]
        assert [p for p in left if alive(p)] == []
        assert list((home / "run").glob("*.json")) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


def _ledger(home, host_pid: int, host_start: int, servers: list[dict], boot: str | None = None) -> None:
    run = home / "run"
    run.mkdir(mode=0o700, exist_ok=True)
    data = {"host": {"pid": host_pid, "start": host_start}, "boot": boot or procs.boot_id(), "servers": servers}
    (run / f"{host_pid}-{host_start}.json").write_text(json.dumps(data))


def _sleeper(new_session: bool) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)", OWNER], start_new_session=new_session)
    assert wait_for(lambda: procs.stat(p.pid) is not None, 10)
    return p


@pytest.mark.anyio
async def test_a_ledger_never_ends_a_process_kxen_did_not_start(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    leader, plain, other_boot, live_host = _sleeper(True), _sleeper(False), _sleeper(True), _sleeper(True)
    try:
        gone = 2**22 + 7  # a host pid that does not exist
        ls, ps, ob = procs.stat(leader.pid), procs.stat(plain.pid), procs.stat(other_boot.pid)
        _ledger(
            home,
            gone,
            1,
            [
                {"pid": leader.pid, "start": ls.start + 1, "command": "x"},  # the pid was recycled
                {"pid": plain.pid, "start": ps.start, "command": "x"},  # not the leader of its own session
                {"pid": os.getpid(), "start": procs.stat(os.getpid()).start, "command": "x"},
                {"pid": 1, "start": 0, "command": "init"},
                "junk",
            ],
        )
        _ledger(home, gone + 1, 1, [{"pid": other_boot.pid, "start": ob.start, "command": "x"}], boot="another-boot")
        # a ledger of a host that is still running: its servers are its own
        me = procs.stat(os.getpid())
        live = procs.stat(live_host.pid)
        _ledger(home, os.getpid(), me.start, [{"pid": live_host.pid, "start": live.start, "command": "x"}])
        (home / "run" / "not-a-ledger.json").write_text("{")  # not named by a host: left alone
        (home / "run" / f"{gone + 2}-1.json").write_text("{" * 100000)  # corrupt: removed
        with anyio.fail_after(10):
            assert await procs.end_leftovers(home) == []
        for p in (leader, plain, other_boot, live_host):
            assert p.poll() is None
        # the running host's ledger stays; the dead hosts' ledgers are removed
        assert sorted(x.name for x in (home / "run").glob("*.json")) == [
            f"{os.getpid()}-{me.start}.json",
            "not-a-ledger.json",
        ]
        # the same entry with the right start time is ended
        _ledger(home, gone, 1, [{"pid": leader.pid, "start": ls.start, "command": "x"}])
        with anyio.fail_after(10):
            assert await procs.end_leftovers(home) == [leader.pid]
        leader.wait(timeout=5)
        assert plain.poll() is None and live_host.poll() is None
    finally:
        for p in (leader, plain, other_boot, live_host):
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)


@pytest.mark.anyio
async def test_a_ledger_directory_others_can_write_is_not_read(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    leader = _sleeper(True)
    try:
        _ledger(home, 2**22 + 7, 1, [{"pid": leader.pid, "start": procs.stat(leader.pid).start, "command": "x"}])
        (home / "run").chmod(0o777)
        with anyio.fail_after(10):
            assert await procs.end_leftovers(home) == []
        assert leader.poll() is None
        (home / "run").chmod(0o700)
        real = tmp_path / "elsewhere"
        (home / "run").rename(real)
        (home / "run").symlink_to(real)
        with anyio.fail_after(10):
            assert await procs.end_leftovers(home) == []
        assert leader.poll() is None
    finally:
        leader.kill()
        leader.wait(timeout=10)

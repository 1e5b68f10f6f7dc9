"""The pid counter: a server's tree reads only the processes started since it last looked, and
finds what a reading of every process finds (``procs/counter.py``)."""

from __future__ import annotations

import os
import subprocess
import sys

import attrs
import pytest
from kxen_transport_stdio import procs
from kxen_transport_stdio.procs import counter, tree
from stdio_support import OWNER
from test_stdio_signals import wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

#: a root that starts a child in its group and a grandchild that leaves with setsid, then sleeps
ROOT = (
    "import os, subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', sys.argv[1]])\n"
    "subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(60)', sys.argv[1]])\n"
    "time.sleep(60)\n"
)


def _children_of(pid: int) -> list[procs.Proc]:
    return [p for p in procs.table().values() if p.ppid == pid]


def _start_root() -> subprocess.Popen[bytes]:
    root = subprocess.Popen([sys.executable, "-c", ROOT, OWNER], start_new_session=True)
    started = lambda: [p.sid == p.pid for p in _children_of(root.pid)]  # noqa: E731
    assert wait_for(lambda: sorted(started()) == [False, True], 20), "the root did not start its two children"
    return root


def _end(root: subprocess.Popen[bytes], members: list[int]) -> None:
    for pid in [root.pid, *members]:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    root.wait(timeout=10)


@pytest.mark.parametrize("probe", [counter.PROBE_LIMIT, 0], ids=["by-number", "by-listing"])
def test_a_mark_reads_this_namespaces_counter_and_what_started_since(monkeypatch, probe):
    monkeypatch.setattr(counter, "PROBE_LIMIT", probe)
    since = counter.mark()
    assert since is not None and since.forks_before <= since.forks_after
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", OWNER])
    try:
        now = counter.mark()
        assert now is not None and now.forks_after > since.forks_before
        new = counter.started_since(since, now)
        assert new is not None and child.pid in new
        assert os.getpid() not in new and os.getppid() not in new  # started before the mark
        assert counter.started_since(now, now) == []  # nothing between a mark and itself
    finally:
        child.kill()
        child.wait(timeout=10)


def test_the_counter_going_round_takes_the_pids_on_both_sides():
    now = counter.mark()
    assert now is not None
    high = max(int(e) for e in os.listdir("/proc") if e.isdigit())
    # the mark before stood above every pid there is, so the counter went round since
    since = attrs.evolve(now, last=high + 1, forks_before=now.forks_before - 10)
    new = counter.started_since(since, attrs.evolve(now, last=os.getpid()))
    assert new is not None and os.getpid() in new and 1 in new  # from the lowest pid up to the new mark
    assert all(pid <= os.getpid() for pid in new)  # and none between the new mark and the old one


def test_too_many_forks_or_a_count_that_went_back_is_not_known():
    now = counter.mark()
    assert now is not None
    far = attrs.evolve(now, forks_before=now.forks_after - counter.NEW_PIDS_LIMIT - 1)
    assert counter.started_since(far, now) is None
    back = attrs.evolve(now, forks_before=now.forks_after + 1)
    assert counter.started_since(back, now) is None


def test_a_tree_with_a_mark_finds_what_reading_every_process_finds(monkeypatch):
    since = counter.mark()
    assert since is not None
    root = _start_root()
    found: list[int] = []
    try:
        full = procs.Tree(root.pid)
        full.update()
        marked = procs.Tree(root.pid, since=since)
        read_all = []
        monkeypatch.setattr(tree, "table", lambda: read_all.append(1) or procs.table())
        marked.update()
        found = sorted(marked.members)
        assert read_all == []  # only what started since the mark was read
        assert found == sorted(full.members) and len(found) == 2
        setsid = [p for p in found if procs.stat(p).sid == p]
        assert len(setsid) == 1  # the one that left the group and the session is still a member
        # a second reading starts where the first stopped, and still knows the members
        assert marked.since is not None and marked.since != since
        assert marked.update() == [] and sorted(marked.members) == found and read_all == []
    finally:
        _end(root, found)


def test_a_tree_whose_mark_is_too_old_reads_every_process(monkeypatch):
    now = counter.mark()
    assert now is not None
    root = _start_root()
    found: list[int] = []
    try:
        old = attrs.evolve(now, forks_before=now.forks_after - counter.NEW_PIDS_LIMIT - 1)
        marked = procs.Tree(root.pid, since=old)
        read_all = []
        monkeypatch.setattr(tree, "table", lambda: read_all.append(1) or procs.table())
        marked.update()
        found = sorted(marked.members)
        assert read_all == [1] and len(found) == 2
    finally:
        _end(root, found)

"""The pid counter: which processes started since a mark, without reading every process.

A close of a stdio server reads the processes its tree may hold twice (before the child gets EOF,
and before the group is signalled). Every process that can belong to the tree started after the
server did, and Linux hands out pids in cyclic order: with the counter read before the server
started, only the pids allocated since need reading. The fork count of the machine tells when
the counter could have gone round: then, and wherever the counter cannot be read, every process
is read as before. See :class:`kxen_transport_stdio.procs.Tree`.

What it cannot see: the counter also moves for a fork that fails after its pid was handed out (a
full pid limit of a cgroup), which the fork count does not count. A server that fails forks on
purpose to take the counter round and hide a child that left its group is no harder to stop than
one that detaches with ``setsid`` and a double fork, which the full reading does not find either:
the subreaper (:func:`kxen_transport_stdio.procs.become_subreaper`) adopts both when they are
orphaned, and the group kill ends what stayed in the group.
"""

from __future__ import annotations

import os
import sys

import attrs

#: the most processes started machine-wide between two marks for which only the pids allocated in
#: between are read; past it (or when the counter could have gone round) every process is read
NEW_PIDS_LIMIT = 4096
#: up to how many pids handed out between two marks each is read by number, not by listing /proc
PROBE_LIMIT = 16
_own_proc: bool | None = None  # is /proc this process's pid namespace? (read once)


@attrs.frozen
class Mark:
    """Where the pid counter stood: ``last`` the last pid allocated in this pid namespace
    (``/proc/sys/kernel/ns_last_pid``), between two readings of the machine's fork count
    (``processes`` in ``/proc/stat``: every process and thread made): ``forks_before`` read before
    ``last``, ``forks_after`` after it. A process started later than a mark has a pid after
    ``last`` in the counter's cyclic order."""

    last: int
    forks_before: int
    forks_after: int


def _read_int(path: str, prefix: bytes = b"", size: int = 64) -> int | None:
    """The number in the small file ``path``, or on its line that starts with ``prefix``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = os.read(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)
    if prefix:
        at = raw.find(b"\n" + prefix)
        if at < 0:
            return None
        raw = raw[at + len(prefix) + 1 :].split(b"\n", 1)[0]
    try:
        return int(raw.strip())
    except ValueError:
        return None


#: how much of /proc/stat is read for its ``processes`` line (after a line per CPU and the
#: interrupt counts): a machine whose file is longer reads every process instead
PROC_STAT_READ_BYTES = 1 << 16


def _forks() -> int | None:
    return _read_int("/proc/stat", b"processes ", PROC_STAT_READ_BYTES)


def mark() -> Mark | None:
    """The pid counter now, or None where it cannot be read (not Linux, a ``/proc`` of another pid
    namespace, an old kernel): then the callers read every process."""
    global _own_proc
    if _own_proc is None:
        try:
            _own_proc = sys.platform.startswith("linux") and os.readlink("/proc/self") == str(os.getpid())
        except OSError:
            _own_proc = False
    if not _own_proc:
        return None
    before = _forks()
    last = _read_int("/proc/sys/kernel/ns_last_pid")
    after = _forks()
    if before is None or last is None or after is None:
        return None
    return Mark(last, before, after)


def started_since(since: Mark, now: Mark) -> list[int] | None:
    """The pids the processes started after ``since`` (``now`` read before the list) can have:
    those of ``/proc``, or when fewer than :data:`PROBE_LIMIT` pids were handed out, every pid
    between (some may be gone or never started: reading one tells). None when it cannot be known:
    more than :data:`NEW_PIDS_LIMIT` forks between, a fork count that went back (a broken
    reading), or no ``/proc``. Exact otherwise: pids are handed out in cyclic order, and fewer
    forks than ``pid_max`` less the 300 lowest pids (which the counter skips on its round) cannot
    take the counter round."""
    forks = now.forks_after - since.forks_before
    if forks < 0 or forks > NEW_PIDS_LIMIT:
        return None
    pid_max = _read_int("/proc/sys/kernel/pid_max")  # read each time: root may lower it
    if pid_max is None or forks >= pid_max - 300:
        return None
    lo, hi = since.last, now.last
    if lo <= hi and hi - lo <= PROBE_LIMIT:
        return list(range(lo + 1, hi + 1))  # cheaper than listing /proc
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    out = []
    for entry in entries:
        if entry.isdigit():
            pid = int(entry)
            if (lo < pid <= hi) if lo <= hi else (pid > lo or pid <= hi):
                out.append(pid)
    return out


__all__ = ["NEW_PIDS_LIMIT", "PROBE_LIMIT", "Mark", "mark", "started_since"]

"""A server's process tree as ``/proc`` shows it, signalled by pid and start time; the subreaper.

See :mod:`kxen_transport_stdio.procs`.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Iterable

import anyio
import attrs

from .counter import Mark, mark, started_since

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
#: how often the processes are read again while waiting for them to go
POLL_SECONDS = 0.01
TERM_GRACE_SECONDS = 0.8
KILL_WAIT_SECONDS = 2.0


@attrs.frozen
class Proc:
    pid: int
    state: str
    ppid: int
    pgrp: int
    sid: int
    start: int  # clock ticks after boot (field 22): with the pid, who this process is

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


def _parse(pid: int, raw: bytes) -> Proc | None:
    # pid (comm) state ppid pgrp session ... ; comm may hold spaces and parens: split after the last ')'
    fields = raw[raw.rfind(b")") + 2 :].split(None, 20)  # up to the start time (field 22), the rest unsplit
    try:
        return Proc(pid, fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    except (IndexError, ValueError):
        return None


#: more than any ``/proc/<pid>/stat`` line (52 numbers and a name of at most 64 bytes)
STAT_READ_BYTES = 4096


def read_stat(pid: int | str) -> bytes | None:
    """The raw ``/proc/<pid>/stat`` line, or None (gone, unreadable, not Linux). One ``os.read``
    of a bounded size: the kernel makes the line whole on the first read, and a stop reads every
    process of the machine this way several times (a buffered ``open`` costs twice as much)."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, STAT_READ_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)


def stat(pid: int) -> Proc | None:
    """The process ``pid`` now, or None (gone, unreadable, not Linux)."""
    raw = read_stat(pid)
    return None if raw is None else _parse(pid, raw)


def table() -> dict[int, Proc]:
    """Every process this user can see (empty where there is no ``/proc``)."""
    if not sys.platform.startswith("linux"):
        return {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {}
    out = {}
    for entry in entries:
        if entry.isdigit():
            proc = stat(int(entry))
            if proc is not None:
                out[proc.pid] = proc
    return out


def send(pid: int, start: int, sig: int) -> None:
    """Signal ``pid`` only if it is still the process that started at ``start``."""
    now = stat(pid)
    if now is None or now.start != start or now.zombie:
        return
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def reap(pid: int) -> None:
    """Collect ``pid`` if it is a dead child of ours (an adopted orphan); never blocks."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        pass


def alive(members: dict[int, int], procs: dict[int, Proc] | None = None) -> list[int]:
    """Of ``members`` (pid -> start time), those still running: zombies do not count, and those that
    are our children are reaped. Reads only the members (or ``procs``, a snapshot), no full scan."""
    me = os.getpid()
    out = []
    for pid, start in members.items():
        proc = stat(pid) if procs is None else procs.get(pid)
        if proc is None or proc.start != start:
            continue
        if proc.zombie:
            if proc.ppid == me:
                reap(pid)
            continue
        out.append(pid)
    return out


class Tree:
    """The processes that belong to one server: its descendants by parent pid, and everything in
    the session or group it leads. Members are kept by (pid, start time) once seen, so a member
    stays one after its parent died and it was adopted elsewhere."""

    def __init__(self, root: int, root_start: int | None = None, since: Mark | None = None) -> None:
        self.root = root
        self.root_start = root_start
        self.members: dict[int, int] = {}  # pid -> start time
        #: the pid counter before the root started, then at each reading (:meth:`_read`)
        self.since = since

    def _read(self) -> dict[int, Proc]:
        """What :meth:`update` looks at. Given the pid counter before the root started, only the
        processes started since the last reading (and the root and the members, by pid): every
        process that can belong was started after the root, and one that did not belong when it
        was read cannot come to (a session is joined only at birth, a group only within its
        session, and a parent changes only to an adopter). Without a mark, or when it cannot tell
        what started since (:func:`started_since`), every process."""
        now = mark() if self.since is not None else None
        new = started_since(self.since, now) if self.since is not None and now is not None else None
        self.since = now  # read before the processes: what starts after it is in the next reading
        if new is None:
            return table()
        procs: dict[int, Proc] = {}
        for pid in (*new, self.root, *self.members):
            if pid not in procs:
                proc = stat(pid)
                if proc is not None:
                    procs[pid] = proc
        return procs

    def update(self, procs: dict[int, Proc] | None = None) -> list[int]:
        """Read the processes again (``procs``: a snapshot of every process instead); return the
        pids newly found to belong."""
        procs = self._read() if procs is None else procs
        me = os.getpid()
        new: list[int] = []
        parents = {self.root} | {p for p, s in self.members.items() if p in procs and procs[p].start == s}
        root = procs.get(self.root)
        if root is not None and self.root_start is not None and root.start != self.root_start:
            parents.discard(self.root)  # the root's pid was recycled: its new owner is not ours
        changed = True
        while changed:  # bounded: each round adds at least one of the finitely many processes
            changed = False
            for proc in procs.values():
                if proc.pid in self.members or proc.pid == self.root or proc.pid == me:
                    continue
                if proc.ppid in parents or proc.sid == self.root or proc.pgrp == self.root:
                    if proc.start < (self.root_start or 0):
                        continue  # older than the server: cannot be its descendant
                    self.members[proc.pid] = proc.start
                    parents.add(proc.pid)
                    new.append(proc.pid)
                    changed = True
        return new

    def alive(self, procs: dict[int, Proc] | None = None) -> list[int]:
        """Members still running (zombies do not count; those adopted by us are reaped)."""
        return alive(self.members, procs)

    def signal(self, sig: int, pids: Iterable[int] | None = None) -> None:
        for pid in list(self.members) if pids is None else pids:
            send(pid, self.members[pid], sig)


# --- the child subreaper ----------------------------------------------------------------------

_preexisting: dict[int, int] | None = None  # our children when we became a subreaper: never ended


def _prctl(option: int, arg: int) -> int | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if option == PR_GET_CHILD_SUBREAPER:
            value = ctypes.c_int(0)
            if libc.prctl(option, ctypes.byref(value), 0, 0, 0) != 0:
                return None
            return value.value
        return int(libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0))
    except (OSError, AttributeError):
        return None


def is_subreaper() -> bool:
    return bool(_prctl(PR_GET_CHILD_SUBREAPER, 0))


def become_subreaper() -> bool:
    """Best effort: orphans of our descendants are adopted by this process (Linux only). Returns
    True if this process is now a subreaper. The children this process has now are remembered:
    :func:`end_adopted` never touches them."""
    global _preexisting
    if _prctl(PR_SET_CHILD_SUBREAPER, 1) != 0:
        return False
    me = os.getpid()
    _preexisting = {p.pid: p.start for p in table().values() if p.ppid == me}
    return is_subreaper()


def stop_subreaper() -> None:
    """Orphans go to init again (for hosts that turned it on only for a while)."""
    global _preexisting
    _prctl(PR_SET_CHILD_SUBREAPER, 0)
    _preexisting = None


def adopted(procs: dict[int, Proc] | None = None) -> list[Proc]:
    """Our children that were not our children when we became a subreaper."""
    procs = table() if procs is None else procs
    me, old = os.getpid(), _preexisting or {}
    return [p for p in procs.values() if p.ppid == me and old.get(p.pid) != p.start]


async def end_adopted(grace: float = TERM_GRACE_SECONDS, wait: float = KILL_WAIT_SECONDS) -> list[int]:
    """After every server is closed: SIGTERM each adopted orphan and its tree, SIGKILL what is left
    after ``grace``, reap, wait at most ``wait`` more. Returns the pids that were ended. Only for a
    process that became a subreaper with :func:`become_subreaper`; does nothing otherwise."""
    if _preexisting is None:
        return []
    members: dict[int, int] = {}

    def scan() -> list[int]:
        procs = table()
        fresh = []
        for proc in adopted(procs):
            if proc.pid not in members:
                members[proc.pid] = proc.start
                fresh.append(proc.pid)
        for pid in list(members):
            tree = Tree(pid, members[pid])
            tree.update(procs)
            for child, start in tree.members.items():
                if child not in members:
                    members[child] = start
                    fresh.append(child)
        return fresh

    for pid in scan():
        send(pid, members[pid], signal.SIGTERM)
    if not members:
        return []
    with anyio.move_on_after(grace):
        while alive(members):
            for pid in scan():
                send(pid, members[pid], signal.SIGTERM)
            await anyio.sleep(POLL_SECONDS)
    with anyio.move_on_after(wait):
        while True:
            scan()
            left = alive(members)
            if not left:
                break
            for pid in left:
                send(pid, members[pid], signal.SIGKILL)
            await anyio.sleep(POLL_SECONDS)
    return sorted(members)


__all__ = [
    "Proc",
    "Tree",
    "adopted",
    "become_subreaper",
    "end_adopted",
    "is_subreaper",
    "send",
    "stat",
    "stop_subreaper",
    "table",
]

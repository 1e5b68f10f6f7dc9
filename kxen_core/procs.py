"""Processes as Linux shows them in ``/proc``: for ending what a server leaves behind.

A server runs in its own session and process group, and closing it signals that group. A server
that detaches a child (``setsid``, ``setpgid``) takes the child out of the group; one that
double-forks also takes it out of its tree (the orphan is adopted by init). Two defences:

- :class:`Tree` follows a server's descendants by parent pid, and everything in its session or
  group, from a snapshot taken *before* anything is signalled (an orphan keeps its place in the
  tree for as long as kxen saw it there). Every process is known by pid *and* start time (field 22
  of ``/proc/<pid>/stat``), and is signalled only while both still match: a recycled pid is never hit.
- :func:`become_subreaper` makes this process a child subreaper (``PR_SET_CHILD_SUBREAPER``), so an
  orphan of any descendant is adopted by kxen instead of init; :func:`end_adopted` ends every
  adopted orphan (and its tree) after the servers are closed. The ``kxen`` command does both; an
  embedding host may opt in, knowing that every child of its process that is not in the snapshot
  :func:`become_subreaper` takes is then treated as a server's leftover.

After a crash of the host (SIGKILL, power to the terminal cut before a signal could be handled),
its servers run on. :class:`Ledger` is a small state file per kxen process (``<home>/run/<pid>-<start
time>.json``, the directory 0700) listing every stdio server it started: pid, start time, command,
and the boot it ran in. :func:`end_leftovers` reads the ledgers of hosts that are gone and ends only
the servers whose pid, start time and boot still match and that still lead their own session and
group (as kxen started them): never a process kxen did not start (the command is recorded for
people reading the file; a server may have exec'd another program and is still the one started). Both are bounded (files, entries, bytes, seconds). The ``kxen`` command does both; an
embedding host may opt in with :func:`open_ledger` and :func:`end_leftovers`.

Elsewhere than Linux every helper here finds nothing and the group kill is all there is.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import stat as stat_mod
import sys
from pathlib import Path
from typing import Any, Iterable

import anyio
import attrs

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
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return Proc(pid, fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def stat(pid: int) -> Proc | None:
    """The process ``pid`` now, or None (gone, unreadable, not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return _parse(pid, f.read())
    except OSError:
        return None


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


class Tree:
    """The processes that belong to one server: its descendants by parent pid, and everything in
    the session or group it leads. Members are kept by (pid, start time) once seen, so a member
    stays one after its parent died and it was adopted elsewhere."""

    def __init__(self, root: int, root_start: int | None = None) -> None:
        self.root = root
        self.root_start = root_start
        self.members: dict[int, int] = {}  # pid -> start time

    def update(self, procs: dict[int, Proc] | None = None) -> list[int]:
        """Read the processes again; return the pids newly found to belong."""
        procs = table() if procs is None else procs
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
        me = os.getpid()
        out = []
        for pid, start in self.members.items():
            proc = stat(pid) if procs is None else procs.get(pid)  # members only: no full scan
            if proc is None or proc.start != start:
                continue
            if proc.zombie:
                if proc.ppid == me:
                    reap(pid)
                continue
            out.append(pid)
        return out

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

    def alive() -> list[int]:
        me = os.getpid()
        out = []
        for pid, start in members.items():
            proc = stat(pid)
            if proc is None or proc.start != start:
                continue
            if proc.zombie:
                if proc.ppid == me:
                    reap(pid)
                continue
            out.append(pid)
        return out

    for pid in scan():
        send(pid, members[pid], signal.SIGTERM)
    if not members:
        return []
    with anyio.move_on_after(grace):
        while alive():
            for pid in scan():
                send(pid, members[pid], signal.SIGTERM)
            await anyio.sleep(POLL_SECONDS)
    with anyio.move_on_after(wait):
        while True:
            scan()
            left = alive()
            if not left:
                break
            for pid in left:
                send(pid, members[pid], signal.SIGKILL)
            await anyio.sleep(POLL_SECONDS)
    return sorted(members)


# --- the ledger of started servers, for the next start after a crash ----------------------------

#: at most this many ledgers are read, each at most this many entries and bytes
LEDGER_MAX_FILES = 64
LEDGER_MAX_ENTRIES = 256
LEDGER_MAX_BYTES = 256 * 1024

_ledger: Ledger | None = None


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _run_dir(home: Path, create: bool) -> Path | None:
    """``<home>/run``: a real directory of ours, not reachable by others (made 0700 if missing)."""
    path = Path(home) / "run"
    try:
        if create:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return None
    if not stat_mod.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None  # a symlink, someone else's, or writable by others: not trusted, not used
    return path


class Ledger:
    """The servers this process started and has not stopped yet, kept in one small file."""

    def __init__(self, directory: Path) -> None:
        me = stat(os.getpid())
        self.path = directory / f"{os.getpid()}-{me.start if me else 0}.json"
        self.host = {"pid": os.getpid(), "start": me.start if me else None, "marker": os.urandom(8).hex()}
        self.boot = boot_id()
        self.servers: dict[int, dict[str, Any]] = {}

    def add(self, pid: int, start: int, command: str) -> None:
        self.servers[pid] = {"pid": pid, "start": start, "command": command}
        self._write()

    def remove(self, pid: int) -> None:
        if self.servers.pop(pid, None) is not None:
            self._write()

    def close(self) -> None:
        try:
            self.path.unlink()
        except OSError:
            pass

    def _write(self) -> None:
        data = {"host": self.host, "boot": self.boot, "servers": list(self.servers.values())[:LEDGER_MAX_ENTRIES]}
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(data, f)
            os.replace(tmp, self.path)
        except OSError:
            pass  # best effort: a full disk must not stop a server from starting


def open_ledger(home: Path) -> Ledger | None:
    """Record every stdio server this process starts in ``<home>/run`` until :func:`close_ledger`."""
    global _ledger
    directory = _run_dir(home, create=True) if sys.platform.startswith("linux") else None
    _ledger = Ledger(directory) if directory is not None else None
    return _ledger


def close_ledger() -> None:
    global _ledger
    if _ledger is not None:
        _ledger.close()
    _ledger = None


def record_server(pid: int, start: int | None, command: str) -> None:
    """Called by a transport right after it started a server (no-op without an open ledger)."""
    if _ledger is not None and start is not None:
        _ledger.add(pid, start, command)


def forget_server(pid: int) -> None:
    """Called by a transport once the server and its group are stopped."""
    if _ledger is not None:
        _ledger.remove(pid)


def _leftover(entry: Any, boot: str | None) -> tuple[int, int] | None:
    """(pid, start) of a recorded server that is still exactly the process kxen started, else None."""
    if not isinstance(entry, dict) or boot is None or boot != boot_id():
        return None
    pid, start, command = entry.get("pid"), entry.get("start"), entry.get("command")
    if not (isinstance(pid, int) and isinstance(start, int) and isinstance(command, str)) or pid <= 1:
        return None
    now = stat(pid)
    if now is None or now.zombie or now.start != start or now.sid != pid or now.pgrp != pid:
        return None  # pid, start time and boot name one process; it still leads what kxen made it lead
    if pid == os.getpid():
        return None
    return pid, start


async def end_leftovers(home: Path, grace: float = TERM_GRACE_SECONDS, wait: float = KILL_WAIT_SECONDS) -> list[int]:
    """End the servers that hosts which are gone left running (their ledgers in ``<home>/run``);
    returns their pids. Ledgers of hosts still running are left alone."""
    directory = _run_dir(home, create=False) if sys.platform.startswith("linux") else None
    if directory is None:
        return []
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".json") and not n.startswith("."))
    except OSError:
        return []
    targets: dict[int, Tree] = {}
    done: list[Path] = []
    for name in names[:LEDGER_MAX_FILES]:
        host_pid, _, host_start = name[: -len(".json")].partition("-")
        if not (host_pid.isdigit() and host_start.isdigit()):
            continue
        host = stat(int(host_pid))
        if host is not None and host.start == int(host_start) and not host.zombie:
            continue  # that host is running: its servers are its own
        path = directory / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                data = json.loads(f.read(LEDGER_MAX_BYTES + 1)[:LEDGER_MAX_BYTES])
        except (OSError, ValueError):
            data = None
        done.append(path)
        if not isinstance(data, dict) or not isinstance(data.get("servers"), list):
            continue
        for entry in data["servers"][:LEDGER_MAX_ENTRIES]:
            found = _leftover(entry, data.get("boot"))
            if found is not None:
                tree = Tree(found[0], found[1])
                tree.update()
                targets[found[0]] = tree
    roots = {pid: tree.root_start for pid, tree in targets.items()}

    def alive() -> bool:
        procs = table()
        return any(
            (pid in procs and procs[pid].start == start and not procs[pid].zombie) or targets[pid].alive(procs)
            for pid, start in roots.items()
        )

    def hit(sig: int) -> None:
        for pid, tree in targets.items():
            if _leftover({"pid": pid, "start": roots[pid], "command": ""}, boot_id()) is not None:
                try:
                    os.killpg(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            tree.update()
            tree.signal(sig)

    if targets:
        hit(signal.SIGTERM)
        with anyio.move_on_after(grace):
            while alive():
                await anyio.sleep(POLL_SECONDS)
        with anyio.move_on_after(wait):
            while alive():
                hit(signal.SIGKILL)
                await anyio.sleep(POLL_SECONDS)
    for path in done:
        try:
            path.unlink()
        except OSError:
            pass
    return sorted(targets)


__all__ = [
    "Proc",
    "Tree",
    "adopted",
    "Ledger",
    "become_subreaper",
    "close_ledger",
    "end_leftovers",
    "forget_server",
    "open_ledger",
    "record_server",
    "end_adopted",
    "is_subreaper",
    "send",
    "stat",
    "stop_subreaper",
    "table",
]

"""The ledger of started servers, for the next start after a crash.

See :mod:`kxen_transport_stdio.procs`.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import stat as stat_mod
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from .tree import KILL_WAIT_SECONDS, POLL_SECONDS, TERM_GRACE_SECONDS, Proc, Tree, send, stat, table

# --- the ledger of started servers, for the next start after a crash ----------------------------

#: at most this many ledgers are read, each at most this many entries and bytes
LEDGER_MAX_FILES = 64
LEDGER_MAX_ENTRIES = 256
LEDGER_MAX_BYTES = 256 * 1024
#: at most this many descendants and adopted orphans are kept in one ledger (all servers together)
LEDGER_MAX_MEMBERS = 1024
#: how often a host with running servers reads ``/proc`` again to note their new descendants
LEDGER_WATCH_SECONDS = 1.0

_ledger: Ledger | None = None
log = logging.getLogger("kxen.stdio")


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
    """The servers this process started and has not stopped yet, kept in one small file, with
    what each of them started (:meth:`refresh`): a descendant that left the server's session or
    group (``setsid``) is no longer found from the server after a crash, and one whose parents
    are gone is no longer found at all, so each is written down by pid and start time while this
    process sees it -- and so is every orphan this process adopted as a subreaper."""

    def __init__(self, directory: Path) -> None:
        me = stat(os.getpid())
        self.path = directory / f"{os.getpid()}-{me.start if me else 0}.json"
        self.host = {"pid": os.getpid(), "start": me.start if me else None, "marker": os.urandom(8).hex()}
        self.boot = boot_id()
        self.servers: dict[int, dict[str, Any]] = {}
        self.trees: dict[int, Tree] = {}  # server pid -> its descendants as last seen
        self.adopted: dict[int, int] = {}  # orphans adopted by this process: pid -> start time
        self._written: tuple[Any, ...] | None = None  # what the file lists (see _snapshot)

    def add(self, pid: int, start: int, command: str) -> None:
        self.servers[pid] = {"pid": pid, "start": start, "command": command}
        self.trees[pid] = Tree(pid, start)
        self._write()

    def remove(self, pid: int) -> None:
        self.trees.pop(pid, None)
        if self.servers.pop(pid, None) is not None:
            self._write()

    def refresh(self, procs: dict[int, Proc], adopted: Sequence[Proc] = ()) -> bool:
        """Note the servers' new descendants and the newly ``adopted`` orphans in ``procs`` (one
        snapshot of ``/proc``), forget those that are gone (or zombies); write the file when what
        it lists changed. Returns whether it did."""

        def running(pid: int, start: int) -> bool:
            proc = procs.get(pid)
            return proc is not None and proc.start == start and not proc.zombie

        for tree in self.trees.values():
            tree.update(procs)
            for pid, start in list(tree.members.items()):
                if not running(pid, start):
                    del tree.members[pid]
        for proc in adopted:
            if proc.pid not in self.servers and not proc.zombie:
                self.adopted[proc.pid] = proc.start
        for pid, start in list(self.adopted.items()):
            if pid in self.servers or not running(pid, start):
                del self.adopted[pid]
        if self._snapshot() == self._written:
            return False
        self._write()
        return True

    def _snapshot(self) -> tuple[Any, ...]:
        trees = tuple((pid, tuple(sorted(t.members.items()))) for pid, t in self.trees.items())
        return tuple(self.servers), trees, tuple(sorted(self.adopted.items()))

    def close(self) -> None:
        try:
            self.path.unlink()
        except OSError:
            pass

    def _write(self) -> None:
        self._written = self._snapshot()
        room = LEDGER_MAX_MEMBERS
        servers = []
        for entry in list(self.servers.values())[:LEDGER_MAX_ENTRIES]:
            tree = self.trees.get(entry["pid"])
            members = [[p, s] for p, s in tree.members.items()][:room] if tree is not None else []
            room -= len(members)
            servers.append({**entry, "tree": members} if members else entry)
        data: dict[str, Any] = {"host": self.host, "boot": self.boot, "servers": servers}
        if self.adopted and room > 0:
            data["adopted"] = [[p, s] for p, s in self.adopted.items()][:room]
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
    """Called by a transport once it read the start time of a server it started (soon after the
    spawn, before any stop); a no-op without an open ledger."""
    if _ledger is not None and start is not None:
        _ledger.add(pid, start, command)


def forget_server(pid: int) -> None:
    """Called by a transport once the server and its group are stopped."""
    if _ledger is not None:
        _ledger.remove(pid)


async def watch_ledger(adopted: Callable[[dict[int, Proc]], list[Proc]] | None = None) -> None:
    """Every :data:`LEDGER_WATCH_SECONDS` while the open ledger lists a server or an adopted
    orphan: read ``/proc`` once and :meth:`Ledger.refresh` it (``adopted``: how to find the orphans
    this process adopted, for a subreaper). Runs until cancelled; a failure ends the watch (logged),
    never the host it runs in."""
    while True:
        await anyio.sleep(LEDGER_WATCH_SECONDS)
        ledger = _ledger
        if ledger is not None and (ledger.servers or ledger.adopted):
            try:
                procs = table()
                ledger.refresh(procs, adopted(procs) if adopted is not None else [])
            except Exception as exc:  # best effort, like the ledger's writes
                log.warning("the ledger of started servers is no longer kept current: %s: %s", type(exc).__name__, exc)
                return


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


def _member(pair: Any, not_before: int) -> tuple[int, int] | None:
    """(pid, start) of a recorded descendant or adopted orphan (``[pid, start]``) that is still
    exactly that process (the boot was checked by the caller) and started after ``not_before``
    (its server's start, or the host's), else None."""
    if not (isinstance(pair, list) and len(pair) == 2 and all(type(v) is int for v in pair)):
        return None
    pid, start = pair
    if pid <= 1 or pid == os.getpid() or start < not_before:
        return None
    now = stat(pid)
    if now is None or now.zombie or now.start != start:
        return None
    return pid, start


async def end_leftovers(home: Path, grace: float = TERM_GRACE_SECONDS, wait: float = KILL_WAIT_SECONDS) -> list[int]:
    """End what hosts which are gone left running (their ledgers in ``<home>/run``): each server
    that still leads its session and group, each recorded descendant and adopted orphan that is
    still the same process (pid, start time, boot), and what each of them started since; returns
    their pids. Ledgers of hosts still running are left alone."""
    directory = _run_dir(home, create=False) if sys.platform.startswith("linux") else None
    if directory is None:
        return []
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".json") and not n.startswith("."))
    except OSError:
        return []
    targets: dict[int, Tree] = {}  # each process to end (a server, a descendant, an orphan) with its tree
    leaders: set[int] = set()  # the servers among them, whose group is signalled as a whole
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
        if data.get("boot") is None or data.get("boot") != boot_id():
            continue  # another boot: every pid in it names some other process now
        room = LEDGER_MAX_MEMBERS
        for entry in data["servers"][:LEDGER_MAX_ENTRIES]:
            found = _leftover(entry, data.get("boot"))
            if found is not None:
                leaders.add(found[0])
                targets.setdefault(found[0], Tree(found[0], found[1]))
            start = entry.get("start") if isinstance(entry, dict) else None
            members = entry.get("tree") if isinstance(entry, dict) else None
            if isinstance(start, int) and isinstance(members, list):
                for pair in members[:room]:
                    if (member := _member(pair, start)) is not None:
                        targets.setdefault(member[0], Tree(*member))
                room -= min(len(members), room)
        adopted = data.get("adopted")
        if isinstance(adopted, list):
            for pair in adopted[:room]:
                if (member := _member(pair, int(host_start))) is not None:
                    targets.setdefault(member[0], Tree(*member))
    procs_now = table() if targets else {}
    for tree in targets.values():
        tree.update(procs_now)
    roots = {pid: tree.root_start for pid, tree in targets.items()}

    def alive() -> bool:
        procs = table()
        return any(
            (pid in procs and procs[pid].start == start and not procs[pid].zombie) or targets[pid].alive(procs)
            for pid, start in roots.items()
        )

    def hit(sig: int) -> None:
        procs = table()
        for pid, tree in targets.items():
            start = roots[pid]
            if pid in leaders and _leftover({"pid": pid, "start": start, "command": ""}, boot_id()) is not None:
                try:
                    os.killpg(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            elif start is not None:
                send(pid, start, sig)  # only while the pid is still that process
            tree.update(procs)
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
    "LEDGER_WATCH_SECONDS",
    "Ledger",
    "boot_id",
    "close_ledger",
    "end_leftovers",
    "forget_server",
    "open_ledger",
    "record_server",
    "watch_ledger",
]

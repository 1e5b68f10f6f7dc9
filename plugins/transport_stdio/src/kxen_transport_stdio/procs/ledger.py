"""The ledger of started servers, for the next start after a crash.

See :mod:`kxen_transport_stdio.procs`.
"""

from __future__ import annotations

import json
import os
import signal
import stat as stat_mod
import sys
from pathlib import Path
from typing import Any

import anyio

from .tree import KILL_WAIT_SECONDS, POLL_SECONDS, TERM_GRACE_SECONDS, Tree, stat, table

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
    """Called by a transport once it read the start time of a server it started (soon after the
    spawn, before any stop); a no-op without an open ledger."""
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


__all__ = ["Ledger", "boot_id", "close_ledger", "end_leftovers", "forget_server", "open_ledger", "record_server"]

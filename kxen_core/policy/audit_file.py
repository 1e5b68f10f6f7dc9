"""The audit trail's files: JSON lines in the user's data directory, written off the event loop,
rotated (read back by :mod:`.audit_read`, for ``kxen mcp audit``).

Where: ``audit.jsonl`` in ``$KXEN_DATA_DIR``, else the platform's application data directory
(:func:`kxen_core.config.paths.data_dir`); rotated files beside it, ``audit.jsonl.1`` (the newest) to
``audit.jsonl.<max_files - 1>``. A directory kxen makes is 0700; each file is created 0600 (and set
back to 0600 when found open to others). A directory another user owns, or that others may write,
is not written to: whoever can write it could swap the file.

Appends need no lock: whole lines (at most :data:`CHUNK_BYTES` at a time) go out in one ``write(2)``
on a descriptor opened with ``O_APPEND``, which a local file system positions at the end and writes
whole, so the lines of several kxen processes never interleave (this does not hold on NFS). Lines
are bounded (:data:`MAX_LINE_BYTES`). Only a rotation takes a lock (``audit.jsonl.lock``, the
core's ``filelock``): under it the size is looked at again (another process may have rotated
already) and the files are shifted. The file is opened afresh for every batch, so a writer never
appends for long to a file another process rotated away (lines written meanwhile land in
``audit.jsonl.1``: nothing is lost).

The event loop only puts a record on a queue; one daemon thread per process ("kxen-audit") makes
its line and writes, woken once per batch (records gather for :data:`GATHER_SECONDS`). At most
:data:`MAX_QUEUED` records wait: more are dropped and counted, and the next line written says how
many. A problem (a full disk, an unwritable or unsafe directory) is a warning once per file and
kind, never a failed call. :func:`flush` waits (bounded) until what was queued before it is
written; the runtime flushes as it closes, and the process at exit.
"""

from __future__ import annotations

import atexit
import errno
import json
import logging
import os
import stat
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

log = logging.getLogger("kxen.audit")

FILE_NAME = "audit.jsonl"
VERSION = 1
#: the most records waiting for the writer; more are dropped (and counted)
MAX_QUEUED = 10_000
#: the longest line written (a record's argument shape is cut to fit)
MAX_LINE_BYTES = 8192
LOCK_SECONDS = 5.0
#: the most bytes of whole lines one write(2) appends
CHUNK_BYTES = 65536
#: how long the writer lets records gather after the first of a batch
GATHER_SECONDS = 0.05


def rotated(path: Path, index: int) -> Path:
    return path.with_name(f"{path.name}.{index}")


class Sink:
    """One audit file and its rotation bounds; shared by every runtime of the process writing it."""

    def __init__(self, path: Path, max_bytes: int, max_files: int) -> None:
        self.path = path
        self.max_bytes, self.max_files = max_bytes, max_files
        self.dropped = 0  # records dropped since the last line written (the queue was full)
        self._drop_lock = threading.Lock()
        self._warned: set[str] = set()
        self._dir_ok = False
        self._full = False

    def drop(self) -> None:
        with self._drop_lock:
            self.dropped += 1

    def warn(self, kind: str, text: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning("kxen: audit trail: %s; calls go on without it", text)

    # -- in the writer thread ------------------------------------------------------------------

    def write(self, lines: list[bytes]) -> None:
        with self._drop_lock:
            dropped, self.dropped = self.dropped, 0
        if dropped:
            lines.insert(0, encode({"v": VERSION, "event": "dropped", "time": time.time(), "count": dropped}))
        try:
            if not self._dir_ok:
                self._check_dir()
            while lines:
                lines = self._append(lines)
                if lines or self._full:
                    self._rotate()
        except _Unsafe as exc:
            self.warn("unsafe", str(exc))
        except _RotateFailed as exc:
            self.warn("rotate", f"cannot rotate {self.path}: {exc}")
        except OSError as exc:
            self._dir_ok = False  # looked at again with the next batch (removed meanwhile?)
            kind = "full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "write"
            self.warn(kind, f"cannot write {self.path}: {exc.strerror or exc}")

    def _check_dir(self) -> None:
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        if hasattr(os, "getuid"):
            st = os.stat(directory)
            if st.st_uid != os.getuid():
                raise _Unsafe(f"{directory} is owned by another user: not written to (set KXEN_DATA_DIR)")
            if stat.S_IMODE(st.st_mode) & 0o022:
                raise _Unsafe(
                    f"{directory} can be written by others (mode {stat.S_IMODE(st.st_mode):04o}): not written to; "
                    f"make it private (chmod 700 {directory}) or set KXEN_DATA_DIR"
                )
        self._dir_ok = True

    def _append(self, lines: list[bytes]) -> list[bytes]:
        """Append ``lines`` until the file reaches its bound, whole lines at most :data:`CHUNK_BYTES`
        per write; the lines not written yet (the file is to be rotated first; :attr:`_full` says
        whether it reached the bound)."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(self.path, flags, 0o600)
        try:
            st = os.fstat(fd)
            if hasattr(os, "fchmod") and stat.S_IMODE(st.st_mode) & 0o077:
                os.fchmod(fd, 0o600)
            size = st.st_size  # another process's lines count too: an estimate, checked again under the lock
            at = 0
            while at < len(lines):
                if size >= self.max_bytes:
                    self._full = True
                    return lines[at:]
                end, length = at + 1, len(lines[at])
                while end < len(lines) and length + len(lines[end]) <= CHUNK_BYTES and size + length < self.max_bytes:
                    length += len(lines[end])
                    end += 1
                data = b"".join(lines[at:end])
                if os.write(fd, data) != len(data):  # a short write on a regular file: the disk is full
                    raise OSError(errno.ENOSPC, "short write (no space left)")
                size, at = size + length, end
            self._full = size >= self.max_bytes
            return []
        finally:
            os.close(fd)

    def _rotate(self) -> None:
        import filelock

        self._full = False
        try:
            with filelock.FileLock(str(self.path) + ".lock", timeout=LOCK_SECONDS, mode=0o600):
                try:
                    if os.stat(self.path).st_size < self.max_bytes:
                        return  # another process rotated it meanwhile
                except FileNotFoundError:
                    return
                for index in range(self.max_files - 1, 1, -1):
                    older = rotated(self.path, index - 1)
                    if older.exists():
                        os.replace(older, rotated(self.path, index))
                os.replace(self.path, rotated(self.path, 1))
        except (OSError, filelock.Timeout) as exc:
            raise _RotateFailed(getattr(exc, "strerror", None) or str(exc)) from None


class _Unsafe(Exception):
    pass


class _RotateFailed(Exception):
    pass


def encode(record: dict[str, Any]) -> bytes:
    """One record as one line (ASCII JSON), at most :data:`MAX_LINE_BYTES`: a shape too large is cut."""
    when = record.get("time")
    if isinstance(when, float):
        record["time"] = iso(when)
    line = json.dumps(record, separators=(",", ":"), default=_plain)
    if len(line) >= MAX_LINE_BYTES and "args" in record:
        record["args"], record["argsCut"] = "cut", True
        line = json.dumps(record, separators=(",", ":"), default=_plain)
    if len(line) >= MAX_LINE_BYTES:  # still too long (long reasons): what identifies the call, and that it was cut
        kept = {k: record[k] for k in _ESSENTIAL if k in record}
        line = json.dumps({**kept, "cut": True}, separators=(",", ":"), default=_plain)[: MAX_LINE_BYTES - 1]
    return (line + "\n").encode("ascii")


#: what a record too long even without its argument shape keeps
_ESSENTIAL = ("v", "event", "id", "time", "pid", "server", "identity", "tool", "method", "pin", "verdict", "sent")


def _plain(value: Any) -> Any:
    """What the record's objects are in JSON: votes, an approval's answer."""
    plain = getattr(value, "audit_json", None)
    if plain is not None:
        return plain()
    return f"<{type(value).__name__}>"


_second: tuple[int, str] = (-1, "")


def iso(when: float) -> str:
    """An epoch time as ISO 8601 UTC with milliseconds (``2026-05-01T10:00:00.123Z``); the text of
    the last second is kept (the writer thread's: one at a time)."""
    global _second
    whole = int(when)
    if whole != _second[0]:
        _second = (whole, datetime.fromtimestamp(whole, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{_second[1]}.{int((when - whole) * 1000):03d}Z"


# -- the writer thread -------------------------------------------------------------------------

#: what waits for the writer: (sink, format, payload); (None, None, event) is a flush
_items: deque[tuple[Any, Any, Any]] = deque()
_wake = threading.Event()  # set by the first record after the writer emptied the queue
_hurry = threading.Event()  # a flush waits: no gathering
_started = threading.Lock()
_thread: threading.Thread | None = None
_sinks: dict[Path, Sink] = {}


def sink(directory: Path, max_bytes: int, max_files: int) -> Sink:
    """The process's sink for ``directory`` (its bounds set to these)."""
    path = directory / FILE_NAME
    found = _sinks.get(path)
    if found is None:
        found = _sinks[path] = Sink(path, max_bytes, max_files)
    found.max_bytes, found.max_files = max_bytes, max_files
    return found


def submit(target: Sink, payload: Any, format: Callable[[Any], str | None] | None = None) -> None:
    """Queue a record for ``target``: ``format(payload)`` gives its line in the writer thread, or
    None for none (no format: ``payload`` is a record, encoded as JSON). No I/O here, no lock taken but once per
    batch; dropped and counted when the queue is full."""
    if _thread is None:
        _start()
    if len(_items) >= MAX_QUEUED:
        target.drop()
        return
    _items.append((target, format, payload))
    if not _wake.is_set():
        _wake.set()


def _start() -> None:
    global _thread
    with _started:
        if _thread is None:
            thread = threading.Thread(target=_run, name="kxen-audit", daemon=True)
            thread.start()
            atexit.register(flush, 2.0)
            _thread = thread


def _run() -> None:
    while True:
        _wake.wait()
        _hurry.wait(GATHER_SECONDS)  # let a burst of calls gather into one write
        _hurry.clear()
        _wake.clear()  # before the queue is emptied: a record put from now on sets it again
        groups: dict[Sink, list[bytes]] = {}
        done: list[threading.Event] = []
        while _items:
            target, format, payload = _items.popleft()
            if target is None:
                done.append(payload)
                continue
            try:
                if format is None:
                    data = encode(payload)
                else:
                    line = format(payload)
                    if line is None:  # nothing to write (written with another record)
                        continue
                    data = (line + "\n").encode("ascii") if len(line) < MAX_LINE_BYTES else encode(json.loads(line))
                groups.setdefault(target, []).append(data)
            except Exception as exc:  # never let the writer die: say it once
                target.warn("bug", f"a record for {target.path} could not be made: {type(exc).__name__}")
        for target, lines in groups.items():
            try:
                target.write(lines)
            except Exception as exc:
                target.warn("bug", f"writing {target.path} failed: {type(exc).__name__}")
        for event in done:
            event.set()


def flush(timeout: float = 5.0) -> bool:
    """Wait at most ``timeout`` seconds until every record queued before this call is written
    (blocking: call it from a worker thread or at exit). True when it was."""
    if _thread is None:
        return True
    event = threading.Event()
    _items.append((None, None, event))
    _hurry.set()
    _wake.set()
    return event.wait(timeout)


__all__ = ["FILE_NAME", "MAX_LINE_BYTES", "Sink", "flush", "iso", "rotated", "sink", "submit"]

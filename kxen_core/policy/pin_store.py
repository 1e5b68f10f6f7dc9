"""The pin store: ``tool-pins.json`` in kxen's data directory (:func:`kxen_core.config.paths.data_dir`).

One file for every server identity the user's kxen ever listed (:mod:`.pins` decides what goes in):
mode 0600 in a 0700 directory, read only when its mtime, ctime, size or inode changed (what this
process wrote last is kept as it wrote it, stamped after the write), written
under a cross-process file lock to a temporary file in the same directory, fsynced and renamed
over the old one (then the directory fsynced), so a killed process leaves the old file or the new
one, never half of one, and two processes that write at once each see the other's pins.

The document::

    {"version": 1,
     "servers": {"<identity digest>": {
         "server": "demo", "identity": {...}, "seen": 1733000000,
         "tools":   {"echo": {"digest": "...", "definition": {...}, "accepted": 1733000000}},
         "pending": {"echo": {"digest": "...", "definition": {...}, "since": 1733000000, "kind": "changed"}}}}}

A file of another version, one that is not JSON, one too large, one another user owns, or in a
directory others can write is a :class:`PinStoreError` naming the file: kxen then holds what it
cannot check (fail closed), it never starts over by itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kxen_core.config.paths import data_dir

VERSION = 1
FILE_NAME = "tool-pins.json"
#: the most bytes of the store read (a larger file is refused, not parsed)
MAX_FILE_BYTES = 8 * 1024 * 1024
#: how long a write waits for another process's lock (seconds)
LOCK_SECONDS = 10.0
#: the most server identities kept: beyond it, those listed longest ago are dropped
MAX_SERVERS = 500
#: the most leftover temporary files (of writes a killed process left) one write removes
MAX_LEFTOVERS = 100
#: the end of a write's temporary file (``.tool-pins.json.<random>.tmp``), by which leftovers are found
TMP_SUFFIX = ".tmp"

T = TypeVar("T")


class PinStoreError(Exception):
    """The pin store cannot be used; the text names the file and the rule."""


def _empty() -> dict[str, Any]:
    return {"version": VERSION, "servers": {}}


class PinStore:
    """One store file (one object per file in a process: :func:`pin_store`)."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self.path = self.dir / FILE_NAME
        self._stamp: tuple[int, int, int, int] | None = None
        self._doc: dict[str, Any] = _empty()
        self._thread_lock = threading.Lock()  # one writer of this process at a time (its threads, its loops)
        self._file_lock: Any = None

    # -- reading -------------------------------------------------------------------------------

    def _check_dir(self) -> None:
        try:
            st = os.stat(self.dir)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise PinStoreError(f"{self.dir}: cannot be read ({exc.strerror})") from None
        if not hasattr(os, "getuid"):
            return  # no POSIX modes (Windows: the profile directory's ACL applies)
        if st.st_uid != os.getuid():
            raise PinStoreError(
                f"the pin store directory {self.dir} is owned by another user: refused "
                "(set KXEN_DATA_DIR to a directory of your own)"
            )
        if stat.S_IMODE(st.st_mode) & 0o022:
            raise PinStoreError(
                f"the pin store directory {self.dir} can be written by others (mode {stat.S_IMODE(st.st_mode):04o}): "
                f"refused; make it private (chmod 700 {self.dir}) or set KXEN_DATA_DIR to a private directory"
            )

    def document(self) -> dict[str, Any]:
        """The parsed file (cached: one ``stat`` while it is unchanged); an empty document when
        there is none. Raises :class:`PinStoreError` for a file kxen must not use."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._check_dir()
            self._stamp, self._doc = None, _empty()
            return self._doc
        except OSError as exc:
            raise PinStoreError(f"{self.path}: cannot be read ({exc.strerror})") from None
        stamp = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
        if stamp == self._stamp:
            return self._doc
        self._doc = self._read(st)
        self._stamp = stamp
        return self._doc

    def _fresh(self) -> dict[str, Any]:
        """The file parsed now, not cached (a document of the caller's own to change)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._check_dir()
            return _empty()
        except OSError as exc:
            raise PinStoreError(f"{self.path}: cannot be read ({exc.strerror})") from None
        return self._read(st)

    def _read(self, st: os.stat_result) -> dict[str, Any]:
        self._check_dir()
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise PinStoreError(f"{self.path}: owned by another user: refused")
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(self.path, 0o600)  # its content is not secret, but nobody else may change it
        if st.st_size > MAX_FILE_BYTES:
            raise PinStoreError(f"{self.path}: larger than {MAX_FILE_BYTES} bytes: refused")
        return self._parse(self.path.read_bytes()[: MAX_FILE_BYTES + 1])

    def _parse(self, raw: bytes) -> dict[str, Any]:
        moved = "move it away to pin every server again from its next listing"
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise PinStoreError(f"{self.path}: not a JSON object (a damaged file?); {moved}") from None
        if not isinstance(doc, dict):
            raise PinStoreError(f"{self.path}: not a JSON object; {moved}")
        version = doc.get("version")
        if version != VERSION:
            raise PinStoreError(
                f"{self.path}: version {version!r} is not one this kxen knows ({VERSION}): refused "
                f"(a newer kxen wrote it? use that one, or {moved})"
            )
        if not isinstance(doc.get("servers"), dict) or not all(isinstance(v, dict) for v in doc["servers"].values()):
            raise PinStoreError(f"{self.path}: 'servers' must be an object of objects; {moved}")
        return doc

    def forget_cache(self) -> None:
        self._stamp = None

    # -- writing -------------------------------------------------------------------------------

    def _lock(self) -> Any:
        if self._file_lock is None:
            import filelock

            self._file_lock = filelock.FileLock(str(self.path) + ".lock", mode=0o600, thread_local=False)
        return self._file_lock

    def update_if(self, change: Callable[[dict[str, Any]], tuple[bool, T]], *, seconds: float = LOCK_SECONDS) -> T:
        """Under the locks, ``change(doc) -> (write, result)`` on a fresh copy of the document; the
        copy is written (atomically) when ``write`` is true. Returns ``result``. A lock not had
        within ``seconds`` is a :class:`PinStoreError`; so is a store kxen must not use."""
        import filelock

        if not self._thread_lock.acquire(timeout=seconds):
            raise PinStoreError(f"{self.path} stayed locked (by this process) for {seconds:.0f} s")
        try:
            self._check_dir()
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            lock = self._lock()
            try:
                lock.acquire(timeout=seconds)
            except filelock.Timeout:
                raise PinStoreError(f"{self.path} stayed locked for {seconds:.0f} s ({lock.lock_file})") from None
            try:
                self.forget_cache()
                # read again under the lock, parsed once into a document of its own: the cache
                # (another reader's) changes only once written
                doc = self._fresh()
                write, result = change(doc)
                if write:
                    self._remove_leftovers()
                    _trim(doc)
                    self._write(doc)
                    self._keep(doc)
                return result
            finally:
                lock.release()
        finally:
            self._thread_lock.release()

    def _keep(self, doc: dict[str, Any]) -> None:
        """After this process wrote ``doc`` (under the file lock: no other kxen wrote since), it is
        the cache, stamped with the file as it is now: the next read is one ``stat``, not a parse.
        Another writer's file has another inode, or another time or size: read again."""
        try:
            st = os.stat(self.path)
        except OSError:
            self.forget_cache()
            return
        self._doc = doc  # before the stamp: a reader between the two sees the old stamp, and reads the file
        self._stamp = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)

    def _write(self, doc: dict[str, Any]) -> None:
        from kxen_core.config.files import write_atomic  # on a write only

        data = _fit(doc)
        if len(data) > MAX_FILE_BYTES:
            raise PinStoreError(f"{self.path}: the pins would take more than {MAX_FILE_BYTES} bytes: not written")
        write_atomic(self.path, data, mode=0o600, suffix=TMP_SUFFIX)

    def _remove_leftovers(self) -> None:
        """The temporary files of writes a killed process left (called under the file lock)."""
        with contextlib.suppress(OSError):
            for n, path in enumerate(self.dir.glob(f".tool-pins.*{TMP_SUFFIX}")):
                if n >= MAX_LEFTOVERS:
                    break
                with contextlib.suppress(OSError):
                    path.unlink()

    async def aupdate_if(self, change: Callable[[dict[str, Any]], tuple[bool, T]]) -> T:
        """:meth:`update_if` in a worker thread: waiting for a lock and the fsync never block the loop."""
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.update_if, change)


def _encode(doc: dict[str, Any]) -> bytes:
    # compact: the C encoder (an indent takes Python's own, many times slower on 10,000 tools);
    # ASCII: a lone surrogate a server sent is written as its escape, so the file reads back
    return json.dumps(doc, separators=(",", ":")).encode("ascii")


def _fit(doc: dict[str, Any]) -> bytes:
    """``doc`` encoded within :data:`MAX_FILE_BYTES` when it can be: first the definitions kept
    for diffs go (digests stay), then whole identities, those listed longest ago first; the one
    listed last stays. Returns the encoding (longer than the bound only when that one alone is)."""
    data = _encode(doc)
    if len(data) <= MAX_FILE_BYTES:
        return data
    servers = doc["servers"]
    by_age = sorted(servers, key=lambda k: servers[k].get("seen") if isinstance(servers[k].get("seen"), int) else 0)
    for key in by_age:
        for part in ("tools", "pending"):
            for record in (servers[key].get(part) or {}).values():
                if isinstance(record, dict):
                    record["definition"] = None
    data = _encode(doc)
    for key in by_age[:-1]:
        if len(data) <= MAX_FILE_BYTES:
            break
        del servers[key]
        data = _encode(doc)
    return data


def _trim(doc: dict[str, Any]) -> None:
    """At most :data:`MAX_SERVERS` identities: those listed longest ago go first."""
    servers = doc["servers"]
    if len(servers) <= MAX_SERVERS:
        return
    oldest = sorted(servers, key=lambda k: servers[k].get("seen") if isinstance(servers[k].get("seen"), int) else 0)
    for key in oldest[: len(servers) - MAX_SERVERS]:
        del servers[key]


#: the stores of this process by directory, the last few used (one per file: its cached document)
_STORES: dict[Path, PinStore] = {}
_STORES_LOCK = threading.Lock()
MAX_STORES = 16


def pin_store(directory: Path | None = None) -> PinStore:
    """The process's one :class:`PinStore` for ``directory`` (default :func:`data_dir`, read at
    each call: a test or a host may point ``KXEN_DATA_DIR`` elsewhere)."""
    where = Path(directory) if directory is not None else data_dir()
    with _STORES_LOCK:
        store = _STORES.pop(where, None)
        if store is None:
            store = PinStore(where)
            while len(_STORES) >= MAX_STORES:  # another object for a dropped one's file still locks it
                del _STORES[next(iter(_STORES))]
        _STORES[where] = store  # the most recent last
        return store


def now() -> int:
    return int(time.time())


__all__ = [
    "FILE_NAME",
    "LOCK_SECONDS",
    "MAX_FILE_BYTES",
    "MAX_SERVERS",
    "VERSION",
    "PinStore",
    "PinStoreError",
    "now",
    "pin_store",
]

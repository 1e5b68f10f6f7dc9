"""The token store: ``mcp-oauth.json`` in the application data directory.

It is a local file with restricted permissions (0600, in a 0700 directory), not an encrypted
vault: anyone who can read it as you can use its tokens. Every update is written to a temporary
file in the same directory, fsynced, renamed over the old one, and the directory fsynced, under a
cross-process file lock, so a killed process leaves the old file or the new one, never half of one.

Tokens are bound to (config scope, server name, canonical resource URL, home: see
:mod:`._binding`). Entries of an older shape (keyed by server name or by origin only, or bound to
no home) are never used: :meth:`TokenStore.older_shape` says why.
Reads are cached and the file is read again only when its mtime, ctime (a chmod), size or inode
changed.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import filelock

from kxen_core.config.paths import data_dir  # the core's one data directory (re-exported)

from ._binding import Key
from ._records import ClientRecord, TokenRecord

VERSION = 1
FILE_NAME = "mcp-oauth.json"
#: the most bytes of the store read (a larger file is refused, not parsed)
MAX_FILE_BYTES = 4 * 1024 * 1024
LOCK_SECONDS = 30.0
#: the most leftover temporary files (of writes a killed process left) one write removes
MAX_LEFTOVERS = 100
#: while there is no store file, a request looks for one at most this often (seconds)
LOOK_SECONDS = 0.2


class StoreError(Exception):
    """The store cannot be used; the text names the file and the rule (never a secret)."""


async def acquire(lock: filelock.BaseFileLock, seconds: float, what: str) -> None:
    """Take a file lock without blocking the event loop: poll, bounded by ``seconds``."""
    delay = 0.01
    with anyio.move_on_after(seconds):
        while True:
            try:
                lock.acquire(timeout=0)
                return
            except filelock.Timeout:
                await anyio.sleep(delay)
                delay = min(delay * 2, 0.2)
    raise StoreError(f"{what} stayed locked for {seconds:.0f} s ({lock.lock_file})")


class TokenStore:
    """One store file; ``diagnostic`` receives what the user should know (a repaired mode)."""

    def __init__(self, directory: Path | None = None, *, diagnostic: Callable[[str], None] = lambda _: None) -> None:
        self.dir = Path(directory) if directory is not None else data_dir()
        self.path = self.dir / FILE_NAME
        self.diagnostic = diagnostic
        #: repairs (a mode set back to 0600) not told yet, and the last ones told: the engine
        #: hands them to the server's ``notice`` or the sign-in's
        self.repairs: list[str] = []
        self.told: list[str] = []
        self._stamp: tuple[int, int, int, int] | None = None
        self._doc: dict[str, Any] = {}
        self._index: dict[Key, TokenRecord] | None = None
        self._looked = -LOOK_SECONDS
        self._mutex = anyio.Lock()

    # -- reading -------------------------------------------------------------------------------

    def _check_mode(self, st: os.stat_result) -> None:
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise StoreError(f"{self.path}: owned by another user: refused")
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(self.path, 0o600)
            said = (
                f"the OAuth token store {self.path} was open to others (mode {stat.S_IMODE(st.st_mode):04o}): "
                "kxen set it to 0600"
            )
            if len(self.repairs) < 16:
                self.repairs.append(said)
            self.diagnostic(said)

    def _check_dir(self) -> None:
        """Refuse a store directory another user owns or others can write: whoever can write it
        can swap the store file (tokens kxen would send) or plant one. Checked before every read
        of the file and every write. A missing directory is fine (the first write makes it 0700)."""
        try:
            st = os.stat(self.dir)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreError(f"{self.dir}: cannot be read ({exc.strerror})") from None
        if not hasattr(os, "getuid"):
            return  # no POSIX modes to check (Windows: the profile directory's ACL applies)
        if st.st_uid != os.getuid():
            raise StoreError(
                f"the OAuth token store directory {self.dir} is owned by another user: refused "
                "(set KXEN_DATA_DIR to a directory of your own)"
            )
        if stat.S_IMODE(st.st_mode) & 0o022:
            raise StoreError(
                f"the OAuth token store directory {self.dir} can be written by others "
                f"(mode {stat.S_IMODE(st.st_mode):04o}): refused; make it private (chmod 700 {self.dir}) "
                "or set KXEN_DATA_DIR to a private directory"
            )

    def document(self) -> dict[str, Any]:
        """The parsed file (cached; re-read when it changed). ``{}`` when there is none.

        Each call costs one ``stat``; while there is no file at all (the common case of a host
        whose servers need no sign-in) at most one every :data:`LOOK_SECONDS`. Whatever must see
        another process's latest write at once (a refresh, a 401) calls :meth:`forget_cache`.
        """
        now = time.monotonic()
        if self._stamp is None and now - self._looked < LOOK_SECONDS:
            return self._doc
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._stamp, self._doc, self._index = None, {}, None
            self._check_dir()  # before anything is registered or stored there
            self._looked = now  # only a missing file is looked for less often: an error is raised again
            return self._doc
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot be read ({exc.strerror})") from None
        stamp = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)  # ctime: a chmod too
        if stamp == self._stamp:
            return self._doc
        self._check_dir()
        self._check_mode(st)
        if st.st_size > MAX_FILE_BYTES:
            raise StoreError(f"{self.path}: larger than {MAX_FILE_BYTES} bytes: refused")
        try:
            raw = self.path.read_bytes()[:MAX_FILE_BYTES]
            doc = json.loads(raw.decode("utf-8")) if raw.strip() else {}
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            raise StoreError(f"{self.path}: not a JSON object; move it away to sign in again") from None
        if not isinstance(doc, dict):
            raise StoreError(f"{self.path}: not a JSON object; move it away to sign in again")
        version = doc.get("version")
        if version is not None and version != VERSION:
            raise StoreError(f"{self.path}: version {version!r} is not one this kxen knows ({VERSION}): refused")
        self._stamp, self._doc, self._index = stamp, doc, None
        return doc

    def tokens(self) -> list[TokenRecord]:
        doc = self.document()
        if doc.get("version") != VERSION or not isinstance(doc.get("tokens"), list):
            return []
        out = []
        for item in doc["tokens"][:10000]:
            with contextlib.suppress(ValueError):
                out.append(TokenRecord.from_json(item))
        return out

    def token(self, key: Key) -> TokenRecord | None:
        """The record bound to exactly ``key`` (cached until the file changes: one stat per call)."""
        self.document()
        if self._index is None:
            self._index = {r.key: r for r in self.tokens()}
        return self._index.get(key)

    def dpop_key(self, key: Key) -> dict[str, Any] | None:
        """The private JWK of entry ``key``'s DPoP key pair (see :mod:`._dpop`), or None."""
        doc = self.document()
        items = doc.get("dpopKeys") if doc.get("version") == VERSION else None
        for item in items[:10000] if isinstance(items, list) else ():
            if _same_key(item, key) and isinstance(item.get("jwk"), dict):
                jwk: dict[str, Any] = item["jwk"]
                return jwk
        return None

    def forget_cache(self) -> None:
        """Read the file again at the next look (another process may have changed it within the
        file system's timestamp granularity, or since the last look)."""
        self._stamp = None
        self._looked = -LOOK_SECONDS

    def clients(self) -> list[ClientRecord]:
        doc = self.document()
        if doc.get("version") != VERSION or not isinstance(doc.get("clients"), list):
            return []
        out = []
        for item in doc["clients"][:1000]:
            with contextlib.suppress(ValueError):
                out.append(ClientRecord.from_json(item))
        return out

    def client(self, issuer: str) -> ClientRecord | None:
        for record in self.clients():
            if record.issuer == issuer:
                return record
        return None

    def older_shape(self, server: str, resource: str, origin: str) -> str | None:
        """Why a stored sign-in for ``server`` cannot be used, when the store holds one in an
        older shape (keyed by the server name or the origin alone) or bound to another URL."""
        doc = self.document()
        old = doc if doc.get("version") is None else doc.get("legacy")
        if isinstance(old, dict):
            for holder in (old, *(v for v in old.values() if isinstance(v, dict))):
                if server in holder or origin in holder or origin + "/" in holder:
                    return (
                        f"the stored sign-in for {server!r} is in an older shape, keyed by server name or origin "
                        "only, and is not used (tokens are now bound to the exact server URL); sign in again"
                    )
        if doc.get("version") == VERSION and isinstance(doc.get("tokens"), list):
            for item in doc["tokens"][:10000]:
                if (
                    isinstance(item, dict)
                    and item.get("server") == server
                    and ("resource" not in item or "origin" in item or "configScope" not in item)
                ):
                    return (
                        f"the stored sign-in for {server!r} is not bound to a config scope and exact URL "
                        "(an older shape) and is not used; sign in again"
                    )
                if isinstance(item, dict) and item.get("server") == server and "home" not in item:
                    return (
                        f"the stored sign-in for {server!r} is not bound to a kxen home (an older shape: "
                        "another home may have made it) and is not used; sign in again"
                    )
        return None

    def tell(self, notice: Callable[[str], None] | None, *, every: bool = False) -> None:
        """Hand the repairs not told yet to ``notice`` (None: keep them); with ``every`` (a
        sign-in a person watches) the last repairs told before too."""
        if notice is None or not (self.repairs or every):
            return  # the common case, on every request: nothing to tell
        fresh, self.repairs = self.repairs, []
        self.told.extend(m for m in fresh if m not in self.told)
        del self.told[:-16]
        for message in list(self.told) if every else fresh:
            notice(message)

    # -- writing -------------------------------------------------------------------------------

    def _write(self, doc: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".mcp-oauth.", suffix=".tmp")  # created 0600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        with contextlib.suppress(OSError):  # not every platform can open a directory
            dfd = os.open(self.dir, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)

    def _remove_leftovers(self) -> None:
        """Remove the temporary files of writes that a killed process left behind. Called with the
        store's lock held, when no other process writes: every such file is a leftover. Bounded."""
        with contextlib.suppress(OSError):
            for n, path in enumerate(self.dir.glob(".mcp-oauth.*.tmp")):
                if n >= MAX_LEFTOVERS:
                    break
                with contextlib.suppress(OSError):
                    path.unlink()

    @contextlib.asynccontextmanager
    async def locked(self) -> AsyncIterator[dict[str, Any]]:
        """Hold the store's lock and yield its fresh document to change in place; it is written
        when the block ends without an exception."""
        async with self._mutex:
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._check_dir()
            lock = filelock.FileLock(str(self.path) + ".lock", mode=0o600, thread_local=False)
            await acquire(lock, LOCK_SECONDS, str(self.path))
            try:
                self.forget_cache()  # read what is on disk now
                self._remove_leftovers()
                current = self.document()
                if current.get("version") == VERSION:
                    doc = json.loads(json.dumps(current))
                else:
                    doc = {"version": VERSION, "tokens": [], "clients": []}
                    if current:
                        doc["legacy"] = current  # never used; kept so the reason can be told
                doc.setdefault("tokens", [])
                doc.setdefault("clients", [])
                yield doc
                self._write(doc)
                self.forget_cache()
            finally:
                lock.release()

    async def put_token(self, record: TokenRecord) -> None:
        async with self.locked() as doc:
            doc["tokens"] = [t for t in doc["tokens"] if not _same_key(t, record.key)] + [record.to_json()]

    async def drop_tokens(self, config_scope: str, server: str, home: str) -> bool:
        """Forget ``server``'s tokens of that scope in home ``home`` (and its older-shape ones,
        which no home can use); another home's stay."""
        async with self.locked() as doc:
            before = len(doc["tokens"])
            doc["tokens"] = [
                t
                for t in doc["tokens"]
                if not (
                    isinstance(t, dict)
                    and t.get("server") == server
                    and t.get("configScope", config_scope) == config_scope
                    and t.get("home", home) == home
                )
            ]
            doc["dpopKeys"] = [
                k
                for k in doc.get("dpopKeys", [])
                if not (
                    isinstance(k, dict)
                    and (k.get("configScope"), k.get("server"), k.get("home")) == (config_scope, server, home)
                )
            ]
            legacy = doc.get("legacy")
            dropped_legacy = False
            if isinstance(legacy, dict) and server in legacy:
                del legacy[server]
                dropped_legacy = True
            return len(doc["tokens"]) < before or dropped_legacy

    async def put_dpop_key(self, key: Key, jwk: dict[str, Any]) -> None:
        async with self.locked() as doc:
            keys = [k for k in doc.get("dpopKeys", []) if not _same_key(k, key)]
            scope, server, resource, home = key
            item = {"configScope": scope, "server": server, "resource": resource, "home": home, "jwk": jwk}
            doc["dpopKeys"] = [*keys, item]

    async def drop_tokens_for(self, key: Key) -> None:
        async with self.locked() as doc:
            doc["tokens"] = [t for t in doc["tokens"] if not _same_key(t, key)]

    async def put_client(self, record: ClientRecord) -> None:
        async with self.locked() as doc:
            doc["clients"] = [
                c for c in doc["clients"] if not (isinstance(c, dict) and c.get("issuer") == record.issuer)
            ]
            doc["clients"].append(record.to_json())

    async def drop_client(self, issuer: str, client_id: str | None = None) -> None:
        async with self.locked() as doc:
            doc["clients"] = [
                c
                for c in doc["clients"]
                if not (isinstance(c, dict) and c.get("issuer") == issuer and client_id in (None, c.get("clientId")))
            ]

    def refresh_lock(self, key: Key) -> filelock.BaseFileLock:
        """The cross-process lock that one refresh of entry ``key`` holds (a file beside the store)."""
        import hashlib

        digest = hashlib.sha256("\x1f".join(key).encode()).hexdigest()[:16]
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._check_dir()
        return filelock.FileLock(str(self.dir / f"mcp-oauth-{digest}.lock"), mode=0o600, thread_local=False)


def _same_key(item: Any, key: Key) -> bool:
    return (
        isinstance(item, dict)
        and (item.get("configScope"), item.get("server"), item.get("resource"), item.get("home")) == key
    )

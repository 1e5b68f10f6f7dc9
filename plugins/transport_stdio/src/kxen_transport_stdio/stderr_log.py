"""Each stdio server's stderr, kept on disk: ``<home>/logs/<server>.stderr.log``.

What a server writes to stderr is its own log; status shows only its tail. The full text goes to a
file per server in the kxen home (the directory 0700, the file 0600, neither followed when it is a
symlink), rotated at :data:`MAX_BYTES` with one older file kept (``.1``), so a chatty or hostile
server costs at most twice that on disk. A start is marked with a line naming the time, pid and
command, written with the first bytes the server sends (a quiet server costs no file work). A log
that cannot be written is given up with one diagnostic; the server runs on.
"""

from __future__ import annotations

import functools
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

#: the most bytes one log file grows to before it is rotated
MAX_BYTES = 1024 * 1024


def _private_dir(path: Path) -> bool:
    """``path`` exists (made 0700 when missing) as a real directory of ours not writable by others."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def _start_line(at: float, pid: int, command: str) -> bytes:
    when = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(at))
    return f"--- {when} started pid {pid}: {command}\n".encode("utf-8", "replace")


class StderrLog:
    def __init__(self, home: Path, server: str, diag: Callable[[str], None], max_bytes: int | None = None) -> None:
        self._home, self._server = home, server
        self.max_bytes = max_bytes or MAX_BYTES
        self._diag = diag
        self._fd: int | None = None
        self._size = 0
        self._broken = False
        self._start: tuple[float, int, str] | None = None  # (time, pid, command) of the start line

    @functools.cached_property
    def path(self) -> Path:
        return Path(self._home) / "logs" / f"{self._server}.stderr.log"

    def start(self, pid: int, command: str) -> None:
        """Mark a start; its line is made and written with the first bytes the server sends."""
        self._start = (time.time(), pid, command)

    def write(self, chunk: bytes) -> None:
        if self._broken:
            return
        if self._start is not None:
            chunk, self._start = _start_line(*self._start) + chunk, None
        try:
            if self._fd is None:
                self._open()
            elif self._size + len(chunk) > self.max_bytes:
                self._rotate()
            assert self._fd is not None
            os.write(self._fd, chunk[-self.max_bytes :])
            self._size += min(len(chunk), self.max_bytes)
        except OSError as exc:
            self._broken = True
            self.close()
            self._diag(f"stderr log {self.path} given up: {exc.strerror or exc}")

    def _open(self) -> None:
        if not _private_dir(self.path.parent):
            raise OSError(f"{self.path.parent} is not a private directory of this user")
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        st = os.fstat(self._fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{self.path} is not a regular file")
        self._size = st.st_size

    def _rotate(self) -> None:
        self.close()
        os.replace(self.path, self.path.with_name(self.path.name + ".1"))
        self._open()

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None


__all__ = ["MAX_BYTES", "StderrLog"]

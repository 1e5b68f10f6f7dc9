"""Reading one config file safely: a regular file, bounded, the user's own where it must be.

:func:`read_limited` is the one way kxen reads a config file (the loader, settings writes and server
edits all use it); :func:`unsafe_owner` is the rule for files that hold the user's own settings.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a config file larger than this is refused, not read


class UnreadableFile(Exception):
    """A file kxen refuses to read: not a regular file, too large, or not readable. The message is
    the rule, without the file's name (callers add it)."""


def read_limited(path: Path | str, limit: int = MAX_CONFIG_BYTES, *, private: bool = False) -> bytes:
    """The bytes of ``path``, which must be a regular file of at most ``limit`` bytes.

    The one way kxen reads a file: opened without blocking (a FIFO or a device never stalls the
    open), checked on the open descriptor (``S_ISREG`` from ``fstat``, so a swap after the check is
    still caught), and read with a hard bound of ``limit + 1`` bytes -- ``st_size`` is never trusted
    (it is 0 for ``/dev/zero`` and can change while reading). Symlinks are followed to their target,
    which must itself be a regular file. With ``private`` (the user's own settings and servers),
    the file must also be owned by the user and writable by nobody else (:func:`unsafe_owner`).
    Raises ``FileNotFoundError`` for a missing file and :class:`UnreadableFile` for everything else."""
    try:
        # refuse devices, FIFOs and sockets before opening them at all (opening a device can act)
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise UnreadableFile(_not_regular(os.stat(path).st_mode))
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        if isinstance(exc, OSError) and exc.errno == 2:
            raise FileNotFoundError(exc.errno, exc.strerror) from None
        raise UnreadableFile(f"cannot be read: {_why(exc)}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between the check and the open
            raise UnreadableFile(_not_regular(st.st_mode))
        if private:
            rule = unsafe_owner(st)
            if rule:
                raise UnreadableFile(rule)
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise UnreadableFile(f"larger than {limit} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise UnreadableFile(f"cannot be read: {_why(exc)}") from None
    finally:
        os.close(fd)


def read_text(path: Path | str, *, private: bool = False, missing: str = "no such file") -> str:
    """The UTF-8 text of ``path`` read with :func:`read_limited` (a leading BOM dropped); a
    ValueError naming the rule (``missing`` when there is no such file), never the file's content."""
    try:
        raw = read_limited(path, private=private)
    except FileNotFoundError:
        raise ValueError(missing) from None
    except UnreadableFile as exc:
        raise ValueError(str(exc)) from None
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (invalid byte at offset {exc.start})") from None


def unsafe_owner(st: os.stat_result) -> str | None:
    """Why a file with this ``stat`` may not hold the user's own settings or servers, or None.

    Whoever can write ``config.toml`` can grant trust and turn remote MCP on, and whoever can write
    the user's ``mcp.json`` chooses what runs as the user: so these are refused (not just warned
    about) when another user owns them, when anyone may write them, or when a group other than
    the user's own may write them. (Where there are no POSIX owners, nothing is checked.)"""
    if not hasattr(os, "geteuid"):  # pragma: no cover - not POSIX
        return None
    mode = stat.S_IMODE(st.st_mode)
    fix = "(chmod go-w, or chown it to yourself)"
    if st.st_uid != os.geteuid():
        return f"refused: owned by another user (uid {st.st_uid}) {fix}"
    if mode & stat.S_IWOTH:
        return f"refused: writable by every user (mode {mode:04o}) {fix}"
    if mode & stat.S_IWGRP and st.st_gid != os.getegid():
        return f"refused: writable by group {st.st_gid}, not your own group (mode {mode:04o}) {fix}"
    return None


def _why(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else None) or "invalid path"


def _not_regular(mode: int) -> str:
    what = (
        "a directory" if stat.S_ISDIR(mode)
        else "a FIFO" if stat.S_ISFIFO(mode)
        else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a socket" if stat.S_ISSOCK(mode)
        else "not a regular file"
    )  # fmt: skip
    return f"cannot be read: must be a regular file (it is {what})"


@contextmanager
def locked(path: Path, lock_path: Path, timeout: float) -> Iterator[None]:
    """Hold ``lock_path`` (a cross-process lock) for a read-modify-write of ``path``; a lock held
    elsewhere for longer than ``timeout`` seconds, or one that cannot be made, is a ConfigError."""
    import filelock  # only the commands that change files need it

    from kxen_core.errors import ConfigError

    lock = filelock.FileLock(str(lock_path), timeout=timeout)
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except filelock.Timeout:
        raise ConfigError(
            [f"{path}: (file): cannot be updated: {lock_path} is held by another process (waited {timeout:g} s)"]
        ) from None
    except OSError as exc:
        raise ConfigError(
            [f"{path}: (file): cannot be updated: cannot lock {lock_path}: {exc.strerror or exc}"]
        ) from None
    try:
        yield
    finally:
        lock.release()


def write_atomic(
    target: Path, text: str | bytes, *, mode: int | None = None, new_mode: int = 0o600, suffix: str = ""
) -> None:
    """Replace the content of ``target`` atomically: a temp file next to it (``.NAME.<random>`` and
    ``suffix``, created 0600), fsync, rename, and the directory synced so the rename survives a
    crash. The file gets ``mode``; without one it keeps its mode minus group and world write
    (``new_mode`` when it is new). ``text`` is written as UTF-8; bytes as they are."""
    if mode is None:
        mode = target.stat().st_mode & 0o777 & ~0o022 if target.exists() else new_mode
    data = text.encode("utf-8") if isinstance(text, str) else text
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    try:
        dir_fd = os.open(target.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


__all__ = [
    "MAX_CONFIG_BYTES",
    "UnreadableFile",
    "locked",
    "read_limited",
    "read_text",
    "unsafe_owner",
    "write_atomic",
]

"""Canonical paths for the launch checks (the kernel's answer where it gives one), and kxen's
application data directory (:func:`data_dir`: the OAuth token store, the tool pins).

Every local server's start resolves a few paths before its process is spawned: the workspace, the
cwd, the command's target, the arguments that name files (:mod:`.launch`, :mod:`.launchers`).
``os.path.realpath`` walks a path one component at a time in Python, with an ``lstat`` for each
and a ``readlink`` for each link; on Linux the kernel resolves the same path in one ``open`` with
``O_PATH`` (which opens nothing: no read permission needed, no device or FIFO touched) and names
the result in ``/proc/self/fd``. Whatever the kernel cannot answer that way -- a path that does not
exist (yet), a symlink loop, no ``/proc``, another system -- is answered by the standard library,
so every result is the one ``os.path.realpath`` (or ``Path.resolve``) gives.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_O_PATH = getattr(os, "O_PATH", 0)
_FLAGS = _O_PATH | getattr(os, "O_CLOEXEC", 0)
_PROC_FD = "/proc/self/fd/"
#: what /proc appends to the name of a file unlinked after it was opened
_DELETED = " (deleted)"


def _from_kernel(path: str) -> str | None:
    """The canonical absolute form of an existing ``path`` as the kernel resolved it, or None."""
    if not _O_PATH or not path or "\0" in path:
        return None
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        return None  # missing, a loop, no permission to search: the standard library says what it means
    try:
        named = os.readlink(_PROC_FD + str(fd))
    except OSError:
        return None
    finally:
        os.close(fd)
    # anything but a plain absolute name (unreachable from our root, unlinked meanwhile) is not used
    if not named.startswith("/") or named.endswith(_DELETED):
        return None
    return named


def real(path: str) -> str:
    """``os.path.realpath(path)``: symlinks resolved, absolute, normalized."""
    return _from_kernel(path) or os.path.realpath(path)


def resolved(path: Path | str) -> Path:
    """``Path(path).resolve()`` (not strict; ``RuntimeError`` on a symlink loop, as it raises)."""
    named = _from_kernel(os.fspath(path))
    return Path(named) if named is not None else Path(path).resolve()


def under(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or under it; both absolute and normalized (as :func:`real` gives
    them): a comparison of names, no file system access. (``launchers.inside`` compares paths
    written by hand, component by component.)"""
    if path == root:
        return True
    return path.startswith(root if root.endswith(os.sep) else root + os.sep)


def data_dir() -> Path:
    """``$KXEN_DATA_DIR``, else the platform's application data directory for kxen: the files kxen
    keeps for the user across workspaces and homes (the OAuth token store, the pinned tool
    definitions), each 0600 in a 0700 directory."""
    explicit = os.environ.get("KXEN_DATA_DIR")
    if explicit:
        return Path(explicit).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "kxen"
    if os.name == "nt":
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local") / "kxen"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "kxen"


__all__ = ["data_dir", "real", "resolved", "under"]

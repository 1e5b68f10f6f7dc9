"""The installed distributions and their entry points, found as ``importlib.metadata`` finds them,
without importing it: it loads ``email`` (and through it ``socket``, ``datetime``, ``calendar``),
``zipfile``, ``csv`` and ``tempfile``, a fifth of kxen's import (docs/performance.md). Start-up
needs only the entry points; a distribution's name and version (its ``METADATA``) are read through
``importlib.metadata`` when someone asks for them.

:func:`distributions` gives what ``importlib.metadata.distributions(path=...)`` gives, in the same
order, for directories on the path (``*.dist-info`` and ``*.egg-info`` folders, an ``*.egg``
folder's ``EGG-INFO``). A path entry that is not a directory (a zip archive), and a process whose
import system holds another finder of distributions, are asked of ``importlib.metadata`` itself.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from importlib import import_module
from importlib.machinery import PathFinder
from typing import Any, Iterator, Sequence

#: the shape of an entry point's value: ``module[:attr.attr] [extras]``, as the standard library reads it
_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


class EntryPoint:
    """One line of a distribution's ``entry_points.txt``: ``name = value`` in section ``group``."""

    __slots__ = ("name", "value", "group", "dist")

    def __init__(self, name: str, value: str, group: str, dist: PathDist) -> None:
        self.name, self.value, self.group, self.dist = name, value, group, dist

    def load(self) -> Any:
        """Import the module the value names and return the attribute it names (or the module)."""
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r}: {self.value!r} is not 'module' or 'module:attribute'")
        module = import_module(match.group("module"))
        return functools.reduce(getattr, filter(None, (match.group("attr") or "").split(".")), module)

    def __repr__(self) -> str:
        return f"EntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


class PathDist:
    """A distribution's metadata folder. ``metadata`` and ``version`` are read on first use, through
    ``importlib.metadata``."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._dist: Any = None

    @property
    def _normalized_name(self) -> str | None:
        """The name the folder says (``name-version.dist-info``), normalized; None for an egg's
        ``EGG-INFO`` (its name is in its metadata)."""
        stem, ext = os.path.splitext(os.path.basename(self._path))
        if ext not in (".dist-info", ".egg-info"):
            return None
        return _normalize(stem.partition("-")[0])

    @property
    def entry_points(self) -> list[EntryPoint]:
        """Every entry point of ``entry_points.txt`` (none without one). Raises, as the standard
        library does, on bad UTF-8 and on a line without ``=`` (a ``ValueError`` naming the line)."""
        try:
            with open(os.path.join(self._path, "entry_points.txt"), encoding="utf-8") as f:
                text = f.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            return []
        out, group = [], None
        for line in map(str.strip, text.splitlines()):
            if not line or line.startswith("#"):
                continue
            if line.startswith("[") and line.endswith("]"):
                group = line.strip("[]")
            elif group is not None:
                name, equals, value = line.partition("=")
                if not equals:
                    raise ValueError(f"entry_points.txt of {self._path}: [{group}] {line[:80]!r} is not 'name = value'")
                out.append(EntryPoint(name.strip(), value.strip(), group, self))
        return out

    def _real(self) -> Any:
        if self._dist is None:
            import importlib.metadata
            import pathlib

            self._dist = importlib.metadata.PathDistribution(pathlib.Path(self._path))
        return self._dist

    @property
    def metadata(self) -> Any:
        return self._real().metadata

    @property
    def version(self) -> Any:
        return self._real().version


def _search(root: str) -> Iterator[Any]:
    """The metadata folders of one path entry, in the standard library's order: every
    ``*.dist-info`` / ``*.egg-info`` grouped by normalized name (first seen first), then an egg's."""
    try:
        children = os.listdir(root or ".")
    except OSError:
        if os.path.exists(root):  # a zip archive (or an egg file): the standard library reads it
            import importlib.metadata

            yield from importlib.metadata.distributions(path=[root])
        return
    base = os.path.basename(root).lower()
    infos: dict[str, list[str]] = {}
    eggs: list[str] = []
    for child in children:
        low = child.lower()
        if low.endswith((".dist-info", ".egg-info")):
            infos.setdefault(_normalize(low.rpartition(".")[0].partition("-")[0]), []).append(os.path.join(root, child))
        elif base.endswith(".egg") and low == "egg-info":
            eggs.append(os.path.join(root, "EGG-INFO"))
    for paths in infos.values():
        yield from map(PathDist, paths)
    yield from map(PathDist, eggs)


def _other_finders() -> bool:
    return any(getattr(f, "find_distributions", None) is not None and f is not PathFinder for f in sys.meta_path)


def distributions(*, path: Sequence[str]) -> Iterator[Any]:
    """The distributions on ``path``, as ``importlib.metadata.distributions(path=path)`` finds them."""
    if _other_finders():
        import importlib.metadata

        yield from importlib.metadata.distributions(path=list(path))
        return
    for root in path:
        yield from _search(root)


__all__ = ["EntryPoint", "PathDist", "distributions"]

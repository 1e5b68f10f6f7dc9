"""Config problems for scripts: ``--json`` gives each as ``{"file", "path", "rule"}``.

Every problem kxen reports reads ``file: key path: rule`` (the text people see is unchanged); the
JSON form splits it so a script or an editor can point at the key. A problem that names no file
(a command-line value) has ``file`` and ``path`` null and the whole text as ``rule``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# a key path is one word without spaces (``mcpServers.a.env.TOKEN``, ``roles.dev.allow[0]``) or one
# of the loader's two markers; the file is whatever comes before it
_PROBLEM_RE = re.compile(r"(?P<file>.+?): (?P<path>\(file\)|\(top level\)|[^\s:][^\s]*?): (?P<rule>.+)", re.DOTALL)


def problem_object(problem: str, files: Iterable[str] = ()) -> dict[str, Any]:
    """``file: key path: rule`` as ``{"file", "path", "rule"}``. ``files``, when known, are tried
    first (a file name holding ``": "`` is still split right)."""
    for file in sorted(files, key=len, reverse=True):
        if problem.startswith(file + ": "):
            rest = problem[len(file) + 2 :]
            path, sep, rule = rest.partition(": ")
            if sep:
                return {"file": file, "path": path, "rule": rule}
    match = _PROBLEM_RE.fullmatch(problem)
    if match is None or "/" not in match["file"] and "\\" not in match["file"]:
        return {"file": None, "path": None, "rule": problem}
    return {"file": match["file"], "path": match["path"], "rule": match["rule"]}


def problem_objects(problems: Iterable[str], files: Iterable[str] = ()) -> list[dict[str, Any]]:
    files = tuple(files)
    return [problem_object(p, files) for p in problems]


def config_files(args: Any) -> tuple[str, ...]:
    """The config files a command line reads: the home's ``config.toml`` and ``mcp.json``, the
    workspace's ``.kxen/mcp.json``."""
    import os
    from pathlib import Path

    from kxen_core.config.loader import default_home, project_file_name

    home = str(getattr(args, "home", None) or default_home())
    workspace = getattr(args, "workspace", None) or Path.cwd()
    try:
        workspace = Path(workspace).resolve()
    except (OSError, RuntimeError, ValueError):
        pass
    return os.path.join(home, "config.toml"), os.path.join(home, "mcp.json"), project_file_name(workspace)


__all__ = ["config_files", "problem_object", "problem_objects"]

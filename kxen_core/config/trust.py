"""Recording workspace trust in user settings (``config.toml``), keeping the file's comments.

Only the user grants trust: this is written by ``kxen trust`` / ``kxen untrust`` and read from the
user's own settings; nothing in a project can grant it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..errors import ConfigError
from .loader import canonical


def _edit(home: Path, workspace: Path, add: bool) -> bool:
    import tomlkit  # only the trust commands need it

    path = home / "config.toml"
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        doc = tomlkit.parse(text)
    except (OSError, UnicodeDecodeError, tomlkit.exceptions.ParseError) as exc:
        raise ConfigError([f"{path}: (file): cannot be updated: {exc}"]) from None
    target = canonical(workspace)
    current = doc.get("trusted_workspaces")
    if current is None:
        current = tomlkit.array()
        current.multiline(True)
        doc["trusted_workspaces"] = current
    if not isinstance(current, list):
        raise ConfigError([f"{path}: trusted_workspaces: must be a list of paths"])
    present = [canonical(p) for p in current if isinstance(p, str)]
    changed = False
    if add and target not in present:
        current.append(target)
        changed = True
    if not add:
        for i in reversed(range(len(current))):
            if isinstance(current[i], str) and canonical(current[i]) == target:
                del current[i]
                changed = True
    if changed:
        home.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=home, prefix=".config.toml.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(tomlkit.dumps(doc))
                f.flush()
                os.fsync(f.fileno())
            if path.exists():
                os.chmod(tmp, path.stat().st_mode & 0o777)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    return changed


def trust(home: Path, workspace: Path) -> bool:
    """Trust ``workspace`` (by canonical path). Returns False if it already was."""
    if not Path(workspace).is_dir():
        raise ConfigError([f"{workspace}: not a directory"])
    return _edit(home, workspace, add=True)


def untrust(home: Path, workspace: Path) -> bool:
    """Stop trusting ``workspace``. Returns False if it was not trusted."""
    return _edit(home, workspace, add=False)

"""The launch of a local server: resolved once, fingerprinted, shown without secrets.

The core resolves the launch of every local (not remote) server before its transport opens: the
absolute command, the args, the cwd and the configured env -- and, for a plugin's own local kind, the
kind and its options, since they decide what the plugin runs. A project server starts only when this
exact launch is approved by its fingerprint, and the transport receives the same :class:`Launch` in
``context.launch``: what runs is what was approved, with no second lookup.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .errors import ConnectError
from .policy import fingerprint

if TYPE_CHECKING:
    from .config.models import ServerConfig

#: env-key fragments (case-insensitive) whose values are shown only as a SHA-256 digest
SENSITIVE_ENV_WORDS = ("token", "secret", "key", "password", "passwd", "pwd", "credential", "auth", "cookie", "session", "private", "pat")

_USERINFO_RE = re.compile(r"://[^/?#\s]*@")


def sensitive_key(key: str) -> bool:
    lower = key.lower()
    return any(word in lower for word in SENSITIVE_ENV_WORDS)


def sensitive_value(value: str) -> bool:
    """A value that carries credentials whatever its key is called (a URL with user:password@)."""
    return bool(_USERINFO_RE.search(value))


def digest(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()


@attrs.frozen(kw_only=True)
class Launch:
    """The exact, canonical configuration a local server is started with.

    For stdio: the resolved command, args, cwd and env. For a plugin's own local kind, the kind and
    its ``options`` too.
    """

    command: str | None  # absolute (symlinks kept) for stdio
    args: tuple[str, ...]
    cwd: str  # absolute
    env: dict[str, str] = attrs.field(repr=False)  # the configured env (the host part is the plugin's)
    kind: str = "stdio"
    options: dict[str, Any] = attrs.field(factory=dict)

    def _canonical(self) -> dict[str, Any]:
        data: dict[str, Any] = {"command": self.command, "args": list(self.args), "cwd": self.cwd, "env": self.env}
        if self.kind != "stdio":
            data.update(kind=self.kind, options=self.options)
        return data

    @property
    def fingerprint(self) -> str:
        return fingerprint(self._canonical())

    def display(self) -> dict[str, Any]:
        """What an approval request shows: env values in clear, except sensitive keys and values
        that carry credentials (digest only)."""
        shown = self._canonical()
        shown["env"] = {
            k: (digest(v) if sensitive_key(k) or sensitive_value(v) else v) for k, v in sorted(self.env.items())
        }
        return shown


def resolve_launch(server: ServerConfig, workspace: Path) -> Launch:
    """The launch of a local server of any kind; raises ``ConnectError`` when a stdio command
    cannot be found.

    A stdio command is looked up on the PATH the child will get (the configured one, else the
    host's); a command with a path separator is taken relative to the cwd. The cwd is the entry's
    ``cwd`` relative to the workspace, else the workspace.
    """
    cwd = Path(workspace)
    if server.cwd:
        cwd = cwd / os.path.expanduser(server.cwd)
    try:
        cwd = cwd.resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a NUL byte: from config, not a crash
        why = "it holds a NUL byte" if isinstance(exc, ValueError) else getattr(exc, "strerror", None) or "a symlink loop"
        raise ConnectError(f"cwd cannot be resolved ({why})", server=server.name) from None
    if server.kind != "stdio":
        return Launch(
            command=server.command,
            args=tuple(server.args),
            cwd=str(cwd),
            env=dict(server.env),
            kind=server.kind,
            options=dict(server.options),
        )
    assert server.command is not None  # the config's shape check requires it for stdio
    command = os.path.expanduser(server.command)
    # symlinks are kept: a venv's bin/python (or a multi-call binary) relies on the path it runs by
    if os.sep in command:
        path = os.path.abspath(os.path.join(cwd, command))
        resolved = path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    else:
        # relative PATH entries (and an empty one) name directories under the child's cwd, as exec sees them
        search = server.env.get("PATH", os.environ.get("PATH", os.defpath))
        found = shutil.which(command, path=os.pathsep.join(os.path.join(cwd, d) for d in search.split(os.pathsep)))
        resolved = os.path.abspath(found) if found else None
    if resolved is None:
        raise ConnectError(f"command not found or not executable: {server.command!r}", server=server.name)
    return Launch(command=resolved, args=tuple(server.args), cwd=str(cwd), env=dict(server.env))


__all__ = ["Launch", "digest", "resolve_launch", "sensitive_key", "sensitive_value"]

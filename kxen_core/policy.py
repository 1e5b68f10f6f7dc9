"""Tool-call policy: votes, their combination, and approval requests.

Votes come from ``kxen_policy_decision`` implementations (the config's ``toolPolicies`` is itself a
default plugin). The combination is a veto: any ``deny`` wins, else any ``ask``, else any ``allow``,
else the server's ``defaultToolPolicy``. An implementation that raises counts as ``deny``. ``ask``
goes to ``kxen_approval_prompt``; when no channel answers, the answer is no.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Literal

import attrs

Decision = Literal["allow", "ask", "deny"]
_RANK = {"allow": 0, "ask": 1, "deny": 2}


@attrs.frozen(kw_only=True)
class ToolCall:
    """A tool call on its way out, as policy plugins see it."""

    server: Any  # ServerConfig
    tool: str
    arguments: dict[str, Any]
    role: str | None = None
    tool_info: dict[str, Any] = attrs.field(factory=dict)  # the catalog entry (annotations are hints only)
    settings: Any = None  # the user's Settings (roles live there)

    @property
    def qualified_name(self) -> str:
        return f"{self.server.name}__{self.tool}"


@attrs.frozen(kw_only=True)
class Vote:
    decision: Decision
    reason: str = ""
    plugin: str = ""

    @classmethod
    def allow(cls, reason: str = "") -> Vote:
        return cls(decision="allow", reason=reason)

    @classmethod
    def ask(cls, reason: str = "") -> Vote:
        return cls(decision="ask", reason=reason)

    @classmethod
    def deny(cls, reason: str = "") -> Vote:
        return cls(decision="deny", reason=reason)


def combine(votes: list[Vote], default: Decision) -> tuple[Decision, list[Vote]]:
    """Veto combination; returns the decision and the votes that made it."""
    if not votes:
        return default, [Vote(decision=default, reason="defaultToolPolicy", plugin="config")]
    worst = max(_RANK[v.decision] for v in votes)
    decision: Decision = ("allow", "ask", "deny")[worst]  # type: ignore[assignment]
    return decision, [v for v in votes if v.decision == decision]


@attrs.frozen(kw_only=True)
class ApprovalRequest:
    """Something a human must say yes to. ``details`` never holds secret values."""

    kind: Literal["tool_call", "stdio_launch", "remote_enable"]
    server: str
    summary: str
    details: dict[str, Any] = attrs.field(factory=dict)
    fingerprint: str = ""


@attrs.frozen(kw_only=True)
class ApprovalDecision:
    approved: bool
    reason: str = ""
    channel: str = ""


def fingerprint(payload: Any) -> str:
    """A stable SHA-256 over canonical JSON."""
    data = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(data).hexdigest()


# --- project stdio launches -------------------------------------------------------------------

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
class StdioLaunch:
    """The exact, canonical configuration a local server would be started with.

    For stdio: the resolved command, args, cwd and env. For a plugin's own local kind (anything not
    remote), the kind and its ``options`` too, since they decide what the plugin runs.
    """

    command: str | None  # absolute (symlinks kept) for stdio
    args: tuple[str, ...]
    cwd: str  # absolute
    env: dict[str, str] = attrs.field(repr=False)  # the configured env (the host part is fixed)
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


def resolve_launch(server: Any, workspace: Path) -> StdioLaunch:
    """The launch to approve for a local (not remote) server of any kind."""
    if server.kind == "stdio":
        return resolve_stdio_launch(server, workspace)
    cwd = (Path(workspace) / os.path.expanduser(server.cwd)).resolve() if server.cwd else Path(workspace).resolve()
    return StdioLaunch(
        command=server.command,
        args=tuple(server.args),
        cwd=str(cwd),
        env=dict(server.env),
        kind=server.kind,
        options=dict(server.options),
    )


def resolve_stdio_launch(server: Any, workspace: Path) -> StdioLaunch:
    """Resolve a stdio server's command, cwd and env as they will be used.

    The command is looked up on the PATH the child will get (the configured one, else the host's);
    a command with a path separator is taken relative to the cwd. Raises ``ConnectError`` when the
    command cannot be found.
    """
    from .errors import ConnectError

    cwd = Path(workspace)
    if server.cwd:
        cwd = cwd / os.path.expanduser(server.cwd)
    cwd = cwd.resolve()
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
    return StdioLaunch(command=resolved, args=tuple(server.args), cwd=str(cwd), env=dict(server.env))

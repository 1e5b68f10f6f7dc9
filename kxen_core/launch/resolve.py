"""The launch of a local server: resolved once, fingerprinted, shown without secrets.

The core resolves the launch of every local (not remote) server before its transport opens: the
absolute command, the args, the cwd and the configured env -- and, for a plugin's own local kind, the
kind and its options, since they decide what the plugin runs. A project server starts only when this
exact launch is approved by its fingerprint, and the transport receives the same :class:`Launch` in
``context.launch``: what runs is what was approved, with no second lookup.

The fingerprint covers what runs, not only how it is named: the command's resolved target
(realpath, so a re-pointed symlink asks again) and the content digest of the command and of every
argument that is a file inside the workspace (SHA-256 of at most :data:`MAX_DIGEST_BYTES`, else the
size and mtime), and of the workspace files a launcher would pick up.

Commands are looked up on the host's PATH (or the configured one), never in the workspace: relative
PATH entries are skipped. A launch that would still run something the workspace holds -- a command
inside it, or a launcher that looks into the cwd and finds something there (:mod:`.launchers`) --
is ``held``: even a user's own server then waits for workspace trust and approval of its
fingerprint, and the reason names the file.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from kxen_core.config.paths import real, under
from kxen_core.config.paths import resolved as resolved_path
from kxen_core.config.secrets import sensitive_key, sensitive_value  # re-exported
from kxen_core.errors import ConnectError
from kxen_core.launch.canonical import fingerprint  # re-exported
from kxen_core.launch.launchers import picked_up

if TYPE_CHECKING:
    from kxen_core.config.models import ServerConfig


def digest(value: str) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()


#: a file's content is hashed up to this size; a larger one is fingerprinted by size and mtime
MAX_DIGEST_BYTES = 64 * 1024 * 1024
#: how many argument files get a content digest (the rest: size, mtime, ctime and inode)
MAX_DIGEST_FILES = 32
_CHUNK = 1024 * 1024
#: characters that make a value code: shell and template syntax, quotes, escapes, control characters
_CODE_RE = re.compile(r"[$`;|&<>(){}\[\]'\"\\!*?\x00-\x1f\x7f]")


def code_bearing(value: str) -> bool:
    """A value a shell, a template or a config parser could run or expand (so never shown as a digest)."""
    return bool(_CODE_RE.search(value))


def _stat_digest(st: os.stat_result) -> str:
    # ctime and inode cannot be set back by whoever rewrites the file (mtime can)
    return f"size:{st.st_size};mtime_ns:{st.st_mtime_ns};ctime_ns:{st.st_ctime_ns};ino:{st.st_ino}"


#: content digests already taken, by the file's identity (device, inode, size, mtime, ctime): a
#: command started again (a restart, a reload, twenty servers of one interpreter) is not read and
#: hashed again -- a multi-megabyte binary costs milliseconds each time -- until any of them
#: changes. ctime cannot be set back by whoever rewrites the file; only files whose ctime was at
#: least :data:`SETTLED_SECONDS` old when they were hashed (and unchanged after) are kept, so a
#: rewrite within the same coarse clock tick cannot hide behind an entry.
_DIGESTS: dict[tuple[int, int, int, int, int], str] = {}
MAX_REMEMBERED_DIGESTS = 256
SETTLED_SECONDS = 2.0


def _identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_digest(path: str, *, hash_content: bool = True) -> str:
    """``sha256:<hex>`` of the file's content (bounded read; remembered for an unchanged file,
    see :data:`_DIGESTS`); its size, mtime, ctime and inode when it is larger than
    :data:`MAX_DIGEST_BYTES` (or ``hash_content`` is false); ``dir`` for a directory,
    ``unreadable`` when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return "unreadable"
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            return "dir"
        if not stat.S_ISREG(st.st_mode):
            return "special"
        if st.st_size > MAX_DIGEST_BYTES or not hash_content:
            return _stat_digest(st)
        identity = _identity(st)
        known = _DIGESTS.get(identity)
        if known is not None:
            return known
        import hashlib

        h = hashlib.sha256()
        total = 0
        while total <= MAX_DIGEST_BYTES:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                digest = "sha256:" + h.hexdigest()
                _remember(identity, digest, os.fstat(fd))
                return digest
            total += len(chunk)
            h.update(chunk)
        return _stat_digest(st)  # it grew while read
    except OSError:
        return "unreadable"
    finally:
        os.close(fd)


def _remember(identity: tuple[int, int, int, int, int], digest: str, after: os.stat_result) -> None:
    if _identity(after) != identity or time.time_ns() - identity[4] < SETTLED_SECONDS * 1e9:
        return  # changed while read, or changed too recently to be told apart from a rewrite
    if len(_DIGESTS) >= MAX_REMEMBERED_DIGESTS:
        del _DIGESTS[next(iter(_DIGESTS))]
    _DIGESTS[identity] = digest


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
    #: the command's realpath (what a symlink points to now)
    target: str | None = None
    #: path -> content digest (:func:`file_digest`) of the command's target, of every argument that
    #: is a workspace file (with ``; target=`` where it is a symlink), and of every workspace path a
    #: launcher would pick up
    files: dict[str, str] = attrs.field(factory=dict)
    #: why this launch runs something the workspace holds (None: it does not); such a launch needs
    #: workspace trust and approval of its fingerprint even for a user server
    held: str | None = None
    #: whose env this is: a user's own values may be secrets with any characters (digest when the
    #: key looks sensitive); a project's code-bearing value is never hidden behind a digest
    scope: str = attrs.field(default="project", eq=False)
    #: env keys whose values came from host variables (``${VAR}`` in user config): shown as a digest
    secret_env: frozenset[str] = attrs.field(factory=frozenset, eq=False)

    def _canonical(self) -> dict[str, Any]:
        data: dict[str, Any] = {"command": self.command, "args": list(self.args), "cwd": self.cwd, "env": self.env}
        if self.target is not None or self.files:
            data.update(target=self.target, files=dict(sorted(self.files.items())))
        if self.kind != "stdio":
            data.update(kind=self.kind, options=self.options)
        return data

    @property
    def fingerprint(self) -> str:
        return fingerprint(self._canonical())

    def display(self) -> dict[str, Any]:
        """What an approval request shows: env values in clear, except values of sensitive keys (or
        carrying credentials), shown as a digest -- but never a code-bearing value: that one is
        shown in clear, so nobody approves code they cannot read (project config refuses such
        values before any approval is asked)."""
        shown = self._canonical()
        shown["env"] = {
            printable(k): shown_env_value(k, v, user=self.scope == "user", secret=k in self.secret_env)
            for k, v in sorted(self.env.items())
        }
        # names from the repository (file names, args) are shown with control characters escaped
        for field in ("command", "cwd", "target"):
            if isinstance(shown.get(field), str):
                shown[field] = printable(shown[field])
        shown["args"] = [printable(a) for a in self.args]
        if "files" in shown:
            shown["files"] = {printable(k): printable(v) for k, v in shown["files"].items()}
        if self.held:
            shown["held"] = self.held
        return shown


def shown_env_value(key: str, value: str, *, user: bool = False, secret: bool = False) -> str:
    """An env value as an approval shows it: a digest only when the key (or the value) looks like a
    secret and -- unless the user wrote it -- the value is not code-bearing; always when ``secret``
    (a host variable supplied it). Control characters of a value shown in clear are escaped."""
    if secret and value:
        return digest(value)
    if (sensitive_key(key) or sensitive_value(value)) and (user or not code_bearing(value)):
        return digest(value)
    return printable(value)


def printable(text: str) -> str:
    """``text`` with every non-printable character escaped (file names come from the repository)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else (f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}") for c in text)


class _Realpaths(dict[str, str]):
    """:func:`.paths.real` memoized for one launch resolution: its checks resolve the command and
    the same arguments several times; one resolution sees one answer."""

    def __missing__(self, path: str) -> str:
        canonical = self[path] = real(path)
        return canonical


class _Exists(dict[str, bool]):
    """``os.path.lexists`` memoized for one launch resolution, as :class:`_Realpaths`: the argument
    checks here and the launcher rules look at the same paths."""

    def __missing__(self, path: str) -> bool:
        there = self[path] = os.path.lexists(path)
        return there


def _under_cwd(cwd: str, candidate: str) -> str:
    """``os.path.abspath(os.path.join(cwd, candidate))`` for a canonical ``cwd``; a plain name (no
    separator, not ``.`` or ``..``) is just appended, which is what normalizing would give."""
    if os.sep not in candidate and candidate not in (".", ".."):
        return (cwd if cwd.endswith(os.sep) else cwd + os.sep) + candidate
    return os.path.abspath(os.path.join(cwd, candidate))


def _workspace_files(
    command: str,
    args: tuple[str, ...],
    cwd: str,
    workspace: str,
    *,
    by_path: bool,
    real_of: _Realpaths,
) -> tuple[dict[str, str], list[str]]:
    """Digests of the command's target and of argument files inside the workspace, and the reasons
    the launch runs something the workspace holds (launcher rules, a command named by a path into
    it; a command found on an absolute PATH entry is the user's choice, wherever that entry is)."""
    files: dict[str, str] = {}
    reasons: list[str] = []
    exists = _Exists()  # shared with the launcher rules below
    target = real_of[command]
    files[target] = file_digest(target)
    if by_path and (under(target, workspace) or under(os.path.abspath(command), workspace)):
        reasons.append(f"the command {printable(command)} is a file in the workspace")
    count = 0
    for arg in args:
        for candidate in (arg, arg.partition("=")[2] if arg.startswith("-") else ""):
            if not candidate or "\0" in candidate:
                continue
            path = _under_cwd(cwd, candidate)
            if not exists[path]:
                continue  # nothing there (an option, a number): no file, whatever links lead to it
            target_of = real_of[path]
            # a workspace path (or a link that leads into it): its content, and where a link points
            if (
                path not in files
                and (under(path, workspace) or under(target_of, workspace))
                and os.path.isfile(target_of)
            ):
                content = file_digest(target_of, hash_content=count < MAX_DIGEST_FILES)
                files[path] = content + ("" if target_of == path else f"; target={printable(target_of)}")
                count += 1
    for rule, path in picked_up(
        command, args, cwd, workspace, realpath=real_of.__getitem__, lexists=exists.__getitem__
    ):
        picked = real_of[path]
        files.setdefault(picked, file_digest(picked))
        reasons.append(f"{rule.name}: {rule.how}, and the workspace holds {printable(path)}")
    return files, reasons


def resolve_launch(server: ServerConfig, workspace: Path, *, canonical: bool = False) -> Launch:
    """The launch of a local server of any kind; raises ``ConnectError`` when a stdio command
    cannot be found.

    A stdio command is looked up on the PATH the child will get (the configured one, else the
    host's), absolute entries only; a command with a path separator is taken relative to the cwd
    (and, when that is in the workspace, held). The cwd is the entry's ``cwd`` relative to the
    workspace, else the workspace; a project's cwd must stay inside the workspace (symlinks
    followed). ``canonical``: ``workspace`` is canonical already (a Runtime's, resolved once when
    the runtime was made), so it is not resolved again.
    """
    if server.unread:  # an untrusted workspace's entry: nothing of it was read
        raise ConnectError(
            "the workspace is not trusted: its project file is read once it is (kxen trust)", server=server.name
        )
    root = workspace if canonical else resolved_path(workspace)  # canonical: resolved by the caller
    cwd = root
    try:
        if server.cwd:  # else the workspace, resolved just above
            cwd = resolved_path(cwd / (server.cwd if server.scope == "project" else os.path.expanduser(server.cwd)))
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a NUL byte: from config, not a crash
        why = (
            "it holds a NUL byte" if isinstance(exc, ValueError) else getattr(exc, "strerror", None) or "a symlink loop"
        )
        raise ConnectError(f"cwd cannot be resolved ({why})", server=server.name) from None
    if server.scope == "project" and not under(str(cwd), str(root)):
        raise ConnectError(f"the project cwd {server.cwd!r} leads outside the workspace", server=server.name)
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
        # host PATH only: relative entries (and an empty one) would name directories in the
        # workspace (the child's cwd), so they are skipped
        search = server.env.get("PATH", os.environ.get("PATH", os.defpath))
        entries = [d for d in search.split(os.pathsep) if os.path.isabs(d)]
        found = shutil.which(command, path=os.pathsep.join(entries)) if entries else None
        resolved = os.path.abspath(found) if found else None
    if resolved is None:
        raise ConnectError(f"command not found or not executable: {server.command!r}", server=server.name)
    args = tuple(server.args)
    real_of = _Realpaths()
    files, reasons = _workspace_files(resolved, args, str(cwd), str(root), by_path=os.sep in command, real_of=real_of)
    # a user entry whose own config file is in the workspace (``--home`` inside the repository) is
    # the repository's word already: holding its launch would protect nothing
    own = bool(reasons) and server.scope == "user" and bool(server.source) and under(real(server.source), str(root))
    held = "; ".join(reasons) if reasons and not own else None
    return Launch(
        command=resolved,
        args=args,
        cwd=str(cwd),
        env=dict(server.env),
        scope=server.scope,
        target=real_of[resolved],
        files=files,
        held=held,
        secret_env=frozenset(e.path[4:] for e in server.expanded if e.path.startswith("env.") and e.values),
    )


__all__ = [
    "MAX_DIGEST_BYTES",
    "Launch",
    "code_bearing",
    "digest",
    "file_digest",
    "resolve_launch",
    "sensitive_key",
    "sensitive_value",
    "shown_env_value",
]

"""Changing ``mcp.json`` from kxen itself (``kxen mcp add``, ``remove``, ``import``, ``policy``,
``enable``, ``disable``): validated,
atomic, one writer at a time.

Every change is a read-modify-write of the whole file under a cross-process lock, so two processes
adding servers at once both land. The new content is checked by the loader's own rules
(:func:`~kxen_core.config.loader.servers_from`, and for project scope
:func:`~kxen_core.config.project.project_problems`) *before* anything is written; a change that
would leave the file invalid -- including a problem the file already had -- is refused with a
:class:`ConfigError` naming the file, key path and rule, and the file stays byte-identical.

Writes are atomic: a temporary file next to the target, fsync, rename, fsync of the directory. A
symlinked file is written through to its target (dotfiles kept elsewhere), and stays a link. The
user's file gets mode 0600 (it may hold secrets); a project file keeps its mode without group or
world write (0644 when new). A project file (or its ``.kxen`` directory) that leads outside the
workspace is refused: a repository cannot make kxen write elsewhere. The lock of the user's file is
``$KXEN_HOME/mcp.json.lock``; a project file's lock lives in ``$KXEN_HOME/locks/`` too, never in
the repository (a lock file planted there could be a link to a file of the user's).

The JSON is rewritten with two-space indentation; entries keep their order and every value, known
or not, is kept as data.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kxen_core.config.converter import SURROGATE_RULE, lone_surrogates, make_converter
from kxen_core.config.files import MAX_CONFIG_BYTES, UnreadableFile, locked, read_limited, write_atomic
from kxen_core.config.loader import load_settings, project_file, servers_from
from kxen_core.config.models import ServerConfig, check_server_key
from kxen_core.config.project import project_problems, shown_key
from kxen_core.errors import ConfigError, printable

if TYPE_CHECKING:
    from kxen_core.plugins.manager import KxenPluginManager

T = TypeVar("T")

#: seconds to wait for another process's change of the same file before giving up with a ConfigError
LOCK_TIMEOUT = 10.0


def servers_file(home: Path, workspace: Path, scope: str) -> Path:
    """The ``mcp.json`` of ``scope``: ``$KXEN_HOME/mcp.json`` or ``<workspace>/.kxen/mcp.json``."""
    return Path(home) / "mcp.json" if scope == "user" else project_file(Path(workspace))


def read_document(path: Path, scope: str) -> dict[str, Any]:
    """The file as a JSON object holding an ``mcpServers`` object (a new one when the file does not
    exist); a ConfigError naming the file when it cannot be edited."""

    def refuse(why: str) -> ConfigError:
        return ConfigError([f"{path}: (file): cannot be updated: {why}"])

    try:
        raw = read_limited(path, private=scope == "user")
    except FileNotFoundError:
        return {"mcpServers": {}}
    except UnreadableFile as exc:
        raise refuse(str(exc)) from None
    if raw.startswith(b"\xef\xbb\xbf"):
        raise refuse("not valid JSON: must be UTF-8 without a byte order mark")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise refuse(f"not valid JSON: not UTF-8 text (invalid byte at offset {exc.start})") from None
    except RecursionError:
        raise refuse("not valid JSON: nested too deeply") from None
    except ValueError as exc:
        raise refuse(f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise refuse("must be a JSON object with 'mcpServers'")
    servers = data.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise ConfigError([f"{path}: mcpServers: cannot be updated: must be an object of server definitions"])
    return data


def dump(data: Any) -> str:
    """The file's new text (two-space indentation, key order kept, a final newline)."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def check_document(
    data: Any, path: Path, scope: str, *, home: Path, pm: KxenPluginManager | None = None
) -> tuple[dict[str, ServerConfig], list[str]]:
    """What the loader would make of ``data`` as the content of ``path``: its servers, and every
    problem (``file: key path: rule``). The user's settings (``allow_loopback_http``) apply; with
    ``pm``, transport kinds and their options are checked against the installed plugins."""
    bad = lone_surrogates(data)
    if bad:
        return {}, [f"{path}: {where}: {SURROGATE_RULE}" for where in bad]
    size = len(dump(data).encode("utf-8"))
    if size > MAX_CONFIG_BYTES:
        return {}, [f"{path}: (file): would be larger than {MAX_CONFIG_BYTES} bytes (the most kxen reads)"]
    problems: list[str] = []
    conv = make_converter()
    settings = load_settings(Path(home), problems, conv)
    if problems:
        return {}, problems
    settings_file = str(Path(home) / "config.toml")
    servers = servers_from(data, str(path), scope, problems, conv, settings, pm, settings_file=settings_file)
    if scope == "project":
        for name, server in servers.items():
            problems += [f"{path}: mcpServers.{name}.{suffix}: {rule}" for suffix, rule in project_problems(server)]
        problems = [printable(p) for p in problems]  # keys from a repository: one safe line each
    return servers, problems


def update_servers(
    home: Path,
    workspace: Path,
    scope: str,
    mutate: Callable[[dict[str, Any]], T],
    *,
    pm: KxenPluginManager | None = None,
    lock_timeout: float = LOCK_TIMEOUT,
) -> T:
    """Under the file's lock: read the ``mcpServers`` object of ``scope``'s file, let ``mutate``
    change it in place (it raises ConfigError to refuse), check the result (:func:`check_document`)
    and write it atomically. Returns what ``mutate`` returned. Nothing is written when ``mutate`` or
    the check raises."""
    home = Path(home)
    path = servers_file(home, workspace, scope)
    with locked(path, _lock_path(home, path, scope), lock_timeout):
        target = _target(path, scope, Path(workspace))
        data = read_document(path, scope)
        result = mutate(data["mcpServers"])
        _servers, problems = check_document(data, path, scope, home=home, pm=pm)
        if problems:
            raise ConfigError(problems)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            # the user's file is private; a project file keeps its mode without group/world write
            write_atomic(target, dump(data), mode=0o600 if scope == "user" else None, new_mode=0o644)
        except OSError as exc:
            raise ConfigError([f"{path}: (file): cannot be updated: {exc.strerror or exc}"]) from None
        return result


def add_server(
    home: Path, workspace: Path, scope: str, name: str, entry: Any, *, pm: KxenPluginManager | None = None,
    lock_timeout: float = LOCK_TIMEOUT,
) -> Path:  # fmt: skip
    """Add ``entry`` as server ``name`` to ``scope``'s file; returns the file. Refused (ConfigError)
    when the name is taken there, or when the file would be invalid with it."""
    path = servers_file(home, workspace, scope)
    rule = check_server_key(name)
    if rule:
        raise ConfigError([f"{path}: mcpServers.{shown_key(name)}: {rule}"])
    if not isinstance(entry, dict):
        raise ConfigError([f"{path}: mcpServers.{name}: a server definition must be an object"])

    def mutate(servers: dict[str, Any]) -> None:
        if name in servers:
            raise ConfigError(
                [
                    f"{path}: mcpServers.{name}: a server of this name is already configured here (kxen mcp remove "
                    f"{name} first)"
                ]
            )
        servers[name] = entry

    update_servers(home, workspace, scope, mutate, pm=pm, lock_timeout=lock_timeout)
    return path


def remove_server(
    home: Path, workspace: Path, scope: str, name: str, *, pm: KxenPluginManager | None = None,
    lock_timeout: float = LOCK_TIMEOUT,
) -> Path:  # fmt: skip
    """Remove server ``name`` from ``scope``'s file; returns the file. ConfigError when it is not there."""
    path = servers_file(home, workspace, scope)

    def mutate(servers: dict[str, Any]) -> None:
        if name not in servers:
            raise ConfigError([f"{path}: mcpServers.{shown_key(name)}: no server of this name in this file"])
        del servers[name]

    update_servers(home, workspace, scope, mutate, pm=pm, lock_timeout=lock_timeout)
    return path


def change_server(
    home: Path, workspace: Path, scope: str, name: str, change: Callable[[dict[str, Any]], bool], *,
    pm: KxenPluginManager | None = None, lock_timeout: float = LOCK_TIMEOUT,
) -> tuple[Path, bool]:  # fmt: skip
    """Let ``change`` edit the entry of server ``name`` in ``scope``'s file in place (it returns
    whether it changed anything); the result is checked like every write. Returns the file and
    whether the entry changed. ConfigError when there is no such entry or the result is invalid."""
    path = servers_file(home, workspace, scope)

    def mutate(servers: dict[str, Any]) -> bool:
        entry = servers.get(name)
        if entry is None:
            raise ConfigError([f"{path}: mcpServers.{shown_key(name)}: no server of this name in this file"])
        if not isinstance(entry, dict):
            raise ConfigError([f"{path}: mcpServers.{shown_key(name)}: a server definition must be an object"])
        return change(entry)

    changed = update_servers(home, workspace, scope, mutate, pm=pm, lock_timeout=lock_timeout)
    return path, changed


def set_tool_policy(
    home: Path, workspace: Path, scope: str, name: str, tool: str | None, policy: str, *,
    pm: KxenPluginManager | None = None, lock_timeout: float = LOCK_TIMEOUT,
) -> tuple[Path, bool]:  # fmt: skip
    """Set ``toolPolicies.<tool>`` of server ``name`` (with ``tool`` None: its ``defaultToolPolicy``)
    to ``policy``. The loader's rules decide what is valid (a word of allow/ask/deny; no ``allow``
    in a project file). Returns the file and whether the entry changed."""
    path = servers_file(home, workspace, scope)

    def change(entry: dict[str, Any]) -> bool:
        if tool is None:
            before = entry.get("defaultToolPolicy")
            entry["defaultToolPolicy"] = policy
            return before != policy
        policies = entry.setdefault("toolPolicies", {})
        if not isinstance(policies, dict):
            raise ConfigError([f"{path}: mcpServers.{name}.toolPolicies: must be an object of tool: policy"])
        before = policies.get(tool)
        policies[tool] = policy
        return before != policy

    return change_server(home, workspace, scope, name, change, pm=pm, lock_timeout=lock_timeout)


def set_enabled(
    home: Path, workspace: Path, scope: str, name: str, enabled: bool, *, pm: KxenPluginManager | None = None,
    lock_timeout: float = LOCK_TIMEOUT,
) -> tuple[Path, bool]:  # fmt: skip
    """Set ``enabled`` of server ``name``: ``false`` is written; enabling removes the key (true is
    the default). Returns the file and whether the entry changed."""

    def change(entry: dict[str, Any]) -> bool:
        before = entry.get("enabled", True)
        if enabled:
            entry.pop("enabled", None)
        else:
            entry["enabled"] = False
        return before is not enabled

    return change_server(home, workspace, scope, name, change, pm=pm, lock_timeout=lock_timeout)


def _lock_path(home: Path, path: Path, scope: str) -> Path:
    if scope == "user":
        return home / "mcp.json.lock"
    key = hashlib.sha256(os.path.abspath(path).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return home / "locks" / f"project-{key}.lock"


def _target(path: Path, scope: str, workspace: Path) -> Path:
    """Where the new content goes: the file, or the target of a symlinked file (followed to the end,
    a dangling link to where it points). A project file must stay inside the workspace."""
    target = os.path.realpath(path)
    if scope == "project":
        root = os.path.realpath(workspace)
        if not os.path.isdir(root):
            raise ConfigError([f"{path}: (file): cannot be updated: the workspace {workspace} is not a directory"])
        if os.path.commonpath([target, root]) != root:
            raise ConfigError(
                [f"{path}: (file): cannot be updated: it leads outside the workspace (to {printable(target)})"]
            )
    return Path(target)


__all__ = [
    "LOCK_TIMEOUT",
    "add_server",
    "change_server",
    "check_document",
    "dump",
    "read_document",
    "remove_server",
    "servers_file",
    "set_enabled",
    "set_tool_policy",
    "update_servers",
]

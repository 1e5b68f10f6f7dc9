"""Changing user settings (``config.toml``) from kxen itself, keeping the file's comments.

Only the user grants trust and turns remote MCP on: these are written by ``kxen trust`` /
``kxen untrust`` / ``kxen remote on|off`` / ``kxen config set`` (or a host's settings API) into the
user's own settings,
and nothing in a project can change them. Writes are atomic (temp file, fsync, rename), and the
whole read-modify-write holds ``config.toml.lock`` beside the file, so two processes changing
settings at once cannot lose either change. Waiting for that lock is bounded (``lock_timeout``).

A symlinked ``config.toml`` is written through: its target gets the new content (temp file next to
the target, then rename), and the link stays. The file is read like every config file (regular,
bounded) and must be the user's own and not writable by others; the new file never gets group or
world write. Trust is recorded as the workspace's canonical path and compared as that string.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kxen_core.config.files import UnreadableFile, locked, read_limited, write_atomic
from kxen_core.config.loader import canonical, settings_from
from kxen_core.config.settings import Settings
from kxen_core.errors import ConfigError

#: seconds to wait for another process's settings change before giving up with a ConfigError
LOCK_TIMEOUT = 10.0


def update_settings(home: Path, mutate: Callable[[Any], bool], *, lock_timeout: float = LOCK_TIMEOUT) -> bool:
    """Load config.toml as a comment-preserving document, let ``mutate`` change it, write it back
    if it returned True. Returns what ``mutate`` returned.

    Holds ``config.toml.lock`` from the read to the rename; raises ConfigError if another process
    holds it for longer than ``lock_timeout`` seconds."""
    import tomlkit  # only the settings-changing commands need it

    path = home / "config.toml"
    with locked(path, home / "config.toml.lock", lock_timeout):
        try:
            text = read_limited(path, private=True).decode("utf-8")
        except FileNotFoundError:
            text = ""
        except UnreadableFile as exc:
            raise ConfigError([f"{path}: (file): cannot be updated: {exc}"]) from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                [f"{path}: (file): cannot be updated: not UTF-8 text (invalid byte at offset {exc.start})"]
            ) from None
        try:
            doc = tomlkit.parse(text)
        except RecursionError:
            raise ConfigError([f"{path}: (file): cannot be updated: not valid TOML: nested too deeply"]) from None
        except tomlkit.exceptions.ParseError as exc:
            raise ConfigError([f"{path}: (file): cannot be updated: not valid TOML: {exc}"]) from None
        if not mutate(doc):
            return False
        # a symlinked config.toml (dotfiles kept elsewhere) stays a symlink: the new content replaces
        # its target, atomically, from a temp file next to the target
        try:
            write_atomic(Path(os.path.realpath(path)), tomlkit.dumps(doc))
        except OSError as exc:
            raise ConfigError([f"{path}: (file): cannot be updated: {exc.strerror or exc}"]) from None
        return True


def _trust_edit(home: Path, workspace: Path, add: bool, lock_timeout: float) -> bool:
    import tomlkit

    target = canonical(workspace)
    path = home / "config.toml"

    def mutate(doc: Any) -> bool:
        current = doc.get("trusted_workspaces")
        if current is None:
            if not add:
                return False
            current = tomlkit.array()
            current.multiline(True)
            doc["trusted_workspaces"] = current
        if not isinstance(current, list):
            raise ConfigError([f"{path}: trusted_workspaces: must be a list of paths"])
        # trust is recorded and compared as the canonical path string (see load_config): an entry
        # is never resolved again to decide what is trusted, only to find what to remove
        present = [os.path.normpath(p) for p in current if isinstance(p, str)]
        if add:
            if target in present:
                return False
            current.append(target)
            return True
        changed = False
        for i in reversed(range(len(current))):
            if isinstance(current[i], str) and target in (os.path.normpath(current[i]), _resolved(current[i])):
                del current[i]
                changed = True
        return changed

    return update_settings(home, mutate, lock_timeout=lock_timeout)


def _resolved(path: str) -> str | None:
    try:
        return canonical(path)
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte
        return None


def trust(home: Path, workspace: Path, *, lock_timeout: float = LOCK_TIMEOUT) -> bool:
    """Trust ``workspace`` (by canonical path). Returns False if it already was."""
    if not Path(workspace).is_dir():
        raise ConfigError([f"{workspace}: not a directory"])
    return _trust_edit(home, workspace, add=True, lock_timeout=lock_timeout)


def untrust(home: Path, workspace: Path, *, lock_timeout: float = LOCK_TIMEOUT) -> bool:
    """Stop trusting ``workspace``. Returns False if it was not trusted."""
    return _trust_edit(home, workspace, add=False, lock_timeout=lock_timeout)


def _mcp_table(doc: Any, home: Path) -> Any:
    """The ``[mcp]`` table of a config.toml document, made when it is missing."""
    import tomlkit

    mcp = doc.get("mcp")
    if mcp is None:
        mcp = doc["mcp"] = tomlkit.table()
    if not isinstance(mcp, dict):
        raise ConfigError([f"{home / 'config.toml'}: mcp: must be a table"])
    return mcp


def set_remote_enabled(home: Path, enabled: bool, *, lock_timeout: float = LOCK_TIMEOUT) -> bool:
    """Write ``[mcp] remote_enabled``. Returns False if it already had that value."""

    def mutate(doc: Any) -> bool:
        mcp = _mcp_table(doc, home)
        if mcp.get("remote_enabled") is enabled:
            return False
        mcp["remote_enabled"] = enabled
        return True

    return update_settings(home, mutate, lock_timeout=lock_timeout)


def acknowledge_remote(
    home: Path, keys: list[str], *, enable: bool | None = None, lock_timeout: float = LOCK_TIMEOUT
) -> bool:
    """Add ``keys`` (canonical URLs, :func:`kxen_core.runtime.remote_ack.acknowledgement_key`) to
    ``[mcp] remote_acknowledged`` and, with ``enable``, write ``remote_enabled`` in the same locked,
    atomic change. The list is written even when empty: from then on a remote server it does not
    name stays off. Returns False when nothing changed."""
    import tomlkit

    def mutate(doc: Any) -> bool:
        mcp = _mcp_table(doc, home)
        current = mcp.get("remote_acknowledged")
        changed = False
        if current is None:
            current = tomlkit.array()
            current.multiline(True)
            mcp["remote_acknowledged"] = current
            changed = True
        if not isinstance(current, list):
            raise ConfigError([f"{home / 'config.toml'}: mcp.remote_acknowledged: must be a list of URLs"])
        for key in keys:
            if key not in current:
                current.append(key)
                changed = True
        if enable is not None and mcp.get("remote_enabled") is not enable:
            mcp["remote_enabled"] = enable
            changed = True
        return changed

    return update_settings(home, mutate, lock_timeout=lock_timeout)


def settable_keys(cls: type = Settings, prefix: str = "") -> dict[str, type]:
    """The ``config.toml`` keys ``kxen config set`` writes (``mcp.allow_loopback_http``, ...), each
    with its type: every boolean, integer and string setting, tables followed. Lists and tables of
    their own (trusted workspaces, roles, project tools) have their own commands or are edited by hand."""
    import attrs

    keys: dict[str, type] = {}
    for field in attrs.fields(cls):
        kind = field.type if isinstance(field.type, type) else _resolved_type(cls, field.name)
        kind = _unless_unset(kind)  # ``bool | None``: a switch the user may also leave unwritten
        if attrs.has(kind):
            keys.update(settable_keys(kind, f"{prefix}{field.name}."))
        elif kind in (bool, int, str):
            keys[f"{prefix}{field.name}"] = kind
    return keys


def _unless_unset(kind: Any) -> Any:
    """``X`` for ``X | None``, else ``kind``."""
    import typing

    args = typing.get_args(kind)
    if len(args) == 2 and type(None) in args:
        return next(a for a in args if a is not type(None))
    return kind


def _resolved_type(cls: type, name: str) -> Any:
    import typing

    return typing.get_type_hints(cls).get(name)


def parse_setting(key: str, text: str) -> Any:
    """The value of ``key`` written as ``text`` on the command line: ``true``/``false`` for a
    switch, a decimal integer for a number, the text itself for a string. ConfigError otherwise."""
    keys = settable_keys()
    kind = keys.get(key)
    if kind is None:
        raise ConfigError([f"config set: unknown setting {key!r} (one of: {', '.join(sorted(keys))})"])
    if kind is bool:
        if text not in ("true", "false"):
            raise ConfigError([f"config set: {key}: must be true or false"])
        return text == "true"
    if kind is int:
        body = text[1:] if text[:1] == "-" else text
        if not body.isascii() or not body.isdigit() or len(body) > 18:
            raise ConfigError([f"config set: {key}: must be a whole number"])
        return int(text)
    return text


def set_setting(home: Path, key: str, text: str, *, lock_timeout: float = LOCK_TIMEOUT) -> bool:
    """Write ``key`` (a dotted path of :func:`settable_keys`) as the value ``text`` stands for. The
    whole new file is checked by the loader's rules (bounds included) before it is written; a
    refused change is a ConfigError naming the file, key path and rule, and the file is unchanged.
    ``mcp.remote_enabled true`` is refused: ``kxen remote on`` turns it on. Returns False when the
    key already had that value."""
    import tomlkit

    value = parse_setting(key, text)
    path = home / "config.toml"
    if key == "mcp.remote_enabled" and value is True:
        # turning remote on confirms each remote server first: that is kxen remote on's
        raise ConfigError(
            [f"{path}: mcp.remote_enabled: is turned on with kxen remote on, which confirms each remote server first"]
        )
    *tables, leaf = key.split(".")

    def mutate(doc: Any) -> bool:
        node = doc
        for i, name in enumerate(tables):
            child = node.get(name)
            if child is None:
                child = tomlkit.table()
                node[name] = child
            if not isinstance(child, dict):
                raise ConfigError([f"{path}: {'.'.join(tables[: i + 1])}: must be a table"])
            node = child
        if node.get(leaf) == value and type(node.get(leaf)) is type(value):
            return False
        node[leaf] = value
        problems: list[str] = []
        settings_from(doc.unwrap(), str(path), problems)
        if problems:
            raise ConfigError(problems)
        return True

    return update_settings(home, mutate, lock_timeout=lock_timeout)

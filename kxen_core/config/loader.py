"""Fail-closed loading of config files.

A file that cannot be read, does not parse, or holds an invalid definition makes the whole load fail
with one :class:`ConfigError` listing every problem as ``file: key path: rule``. A broken file is
never read as an empty config, and an illegal policy never falls back to anything.

A user entry whose ``${VAR}`` names a variable that is not set is not an invalid definition: it is
loaded as written with ``unset`` marked (:mod:`.expand`), that server fails in phase ``config`` and
the others run; :attr:`Config.unset_problems` lists it for ``kxen config check``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import attrs
import cattrs
from cattrs.errors import ClassValidationError, IterableValidationError
from cattrs.v import transform_error

from kxen_core.config.converter import SURROGATE_RULE, format_exception, lone_surrogates, shared_converter
from kxen_core.config.expand import expand_server, unset_problems
from kxen_core.config.files import MAX_CONFIG_BYTES, UnreadableFile, read_limited, unsafe_owner  # noqa: F401 (their home was here)
from kxen_core.config.host import HOST_SERVERS, HOST_SETTINGS, held_by_host, plain  # noqa: F401
from kxen_core.config.models import (
    UNREAD,
    Scope,
    ServerConfig,
    Settings,
    check_remote_url,
    check_server_key,
    check_server_shape,
)
from kxen_core.config.paths import resolved
from kxen_core.config.project import project_problems
from kxen_core.errors import ConfigError, printable

if TYPE_CHECKING:
    from kxen_core.plugins.manager import KxenPluginManager

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@attrs.frozen(kw_only=True)
class Config:
    """Everything loaded from the config files of one home and one workspace.

    ``servers`` is the merged view: a project entry replaces the user entry of the same name as a
    whole (never field by field). ``user_servers`` keeps the user entries for fallback when a project
    entry may not start. A project file with any problem is rejected whole: ``project_problems``
    lists why, and none of its servers is in ``servers``.
    """

    home: Path
    workspace: Path
    settings: Settings
    servers: dict[str, ServerConfig]
    user_servers: dict[str, ServerConfig] = attrs.field(factory=dict)
    project_problems: tuple[str, ...] = ()
    trusted: bool = False
    files: tuple[str, ...] = ()

    @property
    def unset_problems(self) -> tuple[str, ...]:
        """``file: key path: rule`` for every user entry's ``${VAR}`` whose variable is not set."""
        return tuple(p for s in self.user_servers.values() for p in unset_problems(s))


def default_home() -> Path:
    env = os.environ.get("KXEN_HOME")
    return Path(env).expanduser() if env else Path.home() / ".kxen"


def _render(file: str, raw: str) -> str:
    """'msg @ $.a.b' -> 'file: a.b: msg'."""
    msg, _, path = raw.rpartition(" @ ")
    if not _:
        msg, path = raw, "$"
    path = path.removeprefix("$").removeprefix(".") or "(top level)"
    return f"{file}: {path}: {msg}"


MISSING = object()  # a file that does not exist (as opposed to one holding JSON null)


def _read(path: Path | str, problems: list[str], parse: Callable[[str], Any], *, private: bool = False) -> Any:
    """The parsed file, ``MISSING`` when it does not exist, or ``None`` after recording a problem.

    The file is read by :func:`read_limited`; its text must be UTF-8 (a BOM is refused, as are
    other encodings) and hold no lone surrogate; parsing is bounded (nesting too deep is a problem,
    not a crash)."""
    kind = "TOML" if str(path).endswith(".toml") else "JSON"
    try:
        data = read_limited(path, private=private)
    except FileNotFoundError:
        return MISSING
    except UnreadableFile as exc:
        problems.append(f"{path}: (file): {exc}")
        return None
    if data.startswith(b"\xef\xbb\xbf"):
        problems.append(f"{path}: (file): not valid {kind}: must be UTF-8 without a byte order mark")
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(f"{path}: (file): not valid {kind}: not UTF-8 text (invalid byte at offset {exc.start})")
        return None
    try:
        data = parse(text)
    except RecursionError:
        problems.append(f"{path}: (file): not valid {kind}: nested too deeply")
        return None
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        problems.append(f"{path}: (file): not valid {kind}: {exc}")
        return None
    # strict UTF-8 text holds no surrogate: a parsed one can only come from an escape (``\u``, ``\U``)
    bad = lone_surrogates(data) if "\\u" in text or "\\U" in text else None
    if bad:  # "\ud800" escapes: valid JSON, but no UTF-8 output (a launch, a message) can carry them
        problems.extend(f"{path}: {where}: {SURROGATE_RULE}" for where in bad)
        return None
    return data


def _structure(conv: cattrs.Converter, data: Any, cls: type, file: str, path: str, problems: list[str]) -> Any:
    try:
        return conv.structure(data, cls)
    except (ClassValidationError, IterableValidationError) as exc:
        for raw in transform_error(exc, path=path, format_exception=format_exception):
            problems.append(_render(file, raw))
    except (ValueError, TypeError) as exc:
        problems.append(_render(file, f"{format_exception(exc, cls)} @ {path}"))
    return None


def load_settings(home: Path | str, problems: list[str], conv: cattrs.Converter | None = None) -> Settings:
    conv = conv or shared_converter()
    path = os.path.join(home, "config.toml")
    before = len(problems)
    data = _read(path, problems, tomllib.loads, private=True)
    if data is MISSING or len(problems) > before:
        return Settings()
    return settings_from(data, str(path), problems, conv)


def settings_from(data: Any, file: str, problems: list[str], conv: cattrs.Converter | None = None) -> Settings:
    """The settings of a parsed ``config.toml`` (``data``) named ``file``: what :func:`load_settings`
    does after reading, so a change is checked by the same rules before it is written."""
    return _structure(conv or shared_converter(), data, Settings, file, "$", problems) or Settings()


def _entries(data: Any, file: str, problems: list[str]) -> dict[Any, Any] | None:
    """The ``mcpServers`` object of a parsed ``mcp.json``, or None after recording why not."""
    if not isinstance(data, dict):
        problems.append(f"{file}: (top level): must be a JSON object with 'mcpServers'")
        return None
    extra = sorted(k for k in data if k != "mcpServers")
    if extra:
        hint = " (did you mean 'mcpServers'? kxen mcp import converts other hosts' files)" if "servers" in extra else ""
        problems.append(f"{file}: (top level): unknown key(s): {', '.join(map(str, extra))}{hint}")
    entries = data.get("mcpServers", {})
    if not isinstance(entries, dict):
        problems.append(f"{file}: mcpServers: must be an object of server definitions")
        return None
    return entries


def load_servers(
    path: Path | str,
    scope: str,
    problems: list[str],
    conv: cattrs.Converter | None = None,
    settings: Settings | None = None,
    pm: KxenPluginManager | None = None,
    *,
    settings_file: str | None = None,
) -> dict[str, ServerConfig]:
    """Read one ``mcp.json``; every problem goes to ``problems``, valid entries are returned.

    With ``pm``, each entry's transport kind must be registered and its ``options`` must structure
    into the kind's options class."""
    before = len(problems)
    data = _read(path, problems, json.loads, private=scope == "user")
    if data is MISSING or len(problems) > before:
        return {}
    return servers_from(data, str(path), scope, problems, conv, settings, pm, settings_file=settings_file)


def servers_from(
    data: Any,
    file: str,
    scope: str,
    problems: list[str],
    conv: cattrs.Converter | None = None,
    settings: Settings | None = None,
    pm: KxenPluginManager | None = None,
    *,
    settings_file: str | None = None,
) -> dict[str, ServerConfig]:
    """The servers of a parsed ``mcp.json`` (``data``) named ``file``: what :func:`load_servers` does
    after reading, so a file's new content is checked by the same rules before it is written.
    ``settings_file`` (the user's config.toml) is named by a rule that a setting there would lift."""
    conv = conv or shared_converter()
    entries = _entries(data, file, problems)
    if entries is None:
        return {}
    servers: dict[str, ServerConfig] = {}
    registry = pm.transports if pm is not None else None
    for key, entry in entries.items():
        where = f"$.mcpServers.{key}"
        rule = check_server_key(key)
        if rule:
            problems.append(_render(file, f"{rule} (got {key!r}) @ {where}"))
            continue
        if not isinstance(entry, dict):
            problems.append(_render(file, f"a server definition must be an object @ {where}"))
            continue
        server = _structure(conv, entry, ServerConfig, file, where, problems)
        if server is None:
            continue
        server, shape = expand_server(server, scope)  # ${VAR} from the host environment (user config only)
        # a URL still holding an unset ${VAR} is checked once it is set: only the written shape now
        url_rules = (
            []
            if server.unset and "${" in (server.url or "")
            else _url_problems(server, settings or Settings(), settings_file)
        )
        shape = shape or check_server_shape(server) + url_rules
        if registry is not None and not shape:
            # the plugins that failed to load are named only for a kind nobody serves
            shape = registry.check(
                server, conv, pm.broken() if pm is not None and registry.get(server.kind) is None else ()
            )
        for suffix, rule in shape:
            problems.append(_render(file, f"{rule} @ {where}.{suffix}" if suffix else f"{rule} @ {where}"))
        if not shape:
            servers[key] = attrs.evolve(server, name=key, scope=cast(Scope, scope), source=file)
    return servers


def project_file_name(workspace: Path | str) -> str:
    """The project file of ``workspace``, as a string (what the loader reads and reports)."""
    return os.path.join(workspace, ".kxen", "mcp.json")


def project_file(workspace: Path) -> Path:
    return Path(project_file_name(workspace))


#: the most project server names an untrusted workspace's file may show
MAX_UNREAD_NAMES = 100


def unread_project_servers(path: Path | str, problems: list[str]) -> dict[str, ServerConfig]:
    """The project entries of an *untrusted* workspace, by name only.

    The file gets the same bounded, non-blocking read as any config file and is decoded as JSON, but
    its entries are not structured, validated or resolved: only the names under ``mcpServers`` are
    kept (at most :data:`MAX_UNREAD_NAMES`), each as a placeholder whose transport is
    :data:`UNREAD`. The file's shape (an object whose only key is ``mcpServers``, valid server
    names) is checked, and a file that breaks it is rejected whole. That is what status needs to
    say "this workspace has servers that wait for trust"; what they would run is read once the
    workspace is trusted."""
    file = str(path)
    before = len(problems)
    data = _read(path, problems, json.loads)
    if data is MISSING or len(problems) > before:
        return {}
    entries = _entries(data, file, problems)
    if entries is None:
        return {}
    for key in entries:  # the names are all that is shown: they must be valid names
        rule = check_server_key(key)
        if rule:
            problems.append(_render(file, f"{rule} (got {key!r}) @ $.mcpServers.{key}"))
    if len(problems) > before:
        return {}  # rejected whole, as a trusted workspace's file would be
    names = list(entries)
    if len(names) > MAX_UNREAD_NAMES:
        problems.append(
            f"{file}: mcpServers: more than {MAX_UNREAD_NAMES} servers; the first {MAX_UNREAD_NAMES} are shown"
        )
    return {
        name: ServerConfig(name=name, scope="project", source=file, transport=UNREAD)
        for name in names[:MAX_UNREAD_NAMES]
    }


def canonical(path: Path | str) -> str:
    return str(resolved(Path(path).expanduser()))


def _url_problems(server: ServerConfig, settings: Settings, settings_file: str | None) -> list[tuple[str, str]]:
    allow = settings.mcp.allow_loopback_http
    out = []
    if server.is_remote and server.url is not None:
        rule = check_remote_url(server.url, allow_loopback_http=allow, settings_file=settings_file)
        if rule:
            out.append(("url", rule))
    for key in ("authorizationServerMetadataUrl", "idpTokenEndpoint"):
        value = getattr(server.oauth, key) if server.oauth else None
        if value is not None:
            rule = check_remote_url(value, allow_loopback_http=allow, settings_file=settings_file)
            if rule:
                out.append((f"oauth.{key}", rule))
    return out


def load_config(
    home: Path | None = None,
    workspace: Path | None = None,
    *,
    pm: KxenPluginManager | None = None,
    canonical: bool = False,
    servers: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Config:
    """Load settings, user servers and project servers.

    ``servers`` (the content of a user ``mcp.json``: ``{"mcpServers": {...}}``) and ``settings``
    (the content of ``config.toml`` as a mapping) are a host's own config: each stands in for its
    file in ``home``, checked by the same rules, with the same scope (user); a problem names
    :data:`HOST_SERVERS` or :data:`HOST_SETTINGS` and the key path. The project file is read from
    the workspace as always (trusted per the settings' ``trusted_workspaces``).

    With ``pm`` (as the Runtime and the CLI load), every entry's transport kind and options are
    checked against the kinds its plugins registered; without, only the core's own rules apply.

    A problem in user settings or user servers raises :class:`ConfigError` listing every problem:
    nothing is half-loaded. In an untrusted workspace the project file gives only its server names
    (:func:`unread_project_servers`). A problem in the project file rejects that file whole (its servers are
    left out and the problems are returned in ``project_problems``); the user's servers still load.
    """
    home = Path(home) if home is not None else default_home()
    # ``canonical``: the caller resolved it already (a Runtime, once, when it was made)
    workspace = workspace if canonical and workspace is not None else resolved(workspace or Path.cwd())
    conv = shared_converter()
    problems: list[str] = []
    if settings is not None:
        settings_file = HOST_SETTINGS
        loaded = settings_from(plain(settings), settings_file, problems, conv)
    else:
        settings_file = os.path.join(home, "config.toml")
        loaded = load_settings(home, problems, conv)
    if servers is not None:
        user_file = HOST_SERVERS
        user = servers_from(plain(servers), user_file, "user", problems, conv, loaded, pm, settings_file=settings_file)
    else:
        user_file = os.path.join(home, "mcp.json")
        user = load_servers(user_file, "user", problems, conv, loaded, pm, settings_file=settings_file)
    if problems:
        raise ConfigError(problems)

    # the recorded strings as they are (only normalized as text): resolving them again here would
    # let a symlink planted later at a trusted path carry the trust to wherever it points
    trusted = str(workspace) in {os.path.normpath(p) for p in loaded.trusted_workspaces}
    pfile = project_file_name(workspace)
    pproblems: list[str] = []
    if not trusted:  # a repository the user merely opened: its servers' names, nothing more
        project = unread_project_servers(pfile, pproblems)
    else:
        project = load_servers(pfile, "project", pproblems, conv, loaded, pm, settings_file=settings_file)
        for name, server in project.items():
            for suffix, rule in project_problems(server):
                pproblems.append(_render(pfile, f"{rule} @ $.mcpServers.{name}.{suffix}"))
        if pproblems:
            project = {}
    merged = dict(user)
    merged.update(project)  # whole-entry replacement
    return Config(
        home=home,
        workspace=workspace,
        settings=loaded,
        servers=merged,
        user_servers=user,
        project_problems=tuple(map(printable, pproblems)),  # keys from a repository: one safe line each
        trusted=trusted,
        files=(settings_file, user_file, pfile),
    )

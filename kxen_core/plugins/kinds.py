"""The registry of transport kinds: who provides each kind, its options class and its opener.

Plugins declare their kinds through ``kxen_register_transports(register)``; the registry asks each
implementation on its own, so it knows which plugin claimed which kind. A kind claimed by two
plugins is a load failure naming both, and neither serves it (fail closed: config naming that kind
is rejected with the clash as the reason). A registration that raises or is malformed is a load
failure of that plugin, whose kinds are then left out.

The config loader checks every server entry against the registry: an unknown kind is a problem on
``transport`` with a "did you mean" for near misses (unless a plugin failed to load: it may be the
one providing that kind, so the server fails closed when it starts, naming the failure); ``options`` are structured
into the kind's attrs
class by the host's one converter, so a typo or a bad value is a problem with its key path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from kxen_core.errors import ConfigError

if TYPE_CHECKING:
    import cattrs
    import pluggy

    from kxen_core.config.models import ServerConfig
    from kxen_core.transport import Opener

Options = TypeVar("Options")

KIND_NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
#: the built-in kinds and the extra that installs each
EXTRAS = {"stdio": "stdio", "http": "http", "sse": "sse"}
#: names other MCP hosts use for a kind (compared without case, '-' and '_')
ALIASES = {"streamablehttp": "http", "shttp": "http", "httpstream": "http", "local": "stdio", "command": "stdio"}


@attrs.frozen(kw_only=True)
class TransportKind:
    """One registered kind."""

    name: str
    opener: Opener
    options: type | None  # an attrs class, or None for a kind without options
    plugin: str  # the plugin that registered it


@attrs.define
class TransportRegistry:
    kinds: dict[str, TransportKind] = attrs.field(factory=dict)
    #: kind -> every plugin (registered name) that claimed it, for kinds claimed twice (served by none)
    clashes: dict[str, list[str]] = attrs.field(factory=dict)
    #: plugins (registered name) whose registration failed -> why
    broken: dict[str, str] = attrs.field(factory=dict)
    #: how to show a plugin in messages (``dist[entry point]`` for entry points)
    display: Callable[[str], str] = str

    def get(self, name: str) -> TransportKind | None:
        return self.kinds.get(name)

    def names(self) -> list[str]:
        return sorted(self.kinds)

    def by_plugin(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for kind in self.kinds.values():
            out.setdefault(kind.plugin, []).append(kind.name)
        return {p: sorted(k) for p, k in out.items()}

    def unknown_rule(self, name: str, broken: Sequence[str] = ()) -> str:
        """Why ``name`` cannot be used, with a hint: a clash, a near miss, the extra to install.
        ``broken`` names the plugins that failed to load (``dist[entry point] (error)``)."""
        shown = name if len(name) <= 40 else name[:37] + "..."
        if name in self.clashes:
            plugins = ", ".join(map(self.display, self.clashes[name]))
            return f"transport kind {shown!r} is claimed by more than one plugin ({plugins}); none serves it"
        rule = f"unknown transport kind {shown!r}"
        alias = ALIASES.get(re.sub(r"[-_]", "", name.lower()))
        import difflib  # only for a name that is not served: not on every import

        near = [alias] if alias else difflib.get_close_matches(name, self.names() or list(EXTRAS), n=1, cutoff=0.5)
        hints = []
        if name in EXTRAS:
            hints.append(f"install kxen[{EXTRAS[name]}] to get it")
        elif near:
            hints.append(f"did you mean {near[0]!r}?")
        hints.append("installed kinds: " + (", ".join(self.names()) or "none"))
        if broken:
            hints.append("plugins that failed to load: " + ", ".join(broken))
        return f"{rule} ({'; '.join(hints)})"

    def check(self, server: ServerConfig, conv: cattrs.Converter, broken: Sequence[str] = ()) -> list[tuple[str, str]]:
        """``(key path suffix, rule)`` for a kind that is not served or options that do not fit."""
        kind = self.kinds.get(server.kind)
        if kind is None:
            if server.kind not in self.clashes and broken:
                # a plugin that failed to load may be the one providing it: that server fails
                # closed when it starts, naming the failure; the rest of the config still loads
                return []
            return [("transport" if server.transport is not None else "", self.unknown_rule(server.kind, broken))]
        if kind.options is None:
            if server.options:
                return [("options", f"transport kind {kind.name!r} takes no options")]
            return []
        problems: list[tuple[str, str]] = []
        _structure(conv, server.options, kind.options, problems)
        return problems

    def options_for(self, server: ServerConfig, conv: cattrs.Converter) -> Any:
        """The structured options of ``server`` (already checked at load); ``ConfigError`` if not."""
        kind = self.kinds.get(server.kind)
        if kind is None or kind.options is None:
            return None
        return structure_options(kind.options, server, conv)


def structure_options(cls: type[Options], server: ServerConfig, conv: cattrs.Converter | None = None) -> Options:
    """``server.options`` structured into ``cls`` exactly as config loading does it; raises
    ``ConfigError`` naming the file and key path of every problem. For a transport used without a
    Runtime (tests, embedding), whose context carries no options."""
    if conv is None:
        from kxen_core.config.converter import make_converter

        conv = make_converter()
    problems: list[tuple[str, str]] = []
    value = _structure(conv, server.options, cls, problems)
    if problems:
        where = f"{server.source or '(config)'}: mcpServers.{server.name}"
        raise ConfigError([f"{where}.{path}: {rule}" for path, rule in problems])
    return value


def _structure(conv: cattrs.Converter, data: Any, cls: type, problems: list[tuple[str, str]]) -> Any:
    if not isinstance(data, dict):
        problems.append(("options", "must be an object"))
        return None
    try:
        return conv.structure(data, cls)
    except Exception as exc:
        # cattrs' error types are imported only for an error: the plugin manager needs none of cattrs,
        # and an import statement on the path every server start takes costs microseconds
        from cattrs.errors import ClassValidationError, IterableValidationError
        from cattrs.v import transform_error

        from kxen_core.config.converter import format_exception

        if isinstance(exc, (ClassValidationError, IterableValidationError)):
            for raw in transform_error(exc, path="$", format_exception=format_exception):
                msg, _, path = raw.rpartition(" @ ")
                problems.append(("options" + path.removeprefix("$"), msg))
        elif isinstance(exc, (ValueError, TypeError)):
            problems.append(("options", format_exception(exc, cls)))
        else:
            raise
    return None


def collect(pm: pluggy.PluginManager, display: Callable[[str], str] = str) -> TransportRegistry:
    """Ask every ``kxen_register_transports`` implementation on its own, in pluggy's order."""
    registry = TransportRegistry(display=display)
    claimed: dict[str, list[TransportKind]] = {}
    for impl in reversed(pm.hook.kxen_register_transports.get_hookimpls()):
        name = impl.plugin_name
        mine: list[TransportKind] = []

        def register(
            kind: str, opener: Opener, *, options: type | None = None, _mine: list = mine, _name: str = name
        ) -> None:
            if not isinstance(kind, str) or not KIND_NAME_RE.fullmatch(kind):
                raise ValueError(
                    f"transport kind names are 1-32 characters of a-z 0-9 _ -, starting with a letter (got {kind!r})"
                )
            if not callable(opener):
                raise TypeError(f"the opener of transport kind {kind!r} is not callable")
            if options is not None and not attrs.has(options):
                raise TypeError(f"the options of transport kind {kind!r} must be an attrs class")
            if any(k.name == kind for k in _mine):
                raise ValueError(f"transport kind {kind!r} registered twice")
            _mine.append(TransportKind(name=kind, opener=opener, options=options, plugin=_name))

        try:
            impl.function(*[{"register": register}[a] for a in impl.argnames])
        except BaseException as exc:  # a broken registration (SystemExit too) loses that plugin's kinds, nothing else
            registry.broken[name] = f"{type(exc).__name__}: {exc}"
            continue
        for kind in mine:
            claimed.setdefault(kind.name, []).append(kind)
    for kind_name, kinds in claimed.items():
        if len(kinds) == 1:
            registry.kinds[kind_name] = kinds[0]
        else:
            registry.clashes[kind_name] = sorted(k.plugin for k in kinds)
    return registry


__all__ = ["TransportKind", "TransportRegistry", "collect", "structure_options"]

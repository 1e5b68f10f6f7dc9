"""The plugin manager factory and isolated entry-point loading.

Loading happens in two phases (as flake8 does): first every entry point of the ``kxen`` group is
discovered without importing anything, then each is imported on its own inside ``try``. A plugin
that fails to import is recorded as a :class:`LoadFailure` and reported; the host keeps running.

``KXEN_LOAD_PLUGINS`` (comma-separated entry-point or distribution names) is an allowlist: when set,
only those are loaded (set it empty to load none). ``KXEN_DISABLE_PLUGINS`` is a blocklist.

Hardening:

- Discovery reads distributions only from :func:`search_path`: ``sys.path`` without ``''``, relative
  entries and the current directory, so a repository's ``*.dist-info`` in the cwd of an embedding
  host (``python -c``, ``python -m``, a REPL) is never taken for an installed plugin. A distribution
  found twice (the same normalized name) counts once, the first on the path, as the import system
  would use it.
- An entry-point name claimed by more than one distribution is loaded from none of them: each is a
  load failure naming every claimant (as a transport kind claimed twice is served by none,
  :mod:`.kinds`). Blocking one (``KXEN_DISABLE_PLUGINS=dist``) lets the other load.
- Anything raised at import or registration, ``SystemExit`` and ``KeyboardInterrupt`` included, is a
  load failure of that plugin (import is synchronous: no cancellation can be delivered inside it).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import pluggy

from kxen_core import hookspecs
from kxen_core.hookcall import check_async_impls, tracing

if TYPE_CHECKING:
    from kxen_core.plugins.kinds import TransportRegistry

import importlib.metadata as importlib_metadata  # the one metadata seam; tests monkeypatch it

GROUP = "kxen"


@attrs.frozen(kw_only=True)
class PluginInfo:
    name: str
    dist: str | None
    version: str | None
    entry_point: str | None
    source: str  # "entry point" | "default" | "registered"
    hooks: tuple[str, ...]
    transports: tuple[str, ...] = ()  # the transport kinds it registered


@attrs.frozen(kw_only=True)
class LoadFailure:
    dist: str | None
    entry_point: str
    error: str
    skipped: bool = False  # True when blocked or not allowlisted: not an error, just not loaded

    def display(self) -> str:
        return f"{self.dist or '?'}[{self.entry_point}]"


class _Discovered:
    """An entry point and, read only when someone asks, its distribution's name and version
    (reading them parses the distribution's metadata, which start-up does not need)."""

    def __init__(self, ep: Any) -> None:
        self.ep = ep
        self._meta: tuple[str | None, str | None] | None = None

    def _read(self) -> tuple[str | None, str | None]:
        if self._meta is None:
            dist = getattr(self.ep, "dist", None)
            try:
                name, version = (dist.metadata["Name"], dist.version) if dist is not None else (None, None)
            except Exception:  # unreadable metadata (bad encoding, ...): shown as '?', never fatal
                name, version = None, None
            self._meta = (name if isinstance(name, str) else None, version if isinstance(version, str) else None)
        return self._meta

    @property
    def dist(self) -> str | None:
        return self._read()[0]

    @property
    def version(self) -> str | None:
        return self._read()[1]


def _split_env(name: str) -> set[str] | None:
    raw = os.environ.get(name)
    if raw is None:
        return None
    return {p.strip() for p in raw.split(",") if p.strip()}


def search_path(path: Sequence[Any] | None = None) -> list[str]:
    """``path`` (default ``sys.path``) without the entries that mean the current directory: ``''``,
    relative entries, non-strings, and the cwd itself (compared after resolving links)."""
    try:
        cwd: str | None = os.path.realpath(os.getcwd())
    except OSError:  # the cwd was removed: relative entries are dropped anyway
        cwd = None
    out = []
    for entry in sys.path if path is None else path:
        if not isinstance(entry, str) or not entry or not os.path.isabs(entry):
            continue
        if cwd is not None and os.path.realpath(entry) == cwd:
            continue
        out.append(entry)
    return out


def _dist_key(dist: Any) -> str:
    name = getattr(dist, "_normalized_name", None)  # the folder name, as importlib.metadata dedups
    if not isinstance(name, str):
        try:
            name = dist.metadata["Name"]
        except Exception:
            name = None
    if not isinstance(name, str) or not name:
        return f"<unnamed {id(dist)}>"
    return re.sub(r"[-_.]+", "_", name).lower()


def discover(failures: list[LoadFailure] | None = None) -> list[_Discovered]:
    """Every entry point in the ``kxen`` group of the distributions on :func:`search_path`, sorted,
    nothing imported. A distribution whose entry points cannot be read is left out (and added to
    ``failures``, if given)."""
    found: list[_Discovered] = []
    seen: set[str] = set()
    for dist in importlib_metadata.distributions(path=search_path()):
        key = _dist_key(dist)
        if key in seen:  # shadowed by the same distribution earlier on the path
            continue
        seen.add(key)
        try:
            mine = [ep for ep in dist.entry_points if ep.group == GROUP]
        except Exception as exc:  # a malformed entry_points.txt: that dist only
            if failures is not None:
                failures.append(
                    LoadFailure(
                        dist=key, entry_point="?", error=f"unreadable entry points: {type(exc).__name__}: {exc}"
                    )
                )
            continue
        found.extend(_Discovered(ep) for ep in mine)
    found.sort(key=lambda d: (d.ep.name, getattr(d.ep, "value", "")))
    return found


class KxenPluginManager(pluggy.PluginManager):
    """A pluggy manager that also remembers where each plugin came from, what failed, and which
    transport kinds each plugin registered."""

    def __init__(self) -> None:
        super().__init__("kxen")
        self.add_hookspecs(hookspecs)
        self.origins: dict[str, tuple[str, _Discovered | None]] = {}
        #: entry points that could not be loaded (or were skipped by the allow/block lists)
        self.entry_failures: list[LoadFailure] = []
        self._transports: tuple[tuple[Any, ...], TransportRegistry] | None = None
        #: bumped by every change of the registered plugins: what was derived from the hook
        #: implementations (the prepared policy votes' list of them) is then stale
        self.generation = 0

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        try:
            return super().register(plugin, name)
        finally:
            self.generation += 1

    def unregister(self, plugin: Any = None, name: str | None = None) -> Any:
        try:
            return super().unregister(plugin, name)
        finally:
            self.generation += 1

    def add_hookspecs(self, module_or_class: Any) -> None:
        try:
            super().add_hookspecs(module_or_class)
        finally:
            self.generation = getattr(self, "generation", 0) + 1

    @property
    def transports(self) -> TransportRegistry:
        """The registry of transport kinds, collected once and again only when the registered
        ``kxen_register_transports`` implementations change."""
        impls = tuple(self.hook.kxen_register_transports.get_hookimpls())
        cached = self._transports
        if cached is None or cached[0] != impls:
            from kxen_core.plugins.kinds import collect  # on first use: making the manager does not need it

            cached = self._transports = (impls, collect(self, self.display_name))
        return cached[1]

    @property
    def failures(self) -> list[LoadFailure]:
        """Every load failure: entry points that did not load, registrations that raised, and
        transport kinds claimed by more than one plugin."""
        registry = self.transports
        out = list(self.entry_failures)
        for name, error in sorted(registry.broken.items()):
            out.append(self._failure(name, f"kxen_register_transports raised {error}"))
        for kind, plugins in sorted(registry.clashes.items()):
            for name in plugins:
                others = ", ".join(self.display_name(p) for p in plugins if p != name)
                out.append(
                    self._failure(name, f"transport kind {kind!r} is also claimed by {others}; neither serves it")
                )
        return out

    def broken(self) -> list[str]:
        """The plugins that failed to load, as ``dist[entry point] (error)``: for messages."""
        return [f"{f.display()} ({f.error[:200]})" for f in self.failures if not f.skipped]

    def _failure(self, name: str, error: str) -> LoadFailure:
        _source, found = self.origins.get(name, ("registered", None))
        if found is not None:
            return LoadFailure(dist=found.dist, entry_point=found.ep.name, error=error)
        return LoadFailure(dist=None, entry_point=name, error=error)

    def display_name(self, name: str) -> str:
        """``dist[entry point]`` for a plugin from an entry point, else its registered name."""
        _source, found = self.origins.get(name, ("registered", None))
        return f"{found.dist or '?'}[{found.ep.name}]" if found is not None else name

    def register_from(
        self,
        plugin: Any,
        name: str,
        *,
        source: str,
        discovered: _Discovered | None = None,
    ) -> None:
        self.register(plugin, name=name)
        self.origins[name] = (source, discovered)

    def infos(self) -> list[PluginInfo]:
        kinds = self.transports.by_plugin()
        out = []
        for name, plugin in self.list_name_plugin():
            if plugin is None:
                continue
            source, found = self.origins.get(name, ("registered", None))
            hooks = tuple(sorted(h.name for h in self.get_hookcallers(plugin) or ()))
            out.append(
                PluginInfo(
                    name=name,
                    dist=found.dist if found else None,
                    version=found.version if found else None,
                    entry_point=found.ep.name if found else None,
                    source=source,
                    hooks=hooks,
                    transports=tuple(kinds.get(name, ())),
                )
            )
        out.sort(key=lambda p: (p.source != "entry point", p.name))
        return out


def make_plugin_manager(
    *,
    load_entrypoints: bool = True,
    allow: Iterable[str] | None = None,
    block: Sequence[str] = (),
    extra: Sequence[Any] = (),
) -> KxenPluginManager:
    """Return a fresh, configured plugin manager.

    Defaults are registered first (they are ``trylast`` and pluggy calls LIFO, so they run last),
    then entry points one at a time, then ``extra`` plugins (tests, embedding hosts).
    """
    from kxen_core.policy import defaults  # the core's own fail-closed default implementations

    pm = KxenPluginManager()
    for name, plugin in defaults.DEFAULT_PLUGINS.items():
        pm.register_from(plugin, name, source="default")

    if load_entrypoints:
        env_allow = _split_env("KXEN_LOAD_PLUGINS")
        allow_set = set(allow) if allow is not None else env_allow
        block_set = set(block) | (_split_env("KXEN_DISABLE_PLUGINS") or set())
        wanted = []
        for d in discover(pm.entry_failures):
            # the dist name is read only when a list could name it
            names = {d.ep.name, d.dist or ""} if (allow_set is not None or block_set) else {d.ep.name}
            if (allow_set is not None and not names & allow_set) or names & block_set:
                pm.entry_failures.append(
                    LoadFailure(
                        dist=d.dist, entry_point=d.ep.name, error="not loaded (allowlist/blocklist)", skipped=True
                    )
                )
                continue
            wanted.append(d)
        claims: dict[str, list[_Discovered]] = {}
        for d in wanted:
            claims.setdefault(d.ep.name, []).append(d)
        for d in wanted:
            claimants = claims[d.ep.name]
            if len(claimants) > 1:  # nobody wins a name: each claimant fails, naming the others
                others = ", ".join(
                    f"{o.dist or '?'}[{o.ep.name}] ({getattr(o.ep, 'value', '?')})" for o in claimants if o is not d
                )
                pm.entry_failures.append(
                    LoadFailure(
                        dist=d.dist,
                        entry_point=d.ep.name,
                        error=f"entry point name {d.ep.name!r} is also claimed by {others}; none of them is loaded"
                        " (block the one you do not want with KXEN_DISABLE_PLUGINS)",
                    )
                )
                continue
            if pm.has_plugin(d.ep.name):
                pm.entry_failures.append(
                    LoadFailure(
                        dist=d.dist,
                        entry_point=d.ep.name,
                        error=f"entry point name {d.ep.name!r} is already taken by another plugin",
                    )
                )
                continue
            try:
                plugin = d.ep.load()
                pm.register_from(plugin, d.ep.name, source="entry point", discovered=d)
                _validate(pm, plugin)
            except BaseException as exc:  # a broken plugin must never take the host down, not even by SystemExit
                if pm.has_plugin(d.ep.name):
                    pm.unregister(name=d.ep.name)
                    pm.origins.pop(d.ep.name, None)
                pm.entry_failures.append(
                    LoadFailure(dist=d.dist, entry_point=d.ep.name, error=f"{type(exc).__name__}: {exc}")
                )
    for i, plugin in enumerate(extra):
        pm.register_from(plugin, getattr(plugin, "__name__", None) or f"extra-{i}", source="registered")
    pm.check_pending()
    check_async_impls(pm)
    if os.environ.get("KXEN_TRACE_PLUGINS") == "1" or tracing():
        _trace(pm)  # -vv or KXEN_TRACE_PLUGINS=1 (see kxen_core.cli.setup)
    return pm


def _trace(pm: KxenPluginManager) -> None:
    """Log every sync hook call (async-capable ones are traced by kxen_core.hookcall)."""
    import logging

    log = logging.getLogger("kxen.hooks")

    def before(hook_name: str, impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        log.debug("%s(%s) -> %s", hook_name, ", ".join(sorted(kwargs)), [i.plugin_name for i in impls])

    def after(outcome: Any, hook_name: str, impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        exc = outcome.exception
        log.debug("%s <- %s", hook_name, type(exc).__name__ if exc else type(outcome.get_result()).__name__)

    pm.add_hookcall_monitoring(before, after)


def _validate(pm: KxenPluginManager, plugin: Any) -> None:
    """What ``check_pending`` and ``check_async_impls`` would say, for one plugin only."""
    for caller in pm.get_hookcallers(plugin) or ():
        if not caller.has_spec():
            raise pluggy.PluginValidationError(plugin, f"unknown hook {caller.name!r} (misspelled?)")
        if caller.name in hookspecs.ASYNC_HOOKS:
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin and (impl.wrapper or impl.hookwrapper):
                    raise pluggy.PluginValidationError(
                        plugin, f"{caller.name} is async-capable and cannot take a wrapper"
                    )

"""What the model is shown of a server's tools: the filters of every layer that speaks for the
server, and the policy's own ``deny``.

A tool is **filtered** when a layer hides it. The layers of a server (:func:`layers_for`):

* a user server: its own entry's ``enabledTools``, ``disabledTools`` and ``annotationFilter``;
* a project server: the project entry's, then the user entry of the same name's (a project entry
  replaces it, but cannot bring back what the user hid there), then every ``[[project_filters]]``
  rule of the user's settings for this server and workspace.

Every layer must let a tool through (they intersect), so what a project file writes only ever takes
tools away. Within a layer a tool passes when ``enabledTools`` is absent or one of its patterns
matches, no ``disabledTools`` pattern matches, and its annotations say what ``annotationFilter``
asks (:mod:`kxen_core.config.filters` has the pattern rule and MCP's defaults for absent hints).

A tool is **denied** when a vote of the policy that cannot change between calls says ``deny``:
the config's (``toolPolicies``, ``defaultToolPolicy`` without an allow, a project's
``[[project_tools]]`` rule) and the acting role's (:func:`kxen_core.policy.votes.fixed`), so a veto
no other vote can lift. Votes on the arguments and plugins' votes are not asked: they may differ
per call.

The runtime computes both once per catalog and config (:mod:`kxen_core.runtime.server_filters`);
nothing here runs per call.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from kxen_core import hookcall
from kxen_core.config.filters import HINT_DEFAULTS, is_glob
from kxen_core.policy import ToolCall
from kxen_core.policy.votes import HOOK, fixed

if TYPE_CHECKING:
    import pluggy

    from kxen_core.config.filters import AnnotationFilter
    from kxen_core.config.models import ServerConfig
    from kxen_core.config.settings import Settings


@attrs.frozen
class Matcher:
    """A list of patterns made ready: exact names in a set, the globs in one regular expression
    (fnmatch's own translation, case-sensitive)."""

    names: frozenset[str]
    globs: tuple[str, ...]
    regex: re.Pattern[str] | None

    @classmethod
    def of(cls, patterns: Iterable[str]) -> Matcher:
        import fnmatch

        patterns = list(dict.fromkeys(patterns))
        globs = tuple(p for p in patterns if is_glob(p))
        regex = re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs)) if globs else None
        return cls(frozenset(p for p in patterns if not is_glob(p)), globs, regex)

    def match(self, name: str) -> str | None:
        """The pattern that matches ``name`` (the exact name first), or None."""
        if name in self.names:
            return name
        if self.regex is None or self.regex.match(name) is None:
            return None
        import fnmatch

        return next(g for g in self.globs if fnmatch.fnmatchcase(name, g))


@attrs.frozen
class Layer:
    """One source of filters: the keys as a message names them, and where they were written."""

    where: str  # "(user config)", "of the user entry 'x' (user config)", ...
    keys: tuple[str, str, str]  # the names of enabledTools, disabledTools, annotationFilter there
    enabled: Matcher | None
    disabled: Matcher | None
    wanted: tuple[tuple[str, bool], ...]

    @property
    def exact_names(self) -> frozenset[str]:
        """The exact tool names it writes (a name no tool has is most likely a typo)."""
        return (self.enabled.names if self.enabled else frozenset()) | (
            self.disabled.names if self.disabled else frozenset()
        )

    def hides(self, name: str, info: Mapping[str, Any]) -> str | None:
        """Why this layer hides the tool ``name`` (catalog entry ``info``), or None."""
        if self.enabled is not None and self.enabled.match(name) is None:
            return f"filtered by {self.keys[0]} {self.where}"
        if self.disabled is not None:
            pattern = self.disabled.match(name)
            if pattern is not None:
                return f"filtered by {self.keys[1]} {pattern!r} {self.where}"
        if self.wanted:
            raw = info.get("annotations")
            given = raw if isinstance(raw, dict) else {}
            for hint, want in self.wanted:
                value = given.get(hint, HINT_DEFAULTS[hint])
                if value is not want:  # not a boolean: matches nothing
                    said = (
                        f"{_json(value)} (not given: MCP's default)"
                        if hint not in given
                        else (_json(value) if isinstance(value, bool) else "not a boolean")
                    )
                    key = f"{self.keys[2]}.{hint}"
                    return f"filtered by {key} {self.where}: the tool's {hint} is {said}, not {_json(want)}"
        return None


def _json(value: bool) -> str:
    return "true" if value else "false"


def layer(
    where: str,
    keys: tuple[str, str, str],
    enabled: Sequence[str] | None,
    disabled: Sequence[str],
    annotations: AnnotationFilter | None,
) -> Layer | None:
    """The layer of one source, or None when it filters nothing."""
    wanted = annotations.wanted() if annotations is not None else ()
    if enabled is None and not disabled and not wanted:
        return None
    return Layer(
        where=where,
        keys=keys,
        enabled=Matcher.of(enabled) if enabled is not None else None,
        disabled=Matcher.of(disabled) if disabled else None,
        wanted=wanted,
    )


ENTRY_KEYS = ("enabledTools", "disabledTools", "annotationFilter")
SETTINGS_KEYS = ("enabled_tools", "disabled_tools", "annotation_filter")


def _entry_layer(server: ServerConfig, where: str) -> Layer | None:
    return layer(where, ENTRY_KEYS, server.enabledTools, server.disabledTools, server.annotationFilter)


def layers_for(
    server: ServerConfig,
    *,
    user_entry: ServerConfig | None = None,
    settings: Settings | None = None,
    workspace: str | os.PathLike[str] | None = None,
) -> tuple[Layer, ...]:
    """The layers that speak for ``server`` (what runs: the project entry, or a user entry standing
    in): see the module docstring. ``user_entry`` is the user's entry of the same name, if any;
    ``workspace`` the canonical workspace the project file came from."""
    if server.scope != "project":
        own = _entry_layer(server, "(user config)")
        return (own,) if own is not None else ()
    found = [_entry_layer(server, "(project config)")]
    if user_entry is not None:
        found.append(_entry_layer(user_entry, f"of the user entry {server.name!r} (user config)"))
    rules = settings.project_filters if settings is not None else ()
    if rules and workspace is not None:
        from kxen_core.launch.launchers import inside

        here = os.fspath(workspace)
        for i, rule in enumerate(rules):
            if rule.server == server.name and inside(here, os.path.normpath(rule.workspace)):
                enabled, disabled, annotations = (f"project_filters[{i}].{key}" for key in SETTINGS_KEYS)
                keys = (enabled, disabled, annotations)
                found.append(
                    layer("(user settings)", keys, rule.enabled_tools, rule.disabled_tools, rule.annotation_filter)
                )
    return tuple(f for f in found if f is not None)


def filtered(layers: Sequence[Layer], name: str, info: Mapping[str, Any]) -> str | None:
    """Why the first layer that hides the tool hides it, or None when every layer lets it through."""
    for one in layers:
        why = one.hides(name, info)
        if why is not None:
            return why
    return None


def denied(pm: pluggy.PluginManager, call: ToolCall, impls: Sequence[Any] | None = None) -> str | None:
    """Why the fixed votes (the config's and the role's, as registered in ``pm``) deny ``call``, or
    None. They are synchronous and read only the call's server, tool, role, settings and launch."""
    for impl in impls if impls is not None else fixed_impls(pm):
        try:
            vote = impl.function(*[{"call": call}[a] for a in impl.argnames])
        except Exception as exc:  # the call path counts a raising vote as deny: so is the listing
            return f"denied: policy plugin {impl.plugin_name} failed ({type(exc).__name__})"
        decision = getattr(vote, "decision", None)
        if decision == "deny":
            reason = getattr(vote, "reason", "") or "deny"
            return f"denied by {reason}" if impl.plugin_name == "kxen.config-policy" else f"denied: {reason}"
        if vote is not None and decision not in ("allow", "ask"):
            return f"denied: policy plugin {impl.plugin_name} answered no vote"
    return None


def fixed_decision(call: ToolCall, impls: Sequence[Any]) -> tuple[str, list[Any]]:
    """What the fixed votes (``impls``: :func:`fixed_impls`) decide for ``call`` with no other vote:
    ``(allow|ask|deny, the votes that made it)``, as :func:`kxen_core.policy.combine` counts them;
    a vote that raises or answers no vote is a deny, as on the call path."""
    from kxen_core.policy import Vote, combine

    votes = []
    for impl in impls:
        try:
            vote = impl.function(*[{"call": call}[a] for a in impl.argnames])
        except Exception as exc:
            vote = Vote.deny(f"policy plugin {impl.plugin_name} failed ({type(exc).__name__})")
        if vote is None:
            continue
        if getattr(vote, "decision", None) not in ("allow", "ask", "deny"):
            vote = Vote.deny(f"policy plugin {impl.plugin_name} answered no vote")
        votes.append(attrs.evolve(vote, plugin=impl.plugin_name))
    return combine(votes, call.server.defaultToolPolicy)


def may_deny(server: ServerConfig, role: str | None, settings: Settings | None) -> bool:
    """False when the fixed votes surely deny none of ``server``'s tools: no acting role, no
    ``deny`` default or entry, and for a project server no ``[[project_tools]]`` rule of this name
    that denies. True means "ask them" (:func:`denied`), tool by tool."""
    if role is not None or server.defaultToolPolicy == "deny" or "deny" in server.toolPolicies.values():
        return True
    if server.scope == "project" and settings is not None:
        return any(r.server == server.name and "deny" in r.tools.values() for r in settings.project_tools)
    return False


def fixed_impls(pm: pluggy.PluginManager) -> list[Any]:
    """The fixed policy votes registered in ``pm`` (the core's config and role votes)."""
    return [impl for impl in hookcall.impls(pm, HOOK) if fixed(impl)]


__all__ = [
    "ENTRY_KEYS",
    "SETTINGS_KEYS",
    "Layer",
    "Matcher",
    "denied",
    "filtered",
    "fixed_decision",
    "fixed_impls",
    "layer",
    "layers_for",
    "may_deny",
]

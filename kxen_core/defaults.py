"""The core's own default hook implementations (registered first, marked trylast, so they run last).

Three policy votes: the config's ``toolPolicies``, the acting role's permissions, and a general
safety check on the arguments. ``kxen_policy_decision`` combines them with every plugin's votes
(deny beats ask beats allow). No default approval channel exists: without one, ``ask`` is ``deny``.
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from typing import Any

from .plugins import hookimpl
from .policy import ToolCall, Vote

#: tool arguments larger than this (as compact JSON) are refused
MAX_ARGUMENT_BYTES = 1024 * 1024
#: nesting deeper than this is refused
MAX_ARGUMENT_DEPTH = 32


class ConfigPolicy:
    """The config's per-tool policy; abstains for tools it does not name (the default applies)."""

    @hookimpl(trylast=True)
    def kxen_policy_decision(self, call: ToolCall) -> Vote | None:
        decision = call.server.toolPolicies.get(call.tool)
        if decision is None:
            return None
        return Vote(decision=decision, reason=f"toolPolicies.{call.tool}")


class RolePolicy:
    """Role permissions from user settings; abstains when the host names no acting role."""

    @hookimpl(trylast=True)
    def kxen_policy_decision(self, call: ToolCall) -> Vote | None:
        if call.role is None:
            return None
        roles = getattr(call.settings, "roles", None) or {}
        role = roles.get(call.role)
        if role is None:
            return Vote.deny(f"role {call.role!r} is not defined in user settings")
        name = call.qualified_name
        for decision in ("deny", "ask", "allow"):
            for pattern in getattr(role, decision):
                if fnmatchcase(name, pattern):
                    return Vote(decision=decision, reason=f"roles.{call.role}.{decision}: {pattern}")
        return Vote.deny(f"role {call.role!r} has no permission for {name}")


class SafetyCheck:
    """General safety: bounded, well-formed arguments."""

    @hookimpl(trylast=True)
    def kxen_policy_decision(self, call: ToolCall) -> Vote | None:
        if not isinstance(call.arguments, dict):
            return Vote.deny("arguments must be an object")
        if _depth(call.arguments, 0) > MAX_ARGUMENT_DEPTH:
            return Vote.deny(f"arguments nest deeper than {MAX_ARGUMENT_DEPTH}")
        try:
            size = len(json.dumps(call.arguments, separators=(",", ":")).encode())
        except (TypeError, ValueError):
            return Vote.deny("arguments are not JSON")
        if size > MAX_ARGUMENT_BYTES:
            return Vote.deny(f"arguments are larger than {MAX_ARGUMENT_BYTES} bytes")
        return None


def _depth(value: Any, level: int) -> int:
    if level > MAX_ARGUMENT_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


DEFAULT_PLUGINS = {"kxen.config-policy": ConfigPolicy(), "kxen.roles": RolePolicy(), "kxen.safety": SafetyCheck()}

"""The shape of tool filters: which of a server's tools the model is shown (the matching itself is
:mod:`kxen_core.policy.tool_filters`).

A server entry may say ``enabledTools`` (only tools one of these patterns matches), ``disabledTools``
(no tool one of these patterns matches) and ``annotationFilter`` (only tools whose annotations say
what it asks, MCP's default standing in for a hint the tool does not give). The user's
``[[project_filters]]`` in ``config.toml`` say the same for a project server
(:class:`kxen_core.config.settings.ProjectFilters`).

A pattern is an exact tool name or an fnmatch-style glob over the server's own tool names: the
characters of a tool name (``A-Z a-z 0-9 . _ -``), ``*`` (any run of characters), ``?`` (one
character) and ``[...]`` / ``[!...]`` (one character of a set, or not of it; ranges like ``a-z``),
compared case-sensitively. Nothing else is allowed, so a pattern holds no character a tool name
cannot hold, and ``!`` and ``]`` mean something only in a set: a pattern without ``*``, ``?`` or
``[`` is exactly one tool's name.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

#: patterns per list at most, and characters per pattern
MAX_PATTERNS = 256
MAX_PATTERN_CHARS = 200
#: the characters of a tool name (MCP's rule: ``^[A-Za-z0-9._-]{1,128}$``)
NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
#: what an absent hint counts as: MCP's defaults (not read-only, destructive, not idempotent, open world)
HINT_DEFAULTS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}
GLOB_CHARS = re.compile(r"[*?\[]")


def pattern_rule(pattern: Any) -> str | None:
    """The rule ``pattern`` breaks, or None when it is a valid name or glob."""
    if not isinstance(pattern, str):
        return "must be a string"
    if not 0 < len(pattern) <= MAX_PATTERN_CHARS:
        return f"must be 1-{MAX_PATTERN_CHARS} characters"
    in_set: int | None = None  # the index of the open '[' while inside a set
    for i, char in enumerate(pattern):
        if in_set is None:
            if char == "[":
                in_set = i
            elif char == "]":
                return "a ']' closes a set only after a '[' (tool names hold no ']')"
            elif char == "!":
                return "'!' only negates a set, right after its '[' (tool names hold no '!')"
            elif char not in NAME_CHARS and char not in "*?":
                return "a pattern holds the characters of tool names (A-Z a-z 0-9 . _ -) and * ? [ ] only"
        elif char == "]":
            body = pattern[in_set + 1 : i].removeprefix("!")
            if not body:
                return "a set '[...]' names at least one character"
            in_set = None
        elif char == "!" and i == in_set + 1:
            continue
        elif char not in NAME_CHARS:
            return "a set '[...]' holds characters of tool names (A-Z a-z 0-9 . _ -) and ranges like a-z only"
    if in_set is not None:
        return "a '[' opens a set that must be closed with ']'"
    return None


def is_glob(pattern: str) -> bool:
    """Whether ``pattern`` (a valid one) is a glob; else it is exactly one tool's name."""
    return GLOB_CHARS.search(pattern) is not None


def _patterns(instance: Any, attribute: attrs.Attribute, value: list[str] | None) -> None:
    if value is None:
        return
    if len(value) > MAX_PATTERNS:
        raise ValueError(f"{attribute.name} holds at most {MAX_PATTERNS} patterns (got {len(value)})")
    for i, pattern in enumerate(value):
        rule = pattern_rule(pattern)
        if rule is not None:
            raise ValueError(f"{attribute.name}[{i}]: {rule}")


#: validators of the two pattern lists (the same rule under either name)
patterns_validator = _patterns


@attrs.frozen(kw_only=True)
class AnnotationFilter:
    """``annotationFilter``: the value each named hint must have for the model to see the tool;
    every named hint must match (a hint the tool does not give counts as MCP's default,
    :data:`HINT_DEFAULTS`; one that is not a boolean matches nothing). ``null`` or absent: no
    condition on that hint. ``{"readOnlyHint": true}`` shows only the tools that say they only read."""

    readOnlyHint: bool | None = None
    destructiveHint: bool | None = None
    idempotentHint: bool | None = None
    openWorldHint: bool | None = None

    def wanted(self) -> tuple[tuple[str, bool], ...]:
        """``(hint, value)`` of every hint it names, in MCP's order."""
        return tuple((hint, v) for hint in HINT_DEFAULTS if (v := getattr(self, hint)) is not None)


__all__ = [
    "HINT_DEFAULTS",
    "MAX_PATTERNS",
    "MAX_PATTERN_CHARS",
    "AnnotationFilter",
    "is_glob",
    "pattern_rule",
    "patterns_validator",
]

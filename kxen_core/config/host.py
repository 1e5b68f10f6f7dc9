"""A host's own config, held as mappings (``Runtime(servers=..., settings=...)``): what a problem
of one names instead of a file, and the copy the loader reads (:func:`kxen_core.config.load_config`).
kxen never writes a host's mapping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: what a problem of the host's own mappings names instead of a file
HOST_SERVERS = "Runtime(servers=...)"
HOST_SETTINGS = "Runtime(settings=...)"
#: the deepest a host's mapping may nest (a config file's JSON is far shallower)
MAX_HOST_DEPTH = 64


def held_by_host(source: str | None) -> bool:
    """Whether a config's ``source`` is one of the host's mappings, not a file kxen may write."""
    return source in (HOST_SERVERS, HOST_SETTINGS)


def plain(value: Any, depth: int = 0) -> Any:
    """A host's mapping as the plain JSON-like values a parsed file gives (dicts, lists, scalars),
    copied: a later change to the host's object changes nothing loaded. Anything else is kept as
    it is, for the loader's rules to name; nesting past :data:`MAX_HOST_DEPTH` stops the copy."""
    if depth > MAX_HOST_DEPTH:
        return None
    if isinstance(value, Mapping):
        return {k: plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, depth + 1) for v in value]
    return value


__all__ = ["HOST_SERVERS", "HOST_SETTINGS", "held_by_host", "plain"]

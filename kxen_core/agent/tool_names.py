"""Model-facing tool names: always ``^[A-Za-z0-9_-]{1,64}$``, stable, and one name per tool.

A model provider refuses a whole request when one tool name breaks its rule, so the name the model
sees is never the server's name as it is unless that is safe. ``<server>__<tool>`` is used when it
fits the rule; otherwise (a dot, a name too long, a character outside the rule) the tool part is
sanitised (each other character becomes ``_``), cut to fit, and followed by ``__`` and the first 8
hex digits of ``sha256(server NUL tool)``. The suffix depends on the server's name and the tool's
name only, so a name is the same across runs, machines and server orderings.

Why no two tools get one name:

* the server part ends at the first ``__`` (server names contain no ``__`` and never end with
  ``_``), so names of two servers never meet;
* a plain name never ends like a shortened one (``__`` + 8 lowercase hex digits): a tool whose own
  name ends so is shortened too, so plain and shortened names never meet;
* two shortened names of one server meet only when their sanitised stems and 32-bit hashes are
  equal; :func:`assign` then keeps the tool whose name sorts first and drops the other with a
  reason, so even that case is decided the same way whatever order the server lists them in.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

#: what every model-facing name matches (the strictest common provider rule)
MODEL_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_MODEL_NAME = 64
SEPARATOR = "__"
HASH_HEX = 8
#: names kept once computed (a refetch of an unchanged catalog finds them all)
MAX_CACHED_NAMES = 65_536
_HEX = re.compile(rf"[0-9a-f]{{{HASH_HEX}}}")
_OUTSIDE = re.compile(r"[^A-Za-z0-9_-]")


def name_hash(server: str, tool: str) -> str:
    """The stable suffix of a shortened name: 8 hex digits of sha256 over ``server NUL tool``."""
    import hashlib  # on first use: importing kxen need not load OpenSSL's digests

    data = server.encode("utf-8", "surrogatepass") + b"\0" + tool.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:HASH_HEX]


def is_model_safe(name: str) -> bool:
    return MODEL_NAME_RE.fullmatch(name) is not None


@functools.lru_cache(maxsize=MAX_CACHED_NAMES)
def model_name(server: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server`` (see the module docstring)."""
    plain = f"{server}{SEPARATOR}{tool}"
    if len(plain) <= MAX_MODEL_NAME and MODEL_NAME_RE.fullmatch(plain) and not _ends_shortened(tool):
        return plain
    suffix = SEPARATOR + name_hash(server, tool)
    room = max(0, MAX_MODEL_NAME - len(server) - len(SEPARATOR) - len(suffix))
    stem = _OUTSIDE.sub("_", tool[:room]) or "_"  # one "_" per character: the cut stays in place
    return f"{server}{SEPARATOR}{stem}{suffix}"


def _ends_shortened(tool: str) -> bool:
    # the cheap tests first: almost every name fails the "__" one
    return tool[-HASH_HEX - 2 : -HASH_HEX] == SEPARATOR and _HEX.fullmatch(tool[-HASH_HEX:]) is not None


def assign(server: str, tools: Iterable[str]) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """The model-facing names of one server's tools: ``(tool -> model name, model name -> tool,
    reasons for the tools dropped)``. When two would share a name (a 32-bit hash collision), the
    one whose own name sorts first keeps it, whatever order the server listed them in."""
    # the common case, no two names meet, at C speed: each name once (first listed first), then
    # the reverse map; a shorter reverse map means a clash, decided by the loop below
    by_tool = {tool: model_name(server, tool) for tool in dict.fromkeys(tools)}
    by_model = {name: tool for tool, name in by_tool.items()}
    if len(by_model) == len(by_tool):
        return by_tool, by_model, []
    return _assign_clashing(server, list(by_tool))


def _assign_clashing(server: str, tools: list[str]) -> tuple[dict[str, str], dict[str, str], list[str]]:
    by_tool: dict[str, str] = {}
    by_model: dict[str, str] = {}
    clashes: dict[str, set[str]] = {}
    for tool in tools:
        name = model_name(server, tool)
        other = by_model.get(name)
        if other is None:
            by_tool[tool] = name
            by_model[name] = tool
        else:
            clashes.setdefault(name, {other}).add(tool)
    dropped: list[str] = []
    # a clash (rare: a 32-bit hash collision) is decided by sorted order, whatever order came in
    for name in sorted(clashes):
        keep, *others = sorted(clashes[name])
        current = by_model[name]
        if current != keep:
            del by_tool[current]
            by_tool[keep] = name
            by_model[name] = keep
        for tool in others:
            dropped.append(f"tool {tool[:80]!r} dropped: its model-facing name {name!r} is already {keep[:80]!r}'s")
    return by_tool, by_model, dropped


def server_of(name: str) -> str:
    """The server part of a model-facing name; ``ValueError`` when ``name`` has none."""
    server, sep, tool = name.partition(SEPARATOR)
    if not sep or not server or not tool:
        raise ValueError(f"not a model-facing tool name (expected <server>__<tool>): {name[:100]!r}")
    return server


__all__ = ["MAX_MODEL_NAME", "MODEL_NAME_RE", "assign", "is_model_safe", "model_name", "name_hash", "server_of"]

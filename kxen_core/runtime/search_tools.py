"""Tool search for big catalogs: which tools the model is shown whole, and ``kxen_search_tools``.

When ``[tool_search]`` is on (``on``, or ``auto`` once the workspace's model-visible server tools
pass ``threshold_tools`` in number or ``threshold_tokens`` in estimated tokens), plain
``Runtime.tools()`` lists only the tools ``always_visible`` names, kxen's own tools and
``kxen_search_tools``; every other visible tool is *deferred*: left out of the list, found by a
search, and called by its ``qualifiedName`` as before. The tools the model's searches returned
join plain ``Runtime.tools()`` (the latest :data:`MAX_FOUND`; ``Runtime.forget_found_tools()``
empties them), so a framework that lists the tools at each step can call them; a ``tools`` event
(``server`` None) says the list changed. ``Runtime.tools(with_deferred=True)`` lists
every visible tool and marks the deferred ones ``"deferred": True`` (for a model API that loads
deferred tools itself); ``kxen_search_tools`` is not in that list, the provider's search takes its
place.

Search only ever sees the tools ``Runtime.tools()`` would show: a filtered, denied or held tool
is not in the index, so it is never found. Deferral saves context, it is no permission: a call of
a deferred tool goes the normal way (name map, arguments, votes, approvals, pins), found or not.
The index (:class:`kxen_core.agent.tool_search.ToolIndex`, SQLite FTS5) is built again only when
a server's catalog or view was replaced. A Python whose SQLite has no FTS5 keeps search off: every
tool stays listed.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kxen_core.agent import tool_search
from kxen_core.errors import InvalidArguments, UnknownTool
from kxen_core.runtime.states import State

if TYPE_CHECKING:
    from kxen_core.agent.output import AgentOutput
    from kxen_core.config.settings import ToolSearchSettings

SEARCH_TOOL = "kxen_search_tools"
#: the most tools the model found that ``Runtime.tools()`` lists beside the always-visible ones
MAX_FOUND = 32
#: the most names of matches that did not fit the output bound listed after the shown ones
MAX_MORE_NAMES = 50

DESCRIPTION = (
    "Search the tools of the MCP servers that are not listed here: give a few words of what you "
    "want to do (e.g. 'create a calendar event'); you get the best matching tools' names, "
    "descriptions and input schemas. Then call a found tool by its qualifiedName."
)


def schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "maxLength": tool_search.MAX_QUERY_CHARS,
                "description": "what the tool should do, in a few words",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": tool_search.MAX_RESULTS,
                "description": "how many tools to return (default: the user's setting)",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }


def entry() -> dict[str, Any]:
    """``kxen_search_tools`` shaped like kxen's other tools in ``Runtime.tools()``."""
    return {
        "server": None,
        "name": SEARCH_TOOL,
        "qualifiedName": SEARCH_TOOL,
        "description": DESCRIPTION,
        "inputSchema": schema(),
    }


def settings_of(rt: Any) -> ToolSearchSettings:
    from kxen_core.config.settings import ToolSearchSettings

    config = rt.config
    return config.settings.tool_search if config is not None else ToolSearchSettings()


def pinned(name: str, patterns: list[str]) -> bool:
    """Whether ``always_visible`` names the qualified tool ``name`` (exactly, or by a glob)."""
    return any(p == name or fnmatch.fnmatchcase(name, p) for p in patterns)


def shown_names(server: Any) -> list[str]:
    """The qualified names of the tools the model may see of a ready ``server``."""
    hidden, names = server.hidden_tools, server.tool_names
    return [names[tool] for tool in server.tools_by_name if tool not in hidden]


def state(rt: Any) -> dict[str, Any]:
    """Whether search is on and why: ``enabled`` (the setting), ``on``, ``why``, ``tools`` and
    ``toolTokens`` (the model-visible server tools and their estimated size, as the servers'
    status counts them), ``deferred`` (how many of them are left out of plain ``tools()``), the
    thresholds and ``results``. This is ``toolSearch`` of ``Runtime.settings_snapshot()``."""
    settings, key = settings_of(rt), _key(rt)
    cached = rt._search_state
    if cached is not None and cached[1] is settings and _same(cached[0], key):
        return dict(cached[2])
    count = tokens = 0
    ready = [s for s in rt.servers.values() if s.state == State.READY]
    for server in ready:
        shown, hidden = server.tools_by_name, server.hidden_tools
        count += len(shown) - (len(shown.keys() & hidden.keys()) if hidden else 0)
        tokens += server.context_view()["toolTokens"]
    out: dict[str, Any] = {
        "enabled": settings.enabled,
        "tools": count,
        "toolTokens": tokens,
        "thresholdTools": settings.threshold_tools,
        "thresholdTokens": settings.threshold_tokens,
        "results": settings.results,
    }
    if settings.enabled == "off":
        on, why = False, "off in [tool_search] enabled"
    elif settings.enabled == "on":
        on, why = True, "on in [tool_search] enabled"
    elif count > settings.threshold_tools:
        on, why = True, f"auto: {count} tools, more than threshold_tools ({settings.threshold_tools})"
    elif tokens > settings.threshold_tokens:
        on, why = (
            True,
            f"auto: about {tokens} tokens of tools, more than threshold_tokens ({settings.threshold_tokens})",
        )
    else:
        on = False
        why = f"auto: {count} tools and about {tokens} tokens, within the thresholds"
    deferred = 0
    broken = tool_search.available() if on else None
    if broken is not None:  # never keep tools from the model behind a search that cannot run
        on, why = False, f"{why}; but {broken}"
    if on:
        names = [n for s in ready for n in shown_names(s)] if settings.always_visible else None
        deferred = count if names is None else sum(not pinned(n, settings.always_visible) for n in names)
        if not deferred:
            on, why = False, f"{why}; but always_visible names every tool"
    out["on"], out["why"], out["deferred"] = on, why, deferred
    rt._search_state = (key, settings, out)
    return dict(out)


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def arrange(rt: Any, servers_entries: list[dict[str, Any]], *, with_deferred: bool) -> list[dict[str, Any]]:
    """The servers' part of ``Runtime.tools()`` with search applied: the ``always_visible`` tools
    and those the model found, the deferred entries dropped (or, ``with_deferred``, kept and marked
    ``"deferred": True``); the list itself when search is off (``Runtime.tools`` adds
    ``kxen_search_tools`` otherwise)."""
    settings = settings_of(rt)
    if settings.enabled == "off" or not state(rt)["on"]:
        return servers_entries
    patterns, found = settings.always_visible, rt._found_tools
    out = []
    for item in servers_entries:
        name = item["qualifiedName"]
        if name in found or pinned(name, patterns):
            out.append(item)
        elif with_deferred:
            out.append({**item, "deferred": True})
    return out


def remember_found(rt: Any, names: list[str]) -> None:
    """The tools a search of the model's returned join the list (``Runtime.tools()``), the latest
    first, at most :data:`MAX_FOUND` (the oldest found leave it); a ``tools`` event (``server``
    None) when that changed the list."""
    found = rt._found_tools
    before = list(found)
    for name in reversed(names):
        found.pop(name, None)
        found[name] = None
    while len(found) > MAX_FOUND:
        del found[next(iter(found))]
    if list(found) != before:
        rt._events.publish("tools", server=None)


def _key(rt: Any) -> tuple[Any, ...]:
    """What the visible tools and their entries are made of, compared by identity: the config
    (a reload), and each server, its state, catalog view, names and pin states (``policy``)."""
    parts: list[Any] = [rt.config]
    for server in rt.servers.values():
        parts.extend(
            (server, server.state, server.tools_by_name, server.hidden_tools, server.tool_names, server.pin_states)
        )
    return tuple(parts)


def _searchable(rt: Any) -> list[dict[str, Any]]:
    return rt._server_tools(None)


def search(rt: Any, query: Any, limit: Any = None) -> list[dict[str, Any]]:
    """The visible server tools best matching ``query``, best first, at most ``limit`` (default
    ``[tool_search] results``), each a ``Runtime.tools()`` entry plus ``score``. Raises
    ``InvalidArguments`` for a bad query or limit."""
    if limit is None:
        limit = settings_of(rt).results
    cache = rt._search_index
    if cache is None:
        cache = rt._search_index = tool_search.IndexCache()
    index, entries = cache.get(_key(rt), lambda: _searchable(rt))
    try:
        found = index.search(query, limit)
    except ValueError as exc:
        raise InvalidArguments(f"{SEARCH_TOOL}: {exc}") from None
    return [{**entries[i], "score": round(score, 4)} for i, score in found]


def _arguments(arguments: Mapping[str, Any] | None) -> tuple[Any, Any]:
    args = dict(arguments or {})
    unknown = sorted(str(k)[:40] for k in args if k not in ("query", "limit"))
    if unknown:
        raise InvalidArguments(
            f"{SEARCH_TOOL}: unknown argument(s) {', '.join(map(repr, unknown[:10]))} (it takes: limit, query)"
        )
    if "query" not in args:
        raise InvalidArguments(f"{SEARCH_TOOL}: query is required (a few words of what the tool should do)")
    return args["query"], args.get("limit")


def call(rt: Any, arguments: Mapping[str, Any] | None, limit: int) -> AgentOutput:
    """``kxen_search_tools`` for the agent: the found tools' ``qualifiedName``, ``title``,
    ``description`` and ``inputSchema`` as JSON, as many as fit the output bound ``limit``; the
    names of the others that matched follow in ``more``."""
    from kxen_core.agent.output import render_json

    current = state(rt)
    if not current["on"]:
        raise UnknownTool(f"no tool named {SEARCH_TOOL!r}: tool search is off ({current['why']})")
    query, size = _arguments(arguments)
    found = search(rt, query, size)
    shown: list[dict[str, Any]] = []
    more: list[str] = []
    used = 200 + len(str(query))
    for item in found:
        tool = {k: item[k] for k in ("qualifiedName", "title", "description", "inputSchema") if item.get(k) is not None}
        cost = len(json.dumps(tool, ensure_ascii=False)) + 2
        if more or used + cost > limit - 100 * (len(found) - len(shown)):
            if len(more) < MAX_MORE_NAMES:
                more.append(item["qualifiedName"])
            continue
        shown.append(tool)
        used += cost
    remember_found(rt, [tool["qualifiedName"] for tool in shown])
    out: dict[str, Any] = {"query": query, "tools": shown}
    if more:
        out["more"] = more
        out["note"] = "these matched too but did not fit; search with other words or a lower limit to see them"
    if not found:
        out["note"] = "no tool matched; try other words"
    return render_json(out, limit=limit)


__all__ = ["MAX_FOUND", "SEARCH_TOOL", "arrange", "call", "entry", "pinned", "remember_found", "search", "state"]

"""The agent-facing tools kxen provides itself: list and read resources, list and get prompts.

They appear in ``Runtime.tools()`` beside the servers' tools (with ``"server": None``) when at
least one ready server declared the capability they serve, and ``Runtime.call_tool`` routes them.
Their names contain no ``__``, while every server tool's model-facing name is ``<server>__<tool>``
(server names never contain ``__``): the two sets can never share a name. They only read --
``resources/read`` and ``prompts/get`` are the only requests they send; listings come from the
catalogs kxen holds -- and they pass the policy votes per server under the MCP method's name, so
``toolPolicies`` can switch them off.

Listings page with a kxen cursor (20 items by default, at most 100), and each page holds only as
many items as fit the output bound, so ``nextCursor`` (written first) always leads on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from kxen_core.agent import output as agent_output
from kxen_core.agent.output import AgentOutput
from kxen_core.agent.tool_names import server_of
from kxen_core.errors import ApprovalDenied, InvalidArguments, KxenError, PolicyDenied, UnknownTool
from kxen_core.protocol.catalog import CAPABILITY
from kxen_core.runtime import contents, search_tools
from kxen_core.safe_text import Secrets


class AgentHost(contents.Host, Protocol):
    """What kxen's tools need of the runtime (``kxen_core.Runtime`` is one)."""

    @property
    def output_limit(self) -> int: ...

    @property
    def secrets(self) -> Secrets: ...

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        server: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...


LIST_RESOURCES = "kxen_list_resources"
LIST_TEMPLATES = "kxen_list_resource_templates"
READ_RESOURCE = "kxen_read_resource"
LIST_PROMPTS = "kxen_list_prompts"
GET_PROMPT = "kxen_get_prompt"

DEFAULT_PAGE = 20
MAX_PAGE = 100
#: strings of a listed item are shortened to this many characters (URIs and names excepted)
MAX_FIELD_CHARS = 1000
#: room kept in a listing page for everything but its items
ENVELOPE_CHARS = 2000

_SERVER = {"type": "string", "description": "a server name; omit for every server"}
_PAGING = {
    "cursor": {"type": "string", "description": "the nextCursor of the previous page"},
    "limit": {
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_PAGE,
        "description": f"items per page (default {DEFAULT_PAGE})",
    },
}


def _listing() -> dict[str, Any]:
    return {"type": "object", "properties": {"server": _SERVER, **_PAGING}, "additionalProperties": False}


#: name -> (catalog kind or method, description, input schema)
TOOLS: dict[str, tuple[str, str, dict[str, Any]]] = {
    LIST_RESOURCES: (
        "resources",
        "List the resources of the MCP servers (all, or one server's), a page at a time: "
        "pass nextCursor back as cursor for the next page.",
        _listing(),
    ),
    LIST_TEMPLATES: (
        "resourceTemplates",
        "List the resource templates (URI templates) of the MCP servers, a page at a time.",
        _listing(),
    ),
    READ_RESOURCE: (
        "resources",
        "Read one resource of an MCP server by its URI. Text comes back as text; binary contents "
        "are described (MIME type, size), not shown.",
        {
            "type": "object",
            "properties": {"server": {"type": "string"}, "uri": {"type": "string"}},
            "required": ["server", "uri"],
            "additionalProperties": False,
        },
    ),
    LIST_PROMPTS: (
        "prompts",
        "List the prompts of the MCP servers with their arguments, a page at a time.",
        _listing(),
    ),
    GET_PROMPT: (
        "prompts",
        "Get a prompt of an MCP server, filled in with string arguments; the result is JSON.",
        {
            "type": "object",
            "properties": {
                "server": {"type": "string"},
                "name": {"type": "string"},
                "arguments": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "required": ["server", "name"],
            "additionalProperties": False,
        },
    ),
}
_LIST_METHOD = {
    "resources": "resources/list",
    "resourceTemplates": "resources/templates/list",
    "prompts": "prompts/list",
}


def is_kxen_tool(name: str) -> bool:
    """Whether ``name`` is one of kxen's own tools (``kxen_search_tools`` too: :mod:`.search_tools`)."""
    return name in TOOLS or name == search_tools.SEARCH_TOOL


#: the MCP method each of kxen's tools is voted on under (per server, like a tool call)
METHOD = {
    LIST_RESOURCES: "resources/list",
    LIST_TEMPLATES: "resources/templates/list",
    READ_RESOURCE: "resources/read",
    LIST_PROMPTS: "prompts/list",
    GET_PROMPT: "prompts/get",
}


def available(rt: AgentHost, *, include_hidden: bool = False) -> list[dict[str, Any]]:
    """kxen's tools whose capability at least one ready server declared and whose method the
    fixed policy votes of at least one of those servers do not deny (``Server.denied_methods``),
    shaped like server tools. With ``include_hidden``, also the ones every such server denies, with
    ``hidden`` and ``why``."""
    servers = list(rt.servers.values())
    declared = {cap: [s for s in servers if contents.declares(s, cap)] for cap in set(CAPABILITY.values())}
    out = []
    for name, (kind, description, schema) in TOOLS.items():
        offering = declared[CAPABILITY[kind]]
        if not offering:
            continue
        shown = any(METHOD[name] not in s.denied_methods for s in offering)
        if not shown and not include_hidden:
            continue
        entry: dict[str, Any] = {
            "server": None,
            "name": name,
            "qualifiedName": name,
            "description": description,
            "inputSchema": schema,
        }
        if include_hidden:
            why = None if shown else denied_everywhere(name, offering)
            entry["hidden"], entry["why"] = why is not None, why
        out.append(entry)
    return out


def denied_everywhere(name: str, offering: list[Any]) -> str:
    names = ", ".join(repr(s.name) for s in offering[:5]) + (", ..." if len(offering) > 5 else "")
    return f"denied: the policy of every server that offers it denies {METHOD[name]} ({names})"


def _args(name: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    args = dict(arguments or {})
    allowed = set(TOOLS[name][2]["properties"])
    unknown = sorted(k for k in args if k not in allowed)
    if unknown:
        shown = ", ".join(repr(str(k)[:40]) for k in unknown[:10])
        raise InvalidArguments(f"{name}: unknown argument(s) {shown} (it takes: {', '.join(sorted(allowed))})")
    for key in ("server", "cursor", "uri", "name"):
        if key in args and not isinstance(args[key], str):
            raise InvalidArguments(f"{name}: {key} must be a string")
    return args


async def call(rt: AgentHost, name: str, arguments: Mapping[str, Any] | None, limit: int) -> AgentOutput:
    """Run kxen's tool ``name`` for the agent; raises kxen errors for what was refused."""
    if name == search_tools.SEARCH_TOOL:
        return search_tools.call(rt, arguments, limit)
    if name not in {t["name"] for t in available(rt)}:
        cap = CAPABILITY[TOOLS[name][0]] if name in TOOLS else None
        offering = [s for s in rt.servers.values() if cap is not None and contents.declares(s, cap)]
        if offering:  # offered, but every server's policy denies it: not shown to the model either
            why = denied_everywhere(name, offering)
            raise PolicyDenied(f"{name}: {why}", for_agent=f"{name} is not available: {why}")
        raise UnknownTool(f"no tool named {name[:80]!r} (no ready server offers it)")
    args = _args(name, arguments)
    kind = TOOLS[name][0]
    if name == READ_RESOURCE:
        raw = await contents.read(rt, args.get("server"), args.get("uri"))
        return agent_output.render_read(raw, server=args["server"], uri=args["uri"], limit=limit)
    if name == GET_PROMPT:
        raw = await contents.get_prompt(rt, args.get("server"), args.get("name"), args.get("arguments"))
        return agent_output.render_prompt(raw, server=args["server"], name=args["name"], limit=limit)
    return await _list(rt, kind, args, limit)


async def agent_call(
    rt: AgentHost, name: str, arguments: Mapping[str, Any] | None, *, server: str | None, timeout: float | None
) -> AgentOutput:
    """What the agent gets for calling ``name``: a result or an error text, within the bound, with
    every value kxen holds as secret (``rt.secrets``) scrubbed from it."""
    out = await _agent_call(rt, name, arguments, server=server, timeout=timeout)
    return agent_output.scrubbed(out, rt.secrets)


async def _agent_call(
    rt: AgentHost, name: str, arguments: Mapping[str, Any] | None, *, server: str | None, timeout: float | None
) -> AgentOutput:
    limit = rt.output_limit
    try:
        if server is None and is_kxen_tool(name):
            return await call(rt, name, arguments, limit)
        raw = await rt.call_tool(name, arguments, server=server, timeout=timeout)
    except KxenError as exc:
        return agent_output.error_output(exc, limit=limit)
    owner, tool = server or "", name
    if server is None:  # a model-facing name: its server, and that server's own name of the tool
        try:
            owner = server_of(name)
        except ValueError:  # not <server>__<tool>: name it whole
            owner = ""
        target = rt.servers.get(owner) if owner else None
        tool = (target.tool_for(name) if target is not None else None) or name
    return agent_output.render_tool_result(raw, server=owner, tool=tool, limit=limit)


async def _list(rt: AgentHost, kind: str, args: dict[str, Any], limit: int) -> AgentOutput:
    server = args.get("server")
    size = contents.check_limit(args.get("limit", DEFAULT_PAGE), MAX_PAGE) or DEFAULT_PAGE
    start = contents.decode_cursor(args.get("cursor"))
    if server is not None:
        targets = [contents.ready_with(rt, server, CAPABILITY[kind])]
    else:
        targets = [s for s in rt.servers.values() if contents.declares(s, CAPABILITY[kind])]
    skipped: dict[str, str] = {}
    items: list[contents.Pair] = []
    for target in targets:
        try:  # what the policy denies for a server is not listed
            await contents.authorize_method(rt, target, _LIST_METHOD[kind], {})
        except (PolicyDenied, ApprovalDenied) as exc:
            skipped[target.name] = (exc.for_agent or str(exc))[:300]
            continue
        items.extend(contents.pairs([target], kind))
    shown: list[dict[str, Any]] = []
    used = ENVELOPE_CHARS + sum(len(k) + len(v) + 10 for k, v in skipped.items())
    end = start
    while end < len(items) and len(shown) < size:
        item = _for_agent(kind, items[end])
        cost = len(json.dumps(item, ensure_ascii=False)) + 2
        if not shown and used + cost > limit:
            item = _for_agent(kind, items[end], brief=True)  # alone too long: names and keys only
            cost = len(json.dumps(item, ensure_ascii=False)) + 2
        if shown and used + cost > limit:
            break  # the next page starts here: every item stays reachable
        shown.append(item)
        used += cost
        end += 1
    out: dict[str, Any] = {"nextCursor": contents.encode_cursor(end) if end < len(items) else None, "total": len(items)}
    if skipped:
        out["skipped"] = skipped
    out[kind] = shown
    return agent_output.render_json(out, limit=limit)


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_FIELD_CHARS:
        return value[:MAX_FIELD_CHARS] + "…"
    return value


_FIELDS = {
    "resources": ("uri", "name", "title", "description", "mimeType", "size"),
    "resourceTemplates": ("uriTemplate", "name", "title", "description", "mimeType"),
    "prompts": ("name", "title", "description"),
}
_WHOLE = {"uri", "uriTemplate", "name"}  # what the agent passes back: never shortened


def _for_agent(kind: str, pair: contents.Pair, *, brief: bool = False) -> dict[str, Any]:
    """One listed item as the agent sees it: known fields only, long texts shortened (with
    ``brief``, only what the agent passes back: URIs and names)."""
    server, entry = pair
    item: dict[str, Any] = {"server": server}
    for key in _FIELDS[kind]:
        value = entry.get(key)
        if value is None or isinstance(value, (dict, list)) or (brief and key not in _WHOLE):
            continue
        item[key] = value if key in _WHOLE else _short(value)
    if kind == "prompts":
        item["arguments"] = [
            {
                "name": a["name"],
                **(
                    {"description": _short(a["description"])}
                    if isinstance(a.get("description"), str) and not brief
                    else {}
                ),
                "required": a.get("required") is True,
            }
            for a in entry.get("arguments") or ()
        ]
    return item


__all__ = [
    "agent_call",
    "GET_PROMPT",
    "LIST_PROMPTS",
    "LIST_RESOURCES",
    "LIST_TEMPLATES",
    "METHOD",
    "READ_RESOURCE",
    "TOOLS",
    "available",
    "call",
    "is_kxen_tool",
]

"""The core's own default hook implementations (registered first, marked trylast, so they run last).

Tool validation (one verdict per bad item of any server's ``tools/list`` page), and three policy
votes: the config's ``toolPolicies``, the acting role's permissions, and a general safety check on
the arguments. ``kxen_policy_decision`` combines them with every plugin's votes
(deny beats ask beats allow). No default approval channel exists: without one, ``ask`` is ``deny``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from kxen_core.hookspecs import hookimpl
from kxen_core.policy import READ_ONLY_METHODS, ToolCall, Vote
from kxen_core.policy.argument_guard import ArgumentGuard

if TYPE_CHECKING:  # the config models (and cattrs behind them) load with the first config, not here
    from kxen_core.config.models import RemoteCatalogLimits, ServerConfig
    from kxen_core.protocol.catalog import CatalogPage, Verdict

#: tool arguments larger than this (as compact JSON) are refused
MAX_ARGUMENT_BYTES = 1024 * 1024
#: nesting deeper than this is refused
MAX_ARGUMENT_DEPTH = 32


class _Hooks:
    """A default plugin names only its hook implementations: pluggy looks up every name ``dir()``
    gives when it registers a plugin, and an object's ``dir()`` holds some thirty inherited names."""

    def __dir__(self) -> list[str]:
        return [name for name in type(self).__dict__ if name.startswith("kxen_")]


class ConfigPolicy(_Hooks):
    """The config's policy always votes: the tool's ``toolPolicies`` entry, else the server's
    ``defaultToolPolicy``. So a server's own ``deny`` (or ``ask``) default is a veto no role or
    plugin ``allow`` can override. kxen's read-only methods (:data:`READ_ONLY_METHODS`, the
    resources and prompts the agent lists, reads and gets) are allowed unless ``toolPolicies``
    names them or the default is ``deny``."""

    @hookimpl(trylast=True)
    def kxen_policy_decision(self, call: ToolCall) -> Vote | None:
        decision = call.server.toolPolicies.get(call.tool)
        if decision is None and call.server.scope == "project":
            user = project_rule(call)
            if user is not None:
                return user
        if decision is None:
            if call.read_only_method and call.tool in READ_ONLY_METHODS and call.server.defaultToolPolicy != "deny":
                return Vote.allow("read-only (resources and prompts)")
            return Vote(decision=call.server.defaultToolPolicy, reason="defaultToolPolicy")
        return Vote(decision=decision, reason=f"toolPolicies.{call.tool}")


def project_rule(call: ToolCall) -> Vote | None:
    """The user's ``[[project_tools]]`` vote on a project server's tool, when a rule names this
    server, the workspace its launch runs in, and exactly this launch (its fingerprint)."""
    from kxen_core.launch.launchers import inside

    launch, settings = call.launch, call.settings
    if launch is None or settings is None or not settings.project_tools:
        return None
    for i, rule in enumerate(settings.project_tools):
        if (
            rule.server == call.server.name
            and rule.launch == launch.fingerprint
            and call.tool in rule.tools
            and inside(launch.cwd, rule.workspace)
        ):
            return Vote(decision=rule.tools[call.tool], reason=f"project_tools[{i}].tools.{call.tool} (user settings)")
    return None


class RolePolicy(_Hooks):
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


class SafetyCheck(_Hooks):
    """General safety: bounded, well-formed arguments."""

    @hookimpl(trylast=True)
    def kxen_policy_decision(self, call: ToolCall) -> Vote | None:
        if type(call.arguments) is dict and _flat_and_small(call.arguments):
            return None  # what the full check finds for these arguments, without the walk
        return full_safety_check(call.arguments)


def full_safety_check(arguments: Any) -> Vote | None:
    """The safety vote on ``arguments``: deny what is not an object, nests deeper than
    ``MAX_ARGUMENT_DEPTH``, is not JSON, or is larger than ``MAX_ARGUMENT_BYTES`` as compact JSON."""
    if not isinstance(arguments, dict):
        return Vote.deny("arguments must be an object")
    if _depth(arguments, 0) > MAX_ARGUMENT_DEPTH:
        return Vote.deny(f"arguments nest deeper than {MAX_ARGUMENT_DEPTH}")
    try:
        size = len(json.dumps(arguments, separators=(",", ":")).encode())
    except (TypeError, ValueError):
        return Vote.deny("arguments are not JSON")
    if size > MAX_ARGUMENT_BYTES:
        return Vote.deny(f"arguments are larger than {MAX_ARGUMENT_BYTES} bytes")
    return None


#: the most bytes one character of a string takes in ``json.dumps`` (an astral one: two \uXXXX escapes)
_CHAR_BYTES = 12
#: the longest ``json.dumps`` of a float (``-1.7976931348623157e+308``) or an int in this range
_NUMBER_BYTES = 24
_INT_RANGE = 2**63


def flat_strings(arguments: dict[Any, Any], out: list[str], values: list[str]) -> bool:
    """True when ``arguments`` maps strings to plain scalars and its compact JSON surely fits in
    ``MAX_ARGUMENT_BYTES``: depth 1, always JSON, size bounded from above without encoding it.
    False means "not sure": the full check decides. On the way, every key and string value in
    order goes into ``out`` and the string values into ``values``: the strings the argument guard
    searches (:func:`kxen_core.policy.argument_guard.clear_strings`), so the common call is walked once."""
    size = 2  # {}
    for key, value in arguments.items():
        if type(key) is not str:
            return False
        out.append(key)
        kind = type(value)
        if kind is str:
            size += _CHAR_BYTES * len(value) + 2
            out.append(value)
            values.append(value)
        elif kind is int:
            if not -_INT_RANGE < value < _INT_RANGE:
                return False  # a huge int may not even convert to text
            size += _NUMBER_BYTES
        elif kind is float or kind is bool or value is None:
            size += _NUMBER_BYTES
        else:
            return False
        size += _CHAR_BYTES * len(key) + 4  # "key": and a comma
        if size > MAX_ARGUMENT_BYTES:
            return False
    return True


def _flat_and_small(arguments: dict[Any, Any]) -> bool:
    """:func:`flat_strings` without the strings: the safety check's shortcut."""
    return flat_strings(arguments, [], [])


def _depth(value: Any, level: int) -> int:
    if level > MAX_ARGUMENT_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


class ToolCatalog(_Hooks):
    """Each item of every server's ``tools/list`` (local and remote alike) is validated on its own:
    bad items are rejected with the rule they break, the rest of the page is kept. Bounds come from
    ``[mcp.remote_catalog]`` (the name predates local servers being checked too)."""

    @hookimpl(trylast=True)
    def kxen_catalog_page(self, server: ServerConfig, kind: str, page: CatalogPage) -> list[Verdict] | None:
        if kind != "tools":
            return None
        if page.settings is not None:
            limits = page.settings.mcp.remote_catalog
        else:
            from kxen_core.config.models import RemoteCatalogLimits

            limits = RemoteCatalogLimits()
        return tool_verdicts(page.items, limits, known=page.known)


#: MCP's own rule for a tool name (2025-11-25, SEP-986). The model never sees it as it is unless it
#: is also provider-safe: see kxen_core.agent.tool_names, which shortens the others with a stable hash
TOOL_NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")
TOOL_NAME_RULE = "tool names must match ^[A-Za-z0-9._-]{1,128}$"
#: the fields of most tools, none of them in _FIELD_TYPES
_USUAL_KEYS = frozenset({"name", "description", "inputSchema"})
#: optional fields that must have this JSON type when present
_FIELD_TYPES: dict[str, tuple[type, str]] = {
    "title": (str, "a string"),
    "annotations": (dict, "an object"),
    "execution": (dict, "an object"),
    "_meta": (dict, "an object"),
    "icons": (list, "a list"),
}


def tool_problem(item: dict[str, Any], limits: RemoteCatalogLimits) -> str | None:
    """The rule ``item`` (one tool of a ``tools/list`` page) breaks, or None."""
    name = item.get("name")
    if not isinstance(name, str) or not TOOL_NAME_RE.fullmatch(name):
        return TOOL_NAME_RULE
    desc = item.get("description")
    if isinstance(desc, str) and len(desc) > limits.max_description_chars:
        return f"description is longer than {limits.max_description_chars} characters"
    if not _USUAL_KEYS.issuperset(item):  # most tools have no other field: nothing more to look at
        for field, value in item.items():
            rule = _FIELD_TYPES.get(field)
            if rule is not None and not isinstance(value, rule[0]):
                return f"{field} must be {rule[1]}"
        title = item.get("title")
        if isinstance(title, str) and len(title) > limits.max_description_chars:
            return f"title is longer than {limits.max_description_chars} characters"
    schema = item.get("inputSchema")
    if not isinstance(schema, dict):
        return "inputSchema must be an object"
    if schema.get("type") != "object":
        return 'inputSchema must be an object schema ("type": "object")'
    problem = schema_problem("inputSchema", schema, limits)
    if problem is None and "outputSchema" in item:
        output = item["outputSchema"]
        if not isinstance(output, dict):
            return "outputSchema must be an object"
        problem = schema_problem("outputSchema", output, limits)
    return problem


#: one encoder, built once (json.dumps with arguments builds a new one per call: most of the cost)
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def _compact_encoder() -> Callable[[Any, int], Sequence[str]]:
    """The pieces of a value's compact JSON (``"".join`` them). CPython's C encoder made once is four
    times faster than ``JSONEncoder.encode`` on a small schema (which makes one per call); where it
    is missing or answers differently, the plain encoder. No circular-reference markers: parsed JSON
    has none, and a value nested too deeply raises ``RecursionError`` either way."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is not None:
        try:
            encode = make(
                None, _COMPACT.default, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
            )
            if "".join(encode({"a": [1, "\u00e9"]}, 0)) == _COMPACT.encode({"a": [1, "\u00e9"]}):
                return encode
        except Exception:  # another interpreter's private encoder: use the public one
            pass
    return lambda value, _level: (_COMPACT.encode(value),)


_compact_parts = _compact_encoder()


def _compact(value: Any) -> str:
    """Compact JSON of ``value`` (ASCII: every other character escaped)."""
    return "".join(_compact_parts(value, 0))


def schema_problem(field: str, schema: dict[str, Any], limits: RemoteCatalogLimits) -> str | None:
    """The bound ``schema`` breaks (size, depth, a reference that leaves the document), or None."""
    try:
        text = _compact(schema)
        size = len(text)  # ASCII: the encoder escapes everything else
    except RecursionError:
        return f"{field} nests too deeply to measure"
    except (TypeError, ValueError):
        return f"{field} is not JSON"
    if size > limits.max_schema_bytes:
        return f"{field} is larger than {limits.max_schema_bytes} bytes"
    # the common case, decided on the text at C speed: no reference at all, and too few brackets
    # to nest past the bound (a scalar sits one level below the containers around it)
    if (
        '"$ref"' not in text
        and '"$dynamicRef"' not in text
        and text.count("{") + text.count("[") + 1 <= limits.max_schema_depth
    ):
        return None
    # iterative walk: bounded depth, no $ref that leaves the document
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limits.max_schema_depth:
            return f"{field} nests deeper than {limits.max_schema_depth}"
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("$ref", "$dynamicRef") and not (isinstance(value, str) and value.startswith("#")):
                    return f"{field} has a non-local {key} (only '#...' references are allowed)"
                stack.append((value, depth + 1))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return None


def tool_verdicts(
    items: Sequence[dict[str, Any]], limits: RemoteCatalogLimits, *, known: frozenset[int] = frozenset()
) -> list[Verdict]:
    """A reject verdict for each tool of ``items`` that :func:`tool_problem` finds a problem with;
    the ``known`` ones passed these rules before with the same limits (``CatalogPage.known``).

    The same rules and messages: a plain tool (only ``name``, ``description`` and ``inputSchema``,
    each of the JSON type it must have, the schema's text within every bound) is checked here in
    one loop, without the calls; anything else, and anything that fails, goes to ``tool_problem``.
    """
    verdicts: list[Verdict] = []
    plain = _USUAL_KEYS.issuperset
    name_ok = TOOL_NAME_RE.fullmatch
    parts, join = _compact_parts, "".join
    max_desc, max_bytes, max_depth = limits.max_description_chars, limits.max_schema_bytes, limits.max_schema_depth
    if known and len(known) == len(items):
        return verdicts  # the page as it was listed before
    for i, item in enumerate(items):
        if i in known:
            continue
        if plain(item):
            name = item.get("name")
            desc = item.get("description")
            schema = item.get("inputSchema")
            if (
                type(name) is str
                and name_ok(name)
                and (desc is None or (type(desc) is str and len(desc) <= max_desc))
                and type(schema) is dict
                and type(kind := schema.get("type")) is str
                and kind == "object"
            ):
                try:
                    text = join(parts(schema, 0))
                except Exception:  # not JSON, or nested too deeply to encode: tool_problem says which
                    text = None
                if (
                    text is not None
                    and len(text) <= max_bytes
                    and '"$ref"' not in text
                    and '"$dynamicRef"' not in text
                    and text.count("{") + text.count("[") + 1 <= max_depth
                ):
                    continue
        problem = tool_problem(item, limits)
        if problem:
            from kxen_core.protocol.catalog import Verdict  # loaded with the server's catalogs already

            verdicts.append(Verdict.reject(i, problem))
    return verdicts


#: the old name of tool_problem (it checked remote servers only)
remote_tool_problem = tool_problem


DEFAULT_PLUGINS = {
    "kxen.config-policy": ConfigPolicy(),
    "kxen.roles": RolePolicy(),
    "kxen.safety": SafetyCheck(),
    "kxen.argument-guard": ArgumentGuard(),
    "kxen.tool-catalog": ToolCatalog(),
}

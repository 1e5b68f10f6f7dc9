"""A tool's input schema in OpenAI's strict subset (``"strict": true`` function tools), made as a
new object: the schema given is never changed.

The rules of the strict subset that the conversion applies:

* every object has ``additionalProperties: false`` and lists all its properties in ``required``;
  a property the schema left optional becomes nullable (``"type": [T, "null"]``, ``null`` added to
  its ``enum``, or ``anyOf`` with ``{"type": "null"}``): the model sends ``null`` for what it
  leaves out (:func:`strip_added_nulls` takes those back out of its arguments);
* only the documented keywords are kept: ``type``, ``description``, ``title``, ``enum``,
  ``const``, ``anyOf`` (``oneOf`` is written as ``anyOf``), ``properties``, ``required``,
  ``additionalProperties``, ``items``, ``minItems``, ``maxItems``, ``pattern``, ``format`` (the
  formats of :data:`STRICT_FORMATS`), ``minimum``, ``maximum``, ``exclusiveMinimum``,
  ``exclusiveMaximum`` and ``multipleOf``; the others (``default``, ``minLength``, ``examples``,
  ...) are dropped and named in the result's notes;
* local ``$ref`` are inlined (:mod:`.schema_refs`).

A schema that cannot be made strict -- an object open to other keys (``additionalProperties``
that is not ``false``, ``patternProperties``), a nested object with no properties, ``allOf``,
``not``, a node with no type, an array with no ``items``, a root that is not an object, nesting
deeper than :data:`MAX_NESTING`, more than :data:`MAX_PROPERTIES` properties or
:data:`MAX_ENUM_VALUES` enum values, a recursive ``$ref`` -- gives no schema and the reason: the
tool is then given without ``strict``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kxen_core.agent.schema_refs import MAX_REF_DEPTH, SchemaLimit, Walk, resolve

#: object nesting OpenAI's strict mode takes at most
MAX_NESTING = 10
#: object properties in one strict schema at most
MAX_PROPERTIES = 5000
#: enum values in one strict schema at most
MAX_ENUM_VALUES = 1000
#: string formats the strict subset documents
STRICT_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
_COMMON = ("description", "title")
_JSON_TYPE = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
_BY_TYPE = {
    "string": ("pattern",),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "integer": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "array": ("minItems", "maxItems"),
}
#: keywords the conversion writes in its own form, or that say nothing of the value (never "dropped")
_STRUCTURAL = frozenset(
    {
        "type",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "$ref",
        "$defs",
        "definitions",
        "$schema",
        "$id",
        "$comment",
    }
)
_OPEN = ("allOf", "not", "if", "then", "else", "patternProperties", "dependentSchemas", "unevaluatedProperties")


class _Strict:
    def __init__(self, root: Any) -> None:
        self.walk = Walk(root)
        self.dropped: set[str] = set()
        self.properties = 0
        self.enums = 0

    def node(self, node: Any, where: str, nesting: int) -> dict[str, Any]:
        self.walk.visit(where)
        if not isinstance(node, dict):
            raise SchemaLimit(f"a schema that is not an object at {where}")
        if "$ref" in node:
            target = self.walk.enter_ref(node["$ref"], where)
            try:
                inlined = self.node(target, where, nesting)
            finally:
                self.walk.leave_ref()
            for key in _COMMON:
                if isinstance(node.get(key), str):
                    inlined[key] = node[key]
            return inlined
        for key in _OPEN:
            if key in node:
                raise SchemaLimit(f"{key!r} at {where} has no strict form")
        out: dict[str, Any] = {k: node[k] for k in _COMMON if isinstance(node.get(k), str)}
        union = node.get("anyOf", node.get("oneOf"))
        if union is not None:
            if not isinstance(union, list) or not union:
                raise SchemaLimit(f"an anyOf/oneOf that is not a list of schemas at {where}")
            out["anyOf"] = [self.node(s, f"{where}|{i}", nesting) for i, s in enumerate(union)]
            self._drop(node, out)
            return out
        types = self._types(node, where)
        if "enum" in node:
            values = node["enum"]
            if not isinstance(values, list):
                raise SchemaLimit(f"an enum that is not a list at {where}")
            self.enums += len(values)
            if self.enums > MAX_ENUM_VALUES:
                raise SchemaLimit(f"more than {MAX_ENUM_VALUES} enum values")
            out["enum"] = list(values)
        if "const" in node:
            out["const"] = node["const"]
        if types is None:
            types = _value_types(out.get("enum", [out["const"]] if "const" in out else []))
            if not types:
                raise SchemaLimit(f"a schema with no type at {where}")
        out["type"] = types if len(types) > 1 else types[0]
        for t in types:
            for key in _BY_TYPE.get(t, ()):
                if key in node:
                    out[key] = node[key]
        if "string" in types and node.get("format") in STRICT_FORMATS:
            out["format"] = node["format"]
        if "object" in types:
            self._object(node, out, where, nesting)
        if "array" in types:
            if not isinstance(node.get("items"), dict):
                raise SchemaLimit(f"an array with no items schema at {where}")
            out["items"] = self.node(node["items"], f"{where}[]", nesting)
        self._drop(node, out)
        return out

    def _types(self, node: dict[str, Any], where: str) -> list[str] | None:
        given = node.get("type")
        if given is None:
            if "properties" in node:
                return ["object"]
            if "items" in node:
                return ["array"]
            return None
        types = [given] if isinstance(given, str) else given
        if not isinstance(types, list) or not types or any(t not in _TYPES for t in types):
            raise SchemaLimit(f"a type kxen does not know at {where}: {str(given)[:80]}")
        if "object" in types and len(types) > 1:
            raise SchemaLimit(f"an object that may also be another type at {where}")
        return list(dict.fromkeys(types))

    def _object(self, node: dict[str, Any], out: dict[str, Any], where: str, nesting: int) -> None:
        if nesting >= MAX_NESTING:
            raise SchemaLimit(f"objects nested deeper than {MAX_NESTING} at {where}")
        extra = node.get("additionalProperties", False)
        if extra is not False:
            raise SchemaLimit(f"an object open to other keys (additionalProperties) at {where}")
        props = node.get("properties") or {}
        if not isinstance(props, dict):
            raise SchemaLimit(f"properties that are not an object at {where}")
        if not props and nesting > 0:
            raise SchemaLimit(f"an object with no properties (any keys) at {where}")
        self.properties += len(props)
        if self.properties > MAX_PROPERTIES:
            raise SchemaLimit(f"more than {MAX_PROPERTIES} properties")
        given = node.get("required")
        required: list[Any] = given if isinstance(given, list) else []
        converted = {}
        for key, sub in props.items():
            schema = self.node(sub, f"{where}.{key}", nesting + 1)
            converted[key] = schema if key in required else nullable(schema)
        out["properties"] = converted
        out["required"] = list(converted)
        out["additionalProperties"] = False

    def _drop(self, node: dict[str, Any], out: dict[str, Any]) -> None:
        self.dropped.update(k for k in node if k not in out and k not in _STRUCTURAL)


def _value_types(values: list[Any]) -> list[str] | None:
    """The JSON types of an enum's values, in order of first use; None for none, or an object or
    array among them."""
    out: list[str] = []
    for v in values:
        t = _JSON_TYPE.get(type(v))
        if t is None:
            return None
        if t not in out:
            out.append(t)
    return out or None


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also accepts ``null`` (a new dict)."""
    out = dict(schema)
    given = out.get("type")
    if "anyOf" in out:
        if {"type": "null"} not in out["anyOf"]:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
        return out
    if given is None or "const" in out:
        return {"anyOf": [out, {"type": "null"}]}
    types = [given] if isinstance(given, str) else list(given)
    if "null" not in types:
        out["type"] = [*types, "null"]
    if "enum" in out and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out


def strict_schema(schema: Any) -> tuple[dict[str, Any] | None, str]:
    """``(the strict schema, a note)``; ``(None, why)`` when it has no strict form. The note names
    the keywords dropped ("" when none)."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return None, "the input schema is not an object schema"
    conversion = _Strict(schema)
    try:
        out = conversion.node(schema, "$", 0)
    except SchemaLimit as exc:
        return None, f"no strict form: {exc}"
    except RecursionError:
        return None, "no strict form: the schema nests too deeply"
    dropped = sorted(conversion.dropped)
    return out, f"dropped for strict mode: {', '.join(dropped)}" if dropped else ""


def strip_added_nulls(schema: Any, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` less every ``null`` the strict form asked for and the schema refuses: a
    property ``schema`` leaves optional and does not let be ``null``, at any depth the schema
    describes (through ``properties``, ``items`` and local ``$ref``). Every other value is the
    model's as it sent it; nothing is added."""
    walk = Walk(schema)
    try:
        return _strip(walk, schema, dict(arguments), "$")
    except (SchemaLimit, RecursionError):
        return dict(arguments)


def _strip(walk: Walk, node: Any, value: Any, where: str) -> Any:
    walk.visit(where)
    hops = 0
    while isinstance(node, dict) and "$ref" in node:
        hops += 1
        if hops > MAX_REF_DEPTH:
            return value
        node = resolve(walk.root, node["$ref"])
    if not isinstance(node, dict):
        return value
    props = node.get("properties")
    if isinstance(value, dict) and isinstance(props, dict):
        given = node.get("required")
        required: list[Any] = given if isinstance(given, list) else []
        out = {}
        for key, item in value.items():
            sub = props.get(key)
            if item is None and key not in required and sub is not None and not _takes_null(walk, sub):
                continue
            out[key] = _strip(walk, sub, item, f"{where}.{key}") if sub is not None else item
        return out
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        return [_strip(walk, node["items"], item, f"{where}[]") for item in value]
    return value


def _takes_null(walk: Walk, node: Any) -> bool:
    if isinstance(node, dict) and "$ref" in node:
        try:
            node = resolve(walk.root, node["$ref"])
        except SchemaLimit:
            return True
    if not isinstance(node, dict):
        return True
    given = node.get("type")
    if given == "null" or (isinstance(given, list) and "null" in given):
        return True
    if given is None and not any(k in node for k in ("enum", "const", "anyOf", "oneOf", "properties", "items")):
        return True  # any value
    if None in (node.get("enum") or ()) or ("const" in node and node["const"] is None):
        return True
    union = node.get("anyOf", node.get("oneOf"))
    return isinstance(union, list) and any(_takes_null(walk, s) for s in union)


__all__ = ["MAX_NESTING", "STRICT_FORMATS", "nullable", "strict_schema", "strip_added_nulls"]

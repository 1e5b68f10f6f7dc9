"""A tool's input schema in the Gemini API's schema subset (a function declaration's
``parameters``, an OpenAPI 3.0 ``Schema``), made as a new object: the schema given is never changed.

What is kept, under the API's own (camelCase) names: ``type`` (upper case: ``STRING``, ``NUMBER``,
``INTEGER``, ``BOOLEAN``, ``ARRAY``, ``OBJECT``), ``format`` (only those Gemini documents:
:data:`GEMINI_FORMATS`), ``title``, ``description``, ``nullable``, ``enum`` (strings), ``properties``,
``required``, ``items``, ``anyOf``, ``minItems``, ``maxItems``, ``minLength``, ``maxLength``,
``pattern``, ``minimum``, ``maximum``, ``minProperties``, ``maxProperties``, ``default``.

What is mapped: a type list with ``"null"`` and ``anyOf`` with ``{"type": "null"}`` become
``nullable: true`` (a type list of several other types becomes ``anyOf``); ``oneOf`` is written as
``anyOf``; a string ``const`` as a one-value ``enum``; a local ``$ref`` is inlined
(:mod:`.schema_refs`); an ``enum`` of other values than strings is dropped and its values written
in the description.

What is dropped (and named in the notes): ``additionalProperties``, ``patternProperties``,
``allOf``, ``not``, ``if``/``then``/``else``, ``prefixItems``, ``examples``, ``exclusiveMinimum``,
``uniqueItems``, ... and whatever else is not in the list above. A reference nested deeper than
:data:`~kxen_core.agent.schema_refs.MAX_REF_DEPTH`, nesting deeper than :data:`MAX_NESTING` or a
walk past :data:`~kxen_core.agent.schema_refs.MAX_NODES` nodes ends in a node with no type there
(any value), said in the notes. kxen checks every call's arguments against the server's own
schema, so what Gemini was not told is still enforced.
"""

from __future__ import annotations

from typing import Any

from kxen_core.agent.schema_refs import SchemaLimit, Walk

#: schema nesting kept at most; deeper nodes become "any value"
MAX_NESTING = 32
#: the formats Gemini documents for its schema's types
GEMINI_FORMATS = {"STRING": frozenset({"enum", "date-time"}), "NUMBER": frozenset({"float", "double"}),
                  "INTEGER": frozenset({"int32", "int64"})}  # fmt: skip
#: the most characters of non-string enum values written into a description
MAX_ENUM_TEXT = 500
_TYPES = {"string": "STRING", "number": "NUMBER", "integer": "INTEGER", "boolean": "BOOLEAN", "array": "ARRAY",
          "object": "OBJECT"}  # fmt: skip
_COPIED = ("title", "description", "minItems", "maxItems", "minLength", "maxLength", "pattern", "minimum",
           "maximum", "minProperties", "maxProperties", "default")  # fmt: skip
_STRUCTURAL = frozenset(
    {"type", "enum", "const", "anyOf", "oneOf", "properties", "required", "items", "format", "$ref", "$defs",
     "definitions", "$schema", "$id", "$comment", "nullable"}
)  # fmt: skip


class _Gemini:
    def __init__(self, root: Any) -> None:
        self.walk = Walk(root)
        self.dropped: set[str] = set()
        self.cut: list[str] = []

    def node(self, node: Any, where: str, nesting: int) -> dict[str, Any]:
        if nesting > MAX_NESTING:
            self.cut.append(f"nesting deeper than {MAX_NESTING} at {where}")
            return {}
        try:
            self.walk.visit(where)
        except SchemaLimit as exc:
            self.cut.append(str(exc))
            return {}
        if not isinstance(node, dict):
            return {}
        if "$ref" in node:
            try:
                target = self.walk.enter_ref(node["$ref"], where)
            except SchemaLimit as exc:
                self.cut.append(str(exc))
                return {k: node[k] for k in ("description",) if isinstance(node.get(k), str)}
            try:
                inlined = self.node(target, where, nesting)
            finally:
                self.walk.leave_ref()
            if isinstance(node.get("description"), str):
                inlined["description"] = node["description"]
            return inlined
        out: dict[str, Any] = {}
        union = node.get("anyOf", node.get("oneOf"))
        types = self._types(node)
        if isinstance(union, list):
            options = [s for s in union if not (isinstance(s, dict) and s.get("type") == "null")]
            if len(options) < len(union):
                out["nullable"] = True
            converted = [self.node(s, f"{where}|{i}", nesting + 1) for i, s in enumerate(options)]
            if len(converted) == 1:
                out.update({k: v for k, v in converted[0].items() if k not in out})
            elif converted:
                out["anyOf"] = converted
        elif "null" in types:
            out["nullable"] = True
            types = [t for t in types if t != "null"]
        if node.get("nullable") is True:
            out["nullable"] = True
        if len(types) > 1:
            out["anyOf"] = [{"type": _TYPES[t]} for t in types if t in _TYPES]
        elif types and types[0] in _TYPES:
            out["type"] = _TYPES[types[0]]
        for key in _COPIED:
            if key in node:
                out[key] = node[key]
        self._enum(node, out)
        kind = out.get("type")
        if isinstance(kind, str) and node.get("format") in GEMINI_FORMATS.get(kind, ()):
            out["format"] = node["format"]
        if isinstance(node.get("properties"), dict):
            out.setdefault("type", "OBJECT")
            props = node["properties"]
            out["properties"] = {k: self.node(s, f"{where}.{k}", nesting + 1) for k, s in props.items()}
            required = node.get("required")
            if isinstance(required, list):
                kept = [k for k in required if isinstance(k, str) and k in props]
                if kept:
                    out["required"] = kept
        elif out.get("type") == "OBJECT" and nesting > 0:
            self.cut.append(f"an object with no properties at {where}: the Gemini API may refuse it")
        if isinstance(node.get("items"), dict):
            out.setdefault("type", "ARRAY")
            out["items"] = self.node(node["items"], f"{where}[]", nesting + 1)
        self.dropped.update(k for k in node if k not in out and k not in _STRUCTURAL)
        if "format" in node and "format" not in out:
            self.dropped.add("format")
        return out

    def _types(self, node: dict[str, Any]) -> list[str]:
        given = node.get("type")
        if isinstance(given, str):
            return [given]
        if isinstance(given, list):
            return [t for t in given if isinstance(t, str)]
        return []

    def _enum(self, node: dict[str, Any], out: dict[str, Any]) -> None:
        values = node.get("enum")
        if "const" in node:
            values = [node["const"]]
        if not isinstance(values, list):
            return
        if None in values:
            out["nullable"] = True
            values = [v for v in values if v is not None]
        if values and all(isinstance(v, str) for v in values):
            out["enum"] = values
            out.setdefault("type", "STRING")
            return
        if values:
            self.dropped.add("enum" if "enum" in node else "const")
            text = ", ".join(str(v) for v in values)[:MAX_ENUM_TEXT]
            out["description"] = (
                f"{out['description']} (one of: {text})" if out.get("description") else f"One of: {text}"
            )


def gemini_schema(schema: Any) -> tuple[dict[str, Any], str]:
    """``(the schema in Gemini's subset, a note)``: the note names what was dropped or cut ("" when
    nothing was)."""
    conversion = _Gemini(schema)
    try:
        out = conversion.node(schema, "$", 0)
    except RecursionError:
        return {"type": "OBJECT"}, "the schema nests too deeply: given as any object"
    notes = []
    if conversion.dropped:
        notes.append(f"dropped for Gemini: {', '.join(sorted(conversion.dropped))}")
    notes.extend(conversion.cut[:5])
    return out, "; ".join(notes)


__all__ = ["GEMINI_FORMATS", "MAX_NESTING", "gemini_schema"]

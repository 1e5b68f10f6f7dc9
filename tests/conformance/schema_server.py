"""An MCP server on the official Python SDK (the ``mcp`` package) over stdio whose tool carries a JSON
Schema 2020-12 input schema with the keywords a client must keep as sent: ``$schema``, ``$defs``
with an ``$anchor``, local ``$ref``, ``allOf``/``anyOf``/``oneOf``, ``if``/``then``/``else``,
``additionalProperties``, ``unevaluatedProperties``, ``dependentRequired``, annotations and an
``x-`` extension keyword.

Tools: ``profile`` (the rich schema) and ``echo_schema`` (its ``schema`` argument back, as JSON
text, keys in the order received). Usage: ``python schema_server.py``. (The SDK puts ``$schema``,
``properties`` and ``type`` first on the wire: what the server sends is what a client must keep.)
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import MCPServer

RICH_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:kxen:test:profile",
    "title": "Profile",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addr",
            "type": "object",
            "properties": {"street": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
            "required": ["street"],
            "additionalProperties": False,
        },
        "kind": {"enum": ["person", "org"]},
    },
    "properties": {
        "name": {"type": "string", "minLength": 1, "examples": ["Ada"]},
        "kind": {"$ref": "#/$defs/kind"},
        "home": {"$ref": "#addr"},
        "work": {"allOf": [{"$ref": "#/$defs/address"}, {"properties": {"floor": {"type": "integer"}}}]},
        "contact": {"anyOf": [{"type": "string", "format": "email"}, {"type": "null"}]},
        "size": {"oneOf": [{"type": "integer", "minimum": 1}, {"const": "unknown"}]},
        "tags": {"type": "array", "prefixItems": [{"type": "string"}], "items": False, "uniqueItems": True},
        "score": {"type": "number", "exclusiveMaximum": 100, "multipleOf": 0.5, "default": 1.5},
    },
    "if": {"properties": {"kind": {"const": "org"}}},
    "then": {"required": ["size"]},
    "else": {"required": ["name"]},
    "dependentRequired": {"work": ["name"]},
    "additionalProperties": False,
    "unevaluatedProperties": False,
    "x-kxen-note": {"kept": True, "order": [3, 1, 2]},
}

mcp = MCPServer("kxen-schema-peer")


@mcp.tool()
def echo_schema(schema: dict[str, Any]) -> str:
    """Echo the schema argument back as JSON text."""
    return json.dumps(schema)


def main() -> None:
    mcp.add_tool(lambda: "ok", name="profile", description="A tool with a JSON Schema 2020-12 input schema")
    # the SDK builds a schema from the signature; this tool's schema is the one written above
    mcp._tool_manager.get_tool("profile").parameters = RICH_SCHEMA
    mcp.run("stdio")


if __name__ == "__main__":
    main()

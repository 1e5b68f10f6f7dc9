"""Remote catalog validation: tools from a remote server are checked item by item against
``[mcp.remote_catalog]`` (names, description length, schema shape, size, depth, non-local refs);
the bad ones are rejected with a diagnostic, the good ones kept, local servers untouched."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from kxen_core.errors import UnknownTool
from kxen_testing import mem, running, text_result
from remote_support import REMOTE_ON, REMOTE_PLUGINS, SDK_TOOLS, WAIT, mcp_result, remote, status_of, text_of

pytestmark = pytest.mark.anyio


# --- remote catalog validation --------------------------------------------------------------------------


CATALOG_LIMITS = "\n[mcp.remote_catalog]\nmax_description_chars = 100\n"


@pytest.mark.peer
@pytest.mark.parametrize("mode", ["stateful", "sse"])
async def test_remote_catalog_rejects_bad_tools_keeps_good_ones(kxen_home, ws, peers, mode):
    url, kind = peers.sdk(mode, "--bad-tools")
    kxen_home.write_settings(REMOTE_ON + CATALOG_LIMITS)
    kxen_home.write_servers({"r": remote(url, kind)})
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert s["state"] == "ready"
        assert {t["name"] for t in rt.tools("r")} == SDK_TOOLS
        assert s["tools"] == len(SDK_TOOLS)
        diags = "\n".join(s["diagnostics"])
        assert "item 'bad.name' rejected by kxen.remote-catalog: tool names must match ^[A-Za-z0-9_-]{1,64}$" in diags
        assert "item 'remote_ref' rejected by kxen.remote-catalog: inputSchema has a non-local $ref" in diags
        assert "item 'wordy' rejected by kxen.remote-catalog: description is longer than 100 characters" in diags
        with anyio.fail_after(WAIT):
            assert (await rt.call_tool("r__add", {"a": 1, "b": 2}))["structuredContent"] == {"result": 3}
        for bad in ("bad.name", "remote_ref", "wordy"):
            with pytest.raises(UnknownTool):
                await rt.call_tool(bad, {}, server="r")


def deep_schema(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"x": node}}
    return node


#: (tool definition, the rule its rejection names, or None when it must be kept)
CATALOG_ITEMS: list[tuple[dict[str, Any], str | None]] = [
    ({"name": "ok_tool", "description": "fine", "inputSchema": {"type": "object"}}, None),
    ({"name": "a" * 64, "inputSchema": {"type": "object"}}, None),
    ({"name": "local-ref", "inputSchema": {"type": "object", "$defs": {"s": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/s"}}}}, None),
    ({"name": "b" * 65, "inputSchema": {"type": "object"}}, "tool names must match ^[A-Za-z0-9_-]{1,64}$"),
    ({"name": "has space", "inputSchema": {"type": "object"}}, "tool names must match ^[A-Za-z0-9_-]{1,64}$"),
    ({"name": "dotted.name", "inputSchema": {"type": "object"}}, "tool names must match ^[A-Za-z0-9_-]{1,64}$"),
    ({"name": "long_desc", "description": "d" * 101, "inputSchema": {"type": "object"}}, "description is longer than 100 characters"),
    ({"name": "no_schema"}, "inputSchema must be an object"),
    ({"name": "array_schema", "inputSchema": {"type": "array"}}, 'inputSchema must be an object schema ("type": "object")'),
    ({"name": "big_schema", "inputSchema": {"type": "object", "description": "x" * 2000}}, "inputSchema is larger than 1024 bytes"),
    ({"name": "deep_schema", "inputSchema": deep_schema(12)}, "inputSchema nests deeper than 8"),
    ({"name": "remote_ref", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "https://evil.example/s.json"}}}}, "inputSchema has a non-local $ref"),
    ({"name": "relative_ref", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "other.json#/a"}}}}, "inputSchema has a non-local $ref"),
    ({"name": "dynamic_ref", "inputSchema": {"type": "object", "items": [{"$dynamicRef": "https://evil.example/s"}]}}, "inputSchema has a non-local $dynamicRef"),
]
MOCK_LIMITS = "\n[mcp.remote_catalog]\nmax_description_chars = 100\nmax_schema_bytes = 1024\nmax_schema_depth = 8\n"


def mock_mcp(tools: list[dict[str, Any]]) -> httpx.MockTransport:
    """Streamable HTTP with JSON answers, served by httpx.MockTransport (no network)."""

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method != "POST":
            return httpx.Response(405)
        message = json.loads(request.content)
        if "id" not in message or "method" not in message:
            return httpx.Response(202)
        method = message["method"]
        result = {"tools": tools} if method == "tools/list" else mcp_result(method, message.get("params") or {})
        if method == "tools/call":
            result = text_result(f"called {message['params']['name']}")
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "result": result})

    return httpx.MockTransport(handle)


async def test_remote_catalog_rules_item_by_item(kxen_home, ws, fakes, monkeypatch):
    """Every rule through the http plugin's injectable transport; the bounds come from
    ``[mcp.remote_catalog]``; a local (memory) server with the same items keeps them all."""
    from kxen_transport_http import streamable

    tools = [item for item, _ in CATALOG_ITEMS]
    monkeypatch.setattr(streamable, "transport_factory", lambda server: mock_mcp(tools))
    fakes.add("local", tools={}, tool_defs=tools)
    kxen_home.write_settings(REMOTE_ON + MOCK_LIMITS)
    kxen_home.write_servers({"r": remote("https://mcp.example.test/mcp"), "local": mem("local", defaultToolPolicy="allow")})
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert s["state"] == "ready"
        kept = {item["name"] for item, rule in CATALOG_ITEMS if rule is None}
        assert {t["name"] for t in rt.tools("r")} == kept
        assert s["tools"] == len(kept)
        for item, rule in CATALOG_ITEMS:
            if rule is None:
                continue
            name = item["name"]
            matching = [d for d in s["diagnostics"] if f"item {name[:80]!r} rejected" in d]
            assert len(matching) == 1, (name, s["diagnostics"])
            assert rule in matching[0], (rule, matching[0])
        with anyio.fail_after(WAIT):
            assert text_of(await rt.call_tool("r__local-ref", {})) == "called local-ref"
        # the remote rules are for remote servers: the same items from a local server are kept
        assert status_of(rt, "local")["tools"] == len(CATALOG_ITEMS)

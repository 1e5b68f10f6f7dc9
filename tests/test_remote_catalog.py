"""Catalog validation: tools from every server, remote and local alike, are checked item by item
against ``[mcp.remote_catalog]`` (names, description length, field types, schema shape, size, depth,
non-local refs); the bad ones are rejected with a diagnostic, the good ones kept as sent. A name that
MCP allows but a model provider does not (a dot, 65-128 characters) is kept under a provider-safe
model-facing name."""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import httpx
import pytest
from kxen_testing import mem, running, text_result
from remote_support import REMOTE_ON, REMOTE_PLUGINS, SDK_TOOLS, WAIT, mcp_result, remote, remote_on, status_of, text_of

from kxen_core.agent.qualified import qualified_name
from kxen_core.errors import UnknownTool

pytestmark = pytest.mark.anyio


# --- remote catalog validation --------------------------------------------------------------------------


CATALOG_LIMITS = "\n[mcp.remote_catalog]\nmax_description_chars = 100\n"


@pytest.mark.peer
@pytest.mark.parametrize("mode", ["stateful", "sse"])
async def test_remote_catalog_rejects_bad_tools_keeps_good_ones(kxen_home, ws, peers, mode):
    url, kind = peers.sdk(mode, "--bad-tools")
    kxen_home.write_settings(remote_on(url, settings=REMOTE_ON + CATALOG_LIMITS))
    kxen_home.write_servers({"r": remote(url, kind)})
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert s["state"] == "ready"
        # a dot is MCP-legal: the tool is kept, under a provider-safe name the model can call
        assert {t["name"] for t in rt.tools("r")} == SDK_TOOLS | {"bad.name"}
        assert s["tools"] == len(SDK_TOOLS) + 1
        dotted = [t["qualifiedName"] for t in rt.tools("r") if t["name"] == "bad.name"]
        assert dotted == [qualified_name("r", "bad.name")] and re.fullmatch(r"r__bad_name__[0-9a-f]{8}", dotted[0])
        diags = "\n".join(s["diagnostics"])
        assert "item 'remote_ref' rejected by kxen.tool-catalog: inputSchema has a non-local $ref" in diags
        assert "item 'wordy' rejected by kxen.tool-catalog: description is longer than 100 characters" in diags
        assert "item 'has space' rejected by kxen.tool-catalog: tool names must match ^[A-Za-z0-9._-]{1,128}$" in diags
        with anyio.fail_after(WAIT):
            assert (await rt.call_tool("r__add", {"a": 1, "b": 2}))["structuredContent"] == {"result": 3}
            assert text_of(await rt.call_tool(dotted[0], {})) == "bad"
        for bad in ("remote_ref", "wordy", "has space"):
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
    (
        {
            "name": "local-ref",
            "inputSchema": {
                "type": "object",
                "$defs": {"s": {"type": "string"}},
                "properties": {"x": {"$ref": "#/$defs/s"}},
            },
        },
        None,
    ),
    ({"name": "b" * 65, "inputSchema": {"type": "object"}}, None),
    (
        {
            "name": "dotted.name",
            "title": "Dotted",
            "annotations": {"readOnlyHint": True},
            "inputSchema": {"type": "object"},
        },
        None,
    ),
    ({"name": "c" * 129, "inputSchema": {"type": "object"}}, "tool names must match ^[A-Za-z0-9._-]{1,128}$"),
    ({"name": "has space", "inputSchema": {"type": "object"}}, "tool names must match ^[A-Za-z0-9._-]{1,128}$"),
    ({"name": "emoji_\U0001f600", "inputSchema": {"type": "object"}}, "tool names must match ^[A-Za-z0-9._-]{1,128}$"),
    ({"name": "newline\n", "inputSchema": {"type": "object"}}, "tool names must match ^[A-Za-z0-9._-]{1,128}$"),
    ({"name": "bad_title", "title": 5, "inputSchema": {"type": "object"}}, "title must be a string"),
    (
        {"name": "bad_annotations", "annotations": [], "inputSchema": {"type": "object"}},
        "annotations must be an object",
    ),
    ({"name": "bad_output", "inputSchema": {"type": "object"}, "outputSchema": "x"}, "outputSchema must be an object"),
    (
        {
            "name": "remote_output_ref",
            "inputSchema": {"type": "object"},
            "outputSchema": {"$ref": "https://evil.example/o.json"},
        },
        "outputSchema has a non-local $ref",
    ),
    (
        {"name": "long_desc", "description": "d" * 101, "inputSchema": {"type": "object"}},
        "description is longer than 100 characters",
    ),
    ({"name": "no_schema"}, "inputSchema must be an object"),
    (
        {"name": "array_schema", "inputSchema": {"type": "array"}},
        'inputSchema must be an object schema ("type": "object")',
    ),
    (
        {"name": "big_schema", "inputSchema": {"type": "object", "description": "x" * 2000}},
        "inputSchema is larger than 1024 bytes",
    ),
    ({"name": "deep_schema", "inputSchema": deep_schema(12)}, "inputSchema nests deeper than 8"),
    (
        {
            "name": "remote_ref",
            "inputSchema": {"type": "object", "properties": {"x": {"$ref": "https://evil.example/s.json"}}},
        },
        "inputSchema has a non-local $ref",
    ),
    (
        {"name": "relative_ref", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "other.json#/a"}}}},
        "inputSchema has a non-local $ref",
    ),
    (
        {
            "name": "dynamic_ref",
            "inputSchema": {"type": "object", "items": [{"$dynamicRef": "https://evil.example/s"}]},
        },
        "inputSchema has a non-local $dynamicRef",
    ),
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


async def test_catalog_rules_item_by_item_for_remote_and_local_servers(kxen_home, ws, fakes, monkeypatch):
    """Every rule through the http plugin's injectable transport and through the in-memory one;
    the bounds come from ``[mcp.remote_catalog]``, and they are the same for both."""
    from kxen_transport_http import streamable

    tools = [item for item, _ in CATALOG_ITEMS]
    monkeypatch.setattr(streamable, "transport_factory", lambda server: mock_mcp(tools))
    fakes.add("local", tools={}, tool_defs=tools)
    kxen_home.write_settings(remote_on("https://mcp.example.test/mcp", settings=REMOTE_ON + MOCK_LIMITS))
    kxen_home.write_servers(
        {"r": remote("https://mcp.example.test/mcp"), "local": mem("local", defaultToolPolicy="allow")}
    )
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
        kept = {item["name"] for item, rule in CATALOG_ITEMS if rule is None}
        for server in ("r", "local"):
            s = status_of(rt, server)
            assert s["state"] == "ready"
            assert {t["name"] for t in rt.tools(server)} == kept
            assert s["tools"] == len(kept)
            for item, rule in CATALOG_ITEMS:
                if rule is None:
                    continue
                name = item["name"]
                matching = [d for d in s["diagnostics"] if f"item {name[:80]!r} rejected" in d]
                assert len(matching) == 1, (name, s["diagnostics"])
                assert rule in matching[0], (rule, matching[0])
            # what was kept is kept as the server sent it
            for t in rt.tools(server):
                sent = next(item for item, _ in CATALOG_ITEMS if item["name"] == t["name"])
                assert {k: v for k, v in t.items() if k not in ("server", "qualifiedName", "policy")} == sent
                assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", t["qualifiedName"])
        with anyio.fail_after(WAIT):
            assert text_of(await rt.call_tool("r__local-ref", {})) == "called local-ref"
            assert text_of(await rt.call_tool(qualified_name("r", "dotted.name"), {})) == "called dotted.name"

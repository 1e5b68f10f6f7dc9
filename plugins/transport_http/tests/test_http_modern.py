"""Streamable HTTP in the stateless era (MCP 2026-07-28) against scripted servers: the era probe, the
headers every POST carries (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``),
their encoding, ``x-mcp-header`` rules, and the fallback to the handshake era. The same against the
official SDK server: tests/test_era_peers.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from kxen_transport_http import hooks
from kxen_transport_http._modern import encode_value, header_map, invalid_header
from kxen_transport_http.streamable import open_streamable_http

from kxen_core.config.models import ServerConfig
from kxen_core.protocol.catalog import CatalogPage
from kxen_core.protocol.era import EraMemory, open_session
from kxen_core.protocol.session import Session
from kxen_core.transport import TransportContext

pytestmark = pytest.mark.anyio

LIMIT = 10
V = "2026-07-28"
META = "io.modelcontextprotocol/protocolVersion"
REGION_TOOL = {
    "name": "täg",
    "inputSchema": {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "on": {"type": "boolean", "x-mcp-header": "On"},
            "plain": {"type": "string"},
        },
    },
}


def reply(
    rid: Any, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None, status: int = 200
) -> httpx.Response:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
    if error is not None:
        body["error"] = error
    else:
        body["result"] = result
    return httpx.Response(status, json=body)


class Modern:
    """A stateless-era server: answers server/discover, refuses initialize, checks Mcp-Method."""

    def __init__(self, tools: list[dict[str, Any]] | None = None) -> None:
        self.tools = tools if tools is not None else [REGION_TOOL]
        self.requests: list[httpx.Request] = []
        self.bodies: list[dict[str, Any]] = []
        self.mismatch_once = False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        body = json.loads(request.content)
        self.bodies.append(body)
        method = body.get("method")
        if request.headers.get("mcp-method") != method:
            return reply(body.get("id"), error={"code": -32020, "message": "mcp-method header mismatch"}, status=400)
        if "id" not in body:
            return httpx.Response(202)
        rid = body["id"]
        if method == "initialize":
            return reply(rid, error={"code": -32022, "message": "modern only", "data": {"supported": [V]}}, status=400)
        if method == "server/discover":
            return reply(
                rid,
                {
                    "supportedVersions": [V],
                    "capabilities": {"tools": {}},
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "m"}},
                },
            )
        if method == "tools/list":
            return reply(rid, {"tools": self.tools, "resultType": "complete"})
        if method == "tools/call":
            if self.mismatch_once:
                self.mismatch_once = False
                return reply(rid, error={"code": -32020, "message": "Mcp-Param-Region missing"}, status=400)
            return reply(rid, {"content": [{"type": "text", "text": "ok"}]})
        return reply(rid, error={"code": -32601, "message": "no"}, status=404)


def server(**kwargs: Any) -> ServerConfig:
    return ServerConfig(**{"name": "t", "url": "http://mock.test/mcp", "transport": "http", **kwargs})


def context() -> TransportContext:
    return TransportContext(workspace=Path.cwd())


def decode(value: str) -> str:
    assert value.startswith("=?base64?") and value.endswith("?=")
    return base64.b64decode(value[len("=?base64?") : -2]).decode("utf-8")


# --- the value encoding and the annotation rules ------------------------------------------------


@pytest.mark.parametrize(
    "value, plain",
    [
        ("us-west1", True),
        ("us west 1", True),  # inner spaces are fine
        ("", True),
        (" padded", False),
        ("trailing ", False),
        ("\tindented", False),
        ("line1\nline2", False),
        ("Hello, 世界", False),
        ("=?base64?abc?=", False),  # looks like the encoding itself
    ],
)
def test_header_values_are_plain_or_base64(value: str, plain: bool) -> None:
    encoded = encode_value(value)
    if plain:
        assert encoded == value
    else:
        assert decode(encoded) == value
        assert encoded.isascii() and "\n" not in encoded


@pytest.mark.parametrize(
    "prop, rule",
    [
        ({"type": "string", "x-mcp-header": ""}, "non-empty"),
        ({"type": "object", "x-mcp-header": "Data"}, "not a string, integer or boolean"),
        ({"type": "array", "x-mcp-header": "Items"}, "not a string, integer or boolean"),
        ({"type": "null", "x-mcp-header": "Nil"}, "not a string, integer or boolean"),
        ({"type": "number", "x-mcp-header": "Score"}, "not a string, integer or boolean"),
        ({"type": "string", "x-mcp-header": "My Region"}, "token"),
        ({"type": "string", "x-mcp-header": "Region:Primary"}, "token"),
        ({"type": "string", "x-mcp-header": "Région"}, "token"),
        ({"type": "string", "x-mcp-header": "Region\t1"}, "token"),
        ({"type": "string", "x-mcp-header": 7}, "non-empty string"),
    ],
)
def test_invalid_annotations_are_named(prop: dict[str, Any], rule: str) -> None:
    reason = invalid_header({"type": "object", "properties": {"p": prop}})
    assert reason is not None and rule in reason


def test_duplicates_nesting_and_the_valid_map() -> None:
    twice = {
        "properties": {
            "a": {"type": "string", "x-mcp-header": "MyField"},
            "b": {"type": "string", "x-mcp-header": "myfield"},
        }
    }
    assert "twice" in (invalid_header(twice) or "")
    under_items = {"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "X"}}}}
    assert "outside a plain properties path" in (invalid_header(under_items) or "")
    nested = {
        "properties": {
            "outer": {"type": "object", "properties": {"inner": {"type": "integer", "x-mcp-header": "Inner"}}}
        }
    }
    assert invalid_header(nested) is None
    assert header_map(nested) == {("outer", "inner"): "Inner"}
    assert invalid_header(None) is None and invalid_header({"$ref": "https://x.invalid/s.json"}) is None


def test_the_catalog_verdict_drops_invalid_tools_only_in_the_stateless_era() -> None:
    bad = {"name": "bad", "inputSchema": {"properties": {"n": {"type": "number", "x-mcp-header": "N"}}}}
    page = CatalogPage(kind="tools", number=1, items=(REGION_TOOL, bad), era="modern")
    (verdict,) = hooks.kxen_catalog_page(server(), "tools", page)
    assert (verdict.index, verdict.action) == (1, "reject") and "not a string" in verdict.reason
    legacy = CatalogPage(kind="tools", number=1, items=(REGION_TOOL, bad), era="legacy")
    assert hooks.kxen_catalog_page(server(), "tools", legacy) == []
    assert hooks.kxen_catalog_page(server(transport="sse", url="http://mock.test/sse"), "tools", page) == []


# --- a session over the transport --------------------------------------------------------------


async def test_every_post_carries_the_era_headers() -> None:
    app = Modern()
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(app)) as stream:
            async with Session(stream, server="t") as session:
                init = await open_session(session, server(), EraMemory())
                assert init.protocol_version == V and init.server_info == {"name": "m"}
                await session.request("tools/list")
                args = {"region": " us-west1", "count": 42, "on": False, "plain": "no header"}
                await session.request("tools/call", {"name": "täg", "arguments": args})
                await session.request("tools/call", {"name": "täg", "arguments": {"region": None}})
                assert stream.describe()["protocolVersion"] == V
    assert [b["method"] for b in app.bodies] == ["server/discover", "tools/list", "tools/call", "tools/call"]
    for request, body in zip(app.requests, app.bodies, strict=True):
        assert request.headers["mcp-protocol-version"] == body["params"]["_meta"][META] == V
        assert request.headers["mcp-method"] == body["method"]
        assert "mcp-session-id" not in request.headers
    call = app.requests[2].headers
    assert decode(call["mcp-name"]) == "täg"  # not ASCII: base64
    assert decode(call["mcp-param-region"]) == " us-west1"  # edge whitespace: base64
    assert (call["mcp-param-count"], call["mcp-param-on"]) == ("42", "false")
    assert not any(
        name.startswith("mcp-param-") and name not in ("mcp-param-region", "mcp-param-count", "mcp-param-on")
        for name in call
    )
    assert not any(name.startswith("mcp-param-") for name in app.requests[3].headers)  # null: omitted


async def test_a_header_mismatch_refetches_the_tools_and_retries_once() -> None:
    app = Modern()
    listed: list[int] = []
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(app)) as stream:
            async with Session(stream, server="t") as session:

                async def refetch() -> None:
                    listed.append(1)
                    await session.request("tools/list")

                await open_session(session, server(), EraMemory(), refetch_tools=refetch)
                app.mismatch_once = True
                result = await session.request("tools/call", {"name": "täg", "arguments": {"region": "eu"}})
    assert result["content"][0]["text"] == "ok" and listed == [1]
    assert [b["method"] for b in app.bodies] == ["server/discover", "tools/call", "tools/list", "tools/call"]
    assert app.requests[-1].headers["mcp-param-region"] == "eu"  # learnt from the refetched list
    assert app.bodies[1]["id"] != app.bodies[3]["id"]


async def test_a_legacy_server_gets_initialize_without_era_headers() -> None:
    """server-everything's answer to the probe (400, -32000 "Server not initialized"): legacy."""
    requests: list[httpx.Request] = []

    def legacy(request: httpx.Request) -> httpx.Response:
        if request.method != "POST":
            return httpx.Response(405)  # no GET stream; DELETE refused
        requests.append(request)
        body = json.loads(request.content)
        if "id" not in body:
            return httpx.Response(202)
        if body["method"] == "server/discover":
            return reply(None, error={"code": -32000, "message": "Bad Request: Server not initialized"}, status=400)
        if body["method"] == "initialize":
            init = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "old"}}
            return httpx.Response(
                200, json={"jsonrpc": "2.0", "id": body["id"], "result": init}, headers={"mcp-session-id": "s1"}
            )
        return reply(body["id"], {"tools": []})

    memory = EraMemory()
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(legacy)) as stream:
            async with Session(stream, server="t") as session:
                init = await open_session(session, server(), memory)
                await session.request("tools/list")
                assert session.modern is None and init.protocol_version == "2025-11-25"
                assert session.era_note == "server/discover: error -32000: Bad Request: Server not initialized"
    methods = [json.loads(r.content).get("method") for r in requests]
    assert methods == ["server/discover", "initialize", "notifications/initialized", "tools/list"]
    assert requests[0].headers["mcp-method"] == "server/discover"
    for later in requests[1:]:
        assert "mcp-method" not in later.headers and "mcp-name" not in later.headers
    assert requests[-1].headers["mcp-protocol-version"] == "2025-11-25"
    assert memory.get(EraMemory.key(server())) == "legacy"

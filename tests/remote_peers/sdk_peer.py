"""An MCP server on the official Python SDK for the runtime-level remote tests (tests/test_remote.py).

Usage: ``python sdk_peer.py MODE PORT [--bad-tools]`` with MODE one of ``stateful``, ``json``
(``json_response=True``), ``stateless`` (``stateless_http=True``) or ``sse`` (legacy HTTP+SSE at
``/sse``). Binds 127.0.0.1 only.

Tools: ``add``, ``echo``, ``boom`` (raises), ``slow`` (sleeps), ``roots`` (asks the client for its
roots and returns what it got, with the capabilities the client declared). ``--bad-tools`` adds
tools a remote catalog must reject: ``bad.name`` (a dot in the name), ``remote_ref`` (an input
schema with a ``$ref`` to another document) and ``wordy`` (a 300-character description).
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer

mcp = MCPServer("kxen-remote-peer")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@mcp.tool()
def boom() -> str:
    """Always fails."""
    raise RuntimeError("boom on purpose")


@mcp.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await anyio.sleep(seconds)
    return "slept"


@mcp.tool()
async def roots(ctx: Context) -> str:
    """Ask the client for its roots; answer with what came back and what the client declared."""
    caps = ctx.client_capabilities
    declared = None if caps is None else caps.model_dump(by_alias=True, mode="json", exclude_none=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # roots is deprecated in newer protocol versions
            result = await ctx.session.list_roots()
        got: Any = [r.model_dump(by_alias=True, mode="json", exclude_none=True) for r in result.roots]
        error = None
    except Exception as exc:  # report it: the test decides what it means
        got, error = None, f"{type(exc).__name__}: {exc}"
    return json.dumps({"capabilities": declared, "roots": got, "error": error})


def add_bad_tools() -> None:
    def bad_name() -> str:
        return "should never be called"

    def remote_ref(x: str) -> str:
        return x

    def wordy() -> str:
        return "wordy"

    mcp.add_tool(bad_name, name="bad.name", description="a dot is not allowed in a remote tool name")
    mcp.add_tool(remote_ref, name="remote_ref", description="its schema points at another document")
    mcp.add_tool(wordy, name="wordy", description="w" * 300)
    # the SDK builds the schema from the signature; point one property at a remote document
    tool = mcp._tool_manager.get_tool("remote_ref")
    tool.parameters["properties"]["x"] = {"$ref": "https://schemas.example.invalid/x.json"}


def main() -> None:
    mode, port = sys.argv[1], int(sys.argv[2])
    if "--bad-tools" in sys.argv[3:]:
        add_bad_tools()
    if mode == "sse":
        mcp.run("sse", host="127.0.0.1", port=port)
        return
    options: dict[str, object] = {}
    if mode == "json":
        options["json_response"] = True
    elif mode == "stateless":
        options["stateless_http"] = True
    elif mode != "stateful":
        raise SystemExit(f"unknown mode {mode!r}")
    mcp.run("streamable-http", host="127.0.0.1", port=port, **options)


if __name__ == "__main__":
    main()

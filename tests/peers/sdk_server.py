"""An MCP server on the official Python SDK (the ``mcp`` package), run as a subprocess by the peer tests.

Usage: ``python sdk_server.py MODE [PORT] [--bad-tools] [--header-tool] [--log-tools]`` with MODE one of

* ``stdio``;
* ``stateful``, ``json`` (``json_response=True``), ``stateless`` (``stateless_http=True``),
  ``resumable`` (stateful, an in-memory event store, retry 200 ms), ``idle`` (stateful, sessions
  expire after 1 s idle): Streamable HTTP at ``/mcp``;
* ``sse``: the legacy HTTP+SSE transport at ``/sse``.

HTTP modes bind 127.0.0.1 only. Tools: ``add``, ``echo``, ``boom`` (raises), ``slow`` (sleeps),
``poll`` (closes its answer stream, then answers: the client must resume), ``roots`` (asks the
client for its roots and returns what it got, with the capabilities the client declared),
``ask_client`` (sends the client a sampling or an elicitation request, declared or not, and returns
the result or the JSON-RPC error).
``--bad-tools`` adds ``bad.name`` (a dot: MCP allows it, model providers do not, so kxen keeps it
under a provider-safe name) and tools the catalog must reject: ``has space`` (outside MCP's name
rule), ``remote_ref`` (an input schema with a ``$ref`` to another document) and ``wordy`` (a
300-character description).
``--header-tool`` adds ``tag``, whose ``region`` argument carries ``x-mcp-header: Region`` (in the
stateless era over HTTP the client mirrors it into ``Mcp-Param-Region``; the SDK checks it against
the body) and which answers how many characters it got.
``--log-tools`` adds ``shout`` (sends its ``text`` as a log message at warning level, then answers
with it).
"""

from __future__ import annotations

import json
import sys
import warnings
from itertools import count
from typing import Annotated, Any

import anyio
from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.exceptions import MCPError
from pydantic import Field

mcp = MCPServer("kxen-sdk-peer")


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
async def poll(ctx: Context) -> str:
    """Close the answer stream (resumable mode), then answer: the client must resume with GET."""
    await ctx.close_sse_stream()
    await anyio.sleep(0.3)
    return "resumed"


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


@mcp.tool()
async def ask_client(method: str, ctx: Context) -> str:
    """Send the client a sampling or elicitation request; answer with its result or error."""
    result: Any = None
    error = None
    try:
        if method == "sampling":
            message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))
            got: Any = await ctx.session.create_message([message], max_tokens=5)
        else:
            got = await ctx.session.elicit_form("your name?", {"type": "object", "properties": {}})
        result = got.model_dump(by_alias=True, mode="json", exclude_none=True)
    except MCPError as exc:
        error = {"code": exc.code, "message": exc.message}
    return json.dumps({"result": result, "error": error})


def add_header_tool() -> None:
    def tag(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        return f"region of {len(region)} characters"

    mcp.add_tool(tag, name="tag", description="mirrors region into Mcp-Param-Region")


def add_bad_tools() -> None:
    def bad_name() -> str:
        return "bad"

    def spaced() -> str:
        return "should never be called"

    def remote_ref(x: str) -> str:
        return x

    def wordy() -> str:
        return "wordy"

    mcp.add_tool(bad_name, name="bad.name", description="a dot is allowed by MCP, not by model providers")
    mcp.add_tool(spaced, name="has space", description="a space is outside MCP's tool name rule")
    mcp.add_tool(remote_ref, name="remote_ref", description="its schema points at another document")
    mcp.add_tool(wordy, name="wordy", description="w" * 300)
    # the SDK builds the schema from the signature; point one property at a remote document
    tool = mcp._tool_manager.get_tool("remote_ref")
    tool.parameters["properties"]["x"] = {"$ref": "https://schemas.example.invalid/x.json"}


class MemoryEventStore(EventStore):
    """Keeps every event in a list; replays those of the same stream after a given id."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, object]] = []
        self._ids = count(1)

    async def store_event(self, stream_id, message):  # type: ignore[override]
        event_id = str(next(self._ids))
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id, send_callback: EventCallback):  # type: ignore[override]
        stream = next((s for e, s, _ in self._events if e == last_event_id), None)
        if stream is None:
            return None
        after = False
        for event_id, stream_id, message in self._events:
            if after and stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))  # type: ignore[arg-type]
            after = after or event_id == last_event_id
        return stream


def add_log_tools() -> None:
    async def shout(text: str, ctx: Context) -> str:
        await ctx.warning(text)
        return text

    mcp.add_tool(shout, name="shout", description="log the text at warning level, then answer with it")


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--bad-tools" in sys.argv[1:]:
        add_bad_tools()
    if "--header-tool" in sys.argv[1:]:
        add_header_tool()
    if "--log-tools" in sys.argv[1:]:
        add_log_tools()
    mode = args[0] if args else "stdio"
    if mode == "stdio":
        mcp.run("stdio")
        return
    port = int(args[1])
    if mode == "sse":
        mcp.run("sse", host="127.0.0.1", port=port)
        return
    options: dict[str, object] = {}
    if mode == "json":
        options["json_response"] = True
    elif mode == "stateless":
        options["stateless_http"] = True
    elif mode == "resumable":
        options.update(event_store=MemoryEventStore(), retry_interval=200)
    elif mode == "idle":
        options["session_idle_timeout"] = 1.0
    elif mode != "stateful":
        raise SystemExit(f"unknown mode {mode!r}")
    mcp.run("streamable-http", host="127.0.0.1", port=port, **options)


if __name__ == "__main__":
    main()

"""A small MCP server on the official Python SDK, run as a subprocess by the peer tests.

Usage: ``python peer_server.py MODE PORT`` with MODE one of ``stateful``, ``json``, ``stateless``,
``resumable`` (stateful, an in-memory event store, retry 200 ms), ``idle`` (stateful, sessions
expire after 1 s idle) or ``sse`` (legacy HTTP+SSE at /sse). Binds 127.0.0.1 only.
"""

from __future__ import annotations

import sys
from itertools import count

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore

mcp = MCPServer("kxen-peer")


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
async def poll(ctx: Context) -> str:
    """Close the answer stream (resumable mode), then answer: the client must resume with GET."""
    await ctx.close_sse_stream()
    await anyio.sleep(0.3)
    return "resumed"


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


def main() -> None:
    mode, port = sys.argv[1], int(sys.argv[2])
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

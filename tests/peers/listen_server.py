"""A stateless-era (2026-07-28) server on the official Python SDK (``mcp``) that changes its tools on
request and counts its ``subscriptions/listen`` streams: the listen tests' peer.

Usage: ``python listen_server.py stdio`` or ``python listen_server.py http PORT [--cut SECONDS]``
(Streamable HTTP at ``/mcp``, stateless, 127.0.0.1 only). ``--cut`` plays a proxy that cuts every
listen stream that many seconds after it opened (the connection is dropped mid-answer).

Tools: ``grow`` (adds a tool named ``name``, then publishes a tools list change), ``listens``
(JSON: ``opened``, the listen streams opened so far, and ``open``, those open now). Every list
result carries ``ttlMs`` of an hour, so a client that only follows the caching hints would not see
a change during a test. Resources: ``note://a`` (``touch`` publishes an update of it).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus, ServerEvent

HOUR_MS = 3_600_000


class CountingBus(InMemorySubscriptionBus):
    """The in-process bus, counting its listeners: one per open listen stream."""

    def __init__(self) -> None:
        super().__init__()
        self.opened = 0
        self.open = 0

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        self.opened += 1
        self.open += 1
        unsubscribe = super().subscribe(listener)
        done = False

        def counted() -> None:
            nonlocal done
            if not done:
                done = True
                self.open -= 1
            unsubscribe()

        return counted


bus = CountingBus()
hints = {m: CacheHint(ttl_ms=HOUR_MS) for m in ("tools/list", "prompts/list", "resources/list")}
mcp = MCPServer("kxen-listen-peer", subscriptions=bus, cache_hints=hints)  # type: ignore[arg-type]
note = {"text": "first"}


@mcp.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool named ``name``, then tell the listen streams the tools changed."""

    def added() -> str:
        return "added"

    mcp.add_tool(added, name=name, description=f"added at run time as {name}")
    await ctx.notify_tools_changed()
    return f"added {name}"


@mcp.tool()
def listens() -> str:
    """How many listen streams were opened, and how many are open now."""
    return json.dumps({"opened": bus.opened, "open": bus.open})


@mcp.tool()
async def touch(text: str, ctx: Context) -> str:
    """Change note://a and publish its update."""
    note["text"] = text
    await ctx.notify_resource_updated("note://a")
    return "touched"


@mcp.resource("note://a")
def note_a() -> str:
    return note["text"]


def cutting(app: Any, seconds: float) -> Any:
    """``app`` behind a proxy that drops every ``subscriptions/listen`` answer after ``seconds``."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await app(scope, receive, send)
            return
        parts: list[dict[str, Any]] = []
        body = b""
        while True:  # bounded by the client's body (the SDK caps it too)
            message = await receive()
            parts.append(message)
            body += message.get("body", b"")
            if message["type"] != "http.request" or not message.get("more_body"):
                break

        async def replay() -> dict[str, Any]:
            return parts.pop(0) if parts else await receive()

        try:
            listen = json.loads(body).get("method") == "subscriptions/listen"
        except (ValueError, AttributeError):
            listen = False
        if not listen:
            await app(scope, replay, send)
            return
        with anyio.move_on_after(seconds):  # then return mid-answer: the server drops the connection
            await app(scope, replay, send)

    return wrapped


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    mode = args[0] if args else "stdio"
    if mode == "stdio":
        mcp.run("stdio")
        return
    import uvicorn

    app: Any = mcp.streamable_http_app(stateless_http=True, host="127.0.0.1")
    if "--cut" in sys.argv:
        app = cutting(app, float(sys.argv[sys.argv.index("--cut") + 1]))
    uvicorn.run(app, host="127.0.0.1", port=int(args[1]), log_level="warning")


if __name__ == "__main__":
    main()

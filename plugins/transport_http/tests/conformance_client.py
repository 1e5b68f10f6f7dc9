"""A client for the conformance harness: ``python conformance_client.py URL`` (the harness appends URL).

It connects with kxen's Streamable HTTP transport, initializes, lists the tools and calls each one
(``add_numbers`` with 5 and 3), then exits 0. ``localhost`` is replaced by 127.0.0.1.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
from kxen_transport_http.streamable import open_streamable_http

from kxen_core.config.models import ServerConfig
from kxen_core.protocol.session import Session
from kxen_core.transport import TransportContext


async def main(url: str) -> None:
    server = ServerConfig(name="conformance", url=url.replace("//localhost", "//127.0.0.1", 1), transport="http")
    context = TransportContext(workspace=Path.cwd(), diagnostic=lambda m: print(f"diagnostic: {m}", file=sys.stderr))
    with anyio.fail_after(20):
        async with open_streamable_http(server, context) as stream:
            async with Session(stream, server="conformance") as session:
                await session.initialize()
                for tool in (await session.request("tools/list"))["tools"]:
                    arguments = {"a": 5, "b": 3} if tool["name"] == "add_numbers" else {}
                    await session.request("tools/call", {"name": tool["name"], "arguments": arguments})


if __name__ == "__main__":
    anyio.run(main, sys.argv[-1])

"""The official Python SDK's client (the ``mcp`` package, a test-only dependency of kxen), beside
kxen: ``stdio_client`` or ``streamable_http_client`` and a ``ClientSession``, used as its
documentation shows. Informational: no target is judged against it except W1's client CPU.

Both transports start the same peer as the other sides: for stdio the command, args, cwd and
environment kxen resolves (``ServerSpec.launch``), for HTTP ``http_server.py`` (``HttpPeer``).
"""

from __future__ import annotations

import contextlib
from typing import Any

from adapters import BenchError, HttpPeer, ServerSpec


def available() -> bool:
    try:
        import mcp  # noqa: F401
    except ImportError:
        return False
    return True


class SdkStdioClient:
    name = "sdk"

    def __init__(self, spec: ServerSpec, *, pipelined: bool = False) -> None:
        self.spec = spec
        self._launch = spec.launch()
        self._stack: contextlib.AsyncExitStack | None = None
        self.session: Any = None

    async def _streams(self, stack: contextlib.AsyncExitStack) -> Any:
        import os

        from mcp import StdioServerParameters, stdio_client

        command, args, cwd, env = self._launch
        params = StdioServerParameters(command=command, args=args, cwd=cwd, env=env)
        errlog = stack.enter_context(open(os.devnull, "w"))  # as the floor: the peer's stderr is dropped
        return await stack.enter_async_context(stdio_client(params, errlog=errlog))

    async def start(self) -> None:
        from mcp import ClientSession

        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        self._stack = stack
        try:
            read, write = await self._streams(stack)
            self.session = await stack.enter_async_context(ClientSession(read, write))
            await self.session.initialize()
        except BaseException:
            await self.close()
            raise

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.session.call_tool(tool, arguments)
        if result.is_error or not result.content:
            raise BenchError(f"sdk: {tool} failed: {str(result)[:200]}")
        return {"content": [{"type": "text", "text": getattr(result.content[0], "text", None)}]}

    async def read(self, uri: str) -> dict[str, Any]:
        result = await self.session.read_resource(uri)
        return {"contents": [{"uri": str(c.uri), "text": getattr(c, "text", None)} for c in result.contents]}

    async def list_tools(self) -> list[dict[str, Any]]:
        from mcp.types import PaginatedRequestParams

        seen: dict[str, Any] = {}
        cursor = None
        for _ in range(10_000):
            page = await self.session.list_tools(
                params=PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            )
            for tool in page.tools:
                seen.setdefault(tool.name, tool)
            cursor = page.next_cursor
            if cursor is None:
                return [{"name": name} for name in seen]
        raise BenchError("sdk: too many pages")

    async def close(self) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.__aexit__(None, None, None)


class SdkHttpClient(SdkStdioClient):
    def __init__(self, spec: ServerSpec, *, pipelined: bool = False) -> None:
        self.spec = spec
        self._stack = None
        self.session = None
        self._peer: HttpPeer | None = None

    async def _streams(self, stack: contextlib.AsyncExitStack) -> Any:
        from mcp.client.streamable_http import streamable_http_client

        self._peer = await HttpPeer.start(self.spec)
        if not self.spec.bearer:
            return await stack.enter_async_context(streamable_http_client(self._peer.url))
        # a peer that requires a token (W9): the SDK's way to send headers is a client of one's own
        from mcp.shared._httpx_utils import create_mcp_http_client

        client = await stack.enter_async_context(create_mcp_http_client(headers=self.spec.auth_headers()))
        return await stack.enter_async_context(streamable_http_client(self._peer.url, http_client=client))

    async def close(self) -> None:
        peer, self._peer = self._peer, None
        try:
            await super().close()
        finally:
            if peer is not None:
                await peer.close()

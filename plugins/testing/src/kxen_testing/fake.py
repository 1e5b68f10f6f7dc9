"""A scriptable fake MCP server that runs as a task on in-memory streams.

It records every message it receives (``received``), answers ``initialize``, ``ping`` and the list
methods (paged by ``page_size``), calls tool handlers, and can be told to hang on a method, to die
after a number of messages, or to send notifications and requests of its own.

``eras`` says which protocol eras it speaks: ``("legacy",)`` (the default: the handshake era;
``server/discover`` is an unknown method), ``("modern",)`` (the stateless era, 2026-07-28: it answers
``server/discover`` and refuses ``initialize`` with -32022), or both.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import anyio

Handler = Callable[[dict[str, Any]], Any]
#: the stateless-era protocol version a fake with ``"modern"`` in its ``eras`` speaks
MODERN_VERSION = "2026-07-28"


class FakeError(Exception):
    """Raise from a handler to answer with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def text_result(text: str, *, is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return result


class FakeServer:
    def __init__(
        self,
        *,
        tools: dict[str, Handler] | None = None,
        tool_defs: list[dict[str, Any]] | None = None,
        resources: list[dict[str, Any]] | None = None,
        prompts: list[dict[str, Any]] | None = None,
        capabilities: dict[str, Any] | None = None,
        page_size: int | None = None,
        protocol_version: str | None = None,
        methods: dict[str, Handler] | None = None,
        hang: set[str] | None = None,
        eras: tuple[str, ...] = ("legacy",),
    ) -> None:
        self.handlers: dict[str, Handler] = dict(tools or {})
        self.tool_defs = (
            tool_defs
            if tool_defs is not None
            else [
                {"name": n, "description": f"fake tool {n}", "inputSchema": {"type": "object"}} for n in self.handlers
            ]
        )
        self.resources = resources
        self.prompts = prompts
        caps: dict[str, Any] = {"tools": {}}
        if resources is not None:
            caps["resources"] = {}
        if prompts is not None:
            caps["prompts"] = {}
        self.capabilities = capabilities if capabilities is not None else caps
        self.page_size = page_size
        self.protocol_version = protocol_version
        self.methods: dict[str, Handler] = dict(methods or {})
        self.hang: set[str] = set(hang or ())
        self.eras = eras
        self.received: list[dict[str, Any]] = []
        self.die_after: int | None = None  # close the connection after this many received messages
        self._send: Any = None
        self.connections = 0

    # --- scripting ----------------------------------------------------------------------------

    def received_methods(self) -> list[str]:
        return [m.get("method", "<response>") for m in self.received]

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        await self._send.send(msg)

    async def send_raw(self, message: Any) -> None:
        await self._send.send(message)

    # --- serving ------------------------------------------------------------------------------

    async def serve(self, receive: Any, send: Any) -> None:
        self._send = send
        self.connections += 1
        async with send, anyio.create_task_group() as tg:
            async for message in receive:
                self.received.append(message)
                if self.die_after is not None and len(self.received) >= self.die_after:
                    tg.cancel_scope.cancel()
                    return
                if isinstance(message, dict) and "method" in message and "id" in message:
                    tg.start_soon(self._answer, message, send)

    async def _answer(self, message: dict[str, Any], send: Any) -> None:
        method, rid, params = message["method"], message["id"], message.get("params") or {}
        if method in self.hang:
            await anyio.sleep_forever()
        try:
            result = await self._result(method, params)
            reply = {"jsonrpc": "2.0", "id": rid, "result": result}
        except FakeError as err:
            error: dict[str, Any] = {"code": err.code, "message": err.message}
            if err.data is not None:
                error["data"] = err.data
            reply = {"jsonrpc": "2.0", "id": rid, "error": error}
        try:
            await send.send(reply)  # on the connection the request came from
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    async def _result(self, method: str, params: dict[str, Any]) -> Any:
        if method in self.methods:
            return await _maybe_await(self.methods[method](params))
        if method == "server/discover" and "modern" in self.eras:
            return {
                "supportedVersions": [MODERN_VERSION],
                "capabilities": self.capabilities,
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "kxen-fake", "version": "0"}},
            }
        if method == "initialize" and "legacy" not in self.eras:
            raise FakeError(
                -32022,
                "only the stateless era",
                {"supported": [MODERN_VERSION], "requested": params.get("protocolVersion")},
            )
        if method == "initialize":
            return {
                "protocolVersion": self.protocol_version or params.get("protocolVersion"),
                "capabilities": self.capabilities,
                "serverInfo": {"name": "kxen-fake", "version": "0"},
            }
        if method == "ping":
            return {}
        if method == "tools/list":
            return self._page("tools", self.tool_defs, params)
        if method == "resources/list" and self.resources is not None:
            return self._page("resources", self.resources, params)
        if method == "prompts/list" and self.prompts is not None:
            return self._page("prompts", self.prompts, params)
        if method == "tools/call":
            handler = self.handlers.get(str(params.get("name")))
            if handler is None:
                raise FakeError(-32602, f"Unknown tool: {params.get('name')}")
            return await _maybe_await(handler(params.get("arguments") or {}))
        raise FakeError(-32601, f"Method not found: {method}")

    def _page(self, field: str, items: list[Any], params: dict[str, Any]) -> dict[str, Any]:
        if not self.page_size:
            return {field: items}
        start = int(params.get("cursor") or 0)
        end = start + self.page_size
        page: dict[str, Any] = {field: items[start:end]}
        if end < len(items):
            page["nextCursor"] = str(end)
        return page


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value

"""``Runtime.tools()`` as Agents SDK ``FunctionTool`` s, each call through ``Runtime.agent_call``."""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agents import FunctionTool

if TYPE_CHECKING:
    from agents.tool_context import ToolContext

    from kxen_core import Runtime


def _invoker(runtime: Runtime, name: str, timeout: float | None) -> Callable[[ToolContext[Any], str], Awaitable[str]]:
    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        try:
            args = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return f"InvalidArguments: the arguments for {name} are not JSON"
        if not isinstance(args, dict):
            return f"InvalidArguments: the arguments for {name} are not a JSON object"
        return (await runtime.agent_call(name, args, timeout=timeout)).text

    return invoke


def kxen_function_tools(
    runtime: Runtime, server: str | None = None, *, timeout: float | None = None
) -> list[FunctionTool]:
    """The tools ``runtime`` shows the model now (``Runtime.tools(server)``), as function tools.

    :param runtime: an entered runtime (the host enters and closes it).
    :param server: only this server's tools (kxen's own resource and prompt tools are then left out).
    :param timeout: seconds per call, instead of the server's ``requestSeconds``.

    Each tool is named by its ``qualifiedName`` (provider-safe: ``^[A-Za-z0-9_-]{1,64}$``) and
    described as the server described it; its parameters are a copy of the ``inputSchema`` as
    listed, not made strict, with ``"properties": {}`` added when the server left them out (OpenAI's
    function schema wants them; the SDK's own MCP conversion does the same). What the tool returns
    to the model is kxen's text: the result, or the error (a denial, an ``isError`` result)."""
    tools = []
    for entry in runtime.tools(server):
        name = entry["qualifiedName"]
        description = entry.get("description")
        schema = copy.deepcopy(entry["inputSchema"])
        schema.setdefault("properties", {})
        tools.append(
            FunctionTool(
                name=name,
                description=description if isinstance(description, str) else "",
                params_json_schema=schema,
                on_invoke_tool=_invoker(runtime, name, timeout),
                strict_json_schema=False,
            )
        )
    return tools


__all__ = ["kxen_function_tools"]

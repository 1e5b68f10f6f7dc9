"""``Runtime.tools()`` as LangChain structured tools, each call through ``Runtime.agent_call``."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from langchain_core.tools import StructuredTool, ToolException

if TYPE_CHECKING:
    from kxen_core import Runtime


class KxenTool(StructuredTool):
    """One tool of a kxen runtime: a ``StructuredTool`` whose ``args_schema`` is the tool's JSON
    schema as the server listed it, and whose coroutine gets the model's arguments as one dict.

    LangChain passes a structured tool's arguments as keyword arguments next to its own
    (``config``, ``run_manager``, ``callbacks``), so a server's parameter of one of those names would
    be taken for LangChain's; here the whole dict travels as it came and reaches kxen unchanged.
    """

    def _to_args_and_kwargs(self, tool_input: str | dict[str, Any], tool_call_id: str | None) -> tuple[tuple, dict]:
        parsed = self._parse_input(tool_input, tool_call_id)  # LangChain refuses a string for a JSON schema
        if not isinstance(parsed, dict):
            raise ValueError(f"{self.name}: the arguments must be a dict of the tool's parameters")
        return (dict(parsed),), {}

    @property
    def args(self) -> dict[str, Any]:
        # an MCP inputSchema need not have "properties" ({"type": "object"} takes no arguments)
        schema = self.args_schema
        properties = schema.get("properties") if isinstance(schema, dict) else None
        return dict(properties) if isinstance(properties, dict) else {}


def _caller(runtime: Runtime, name: str, timeout: float | None) -> Callable[[dict[str, Any]], Awaitable[Any]]:
    # LangGraph reads this function's annotations at run time (get_type_hints): names it can resolve
    async def call(arguments: dict[str, Any]) -> tuple[str, Any]:
        out = await runtime.agent_call(name, arguments, timeout=timeout)
        if out.is_error:
            raise ToolException(out.text)  # handle_tool_error: a tool message with status "error"
        return out.text, out

    return call


def kxen_tools(runtime: Runtime, server: str | None = None, *, timeout: float | None = None) -> list[KxenTool]:
    """The tools ``runtime`` shows the model now (``Runtime.tools(server)``), as LangChain tools.

    :param runtime: an entered runtime (the host enters and closes it).
    :param server: only this server's tools (kxen's own resource and prompt tools are then left out).
    :param timeout: seconds per call, instead of the server's ``requestSeconds``.

    Each tool is named by its ``qualifiedName`` and described as the server described it; its
    ``args_schema`` is a copy of the ``inputSchema`` (LangChain may change it, kxen's catalog stays
    as sent); ``metadata`` holds the ``server``, the server's own ``tool`` name, its ``title`` and
    ``annotations`` (hints, for the host; LangChain does not send metadata to the model).
    """
    tools = []
    for entry in runtime.tools(server):
        name = entry["qualifiedName"]
        description = entry.get("description")
        tools.append(
            KxenTool(
                name=name,
                description=description if isinstance(description, str) else "",
                args_schema=copy.deepcopy(entry["inputSchema"]),
                coroutine=_caller(runtime, name, timeout),
                response_format="content_and_artifact",
                handle_tool_error=True,
                metadata={
                    "server": entry.get("server"),
                    "tool": entry.get("name"),
                    "title": entry.get("title"),
                    "annotations": copy.deepcopy(entry.get("annotations")),
                },
            )
        )
    return tools


__all__ = ["KxenTool", "kxen_tools"]

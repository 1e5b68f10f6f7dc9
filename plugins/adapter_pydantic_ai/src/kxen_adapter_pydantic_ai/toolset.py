"""The toolset: ``Runtime.tools()`` as pydantic-ai tool definitions, ``Runtime.agent_call`` as the call."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from pydantic_ai import RunContext, ToolDefinition
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

if TYPE_CHECKING:
    from kxen_core import Runtime

#: arguments pass as the model sent them: kxen checks them against the tool's ``inputSchema``
#: itself (and answers a call the server would refuse with an error text, sending nothing)
_AS_SENT = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))


class KxenToolset(AbstractToolset[Any]):
    """The tools a :class:`kxen_core.Runtime` shows the model, as a pydantic-ai toolset.

    :param runtime: an entered runtime (the host enters and closes it; the toolset never does).
    :param server: only this server's tools (kxen's own resource and prompt tools are then left
        out, as ``Runtime.tools(server)`` leaves them out); ``None``: every ready server's and kxen's.
    :param id: the toolset's id among an agent's toolsets.
    :param timeout: seconds per call, instead of the server's ``requestSeconds``.

    Each tool is named by its ``qualifiedName`` (``<server>__<tool>``, or kxen's provider-safe
    short form), described and shaped exactly as the server listed it (a copy: the framework may
    change it, kxen's catalog stays as sent); ``metadata`` holds the ``server``, the server's own
    ``tool`` name, its ``title`` and ``annotations`` (hints, for the host's own filters; never
    sent to the model).
    """

    def __init__(
        self, runtime: Runtime, *, server: str | None = None, id: str | None = "kxen", timeout: float | None = None
    ) -> None:
        self._runtime = runtime
        self._server = server
        self._id = id
        self._timeout = timeout

    @property
    def id(self) -> str | None:
        return self._id

    @property
    def runtime(self) -> Runtime:
        return self._runtime

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """What the model sees at this step: ``Runtime.tools(server)`` as it is now."""
        tools: dict[str, ToolsetTool[Any]] = {}
        for entry in self._runtime.tools(self._server):
            name = entry["qualifiedName"]
            description = entry.get("description")
            definition = ToolDefinition(
                name=name,
                description=description if isinstance(description, str) else None,
                parameters_json_schema=copy.deepcopy(entry["inputSchema"]),
                metadata={
                    "server": entry.get("server"),
                    "tool": entry.get("name"),
                    "title": entry.get("title"),
                    "annotations": copy.deepcopy(entry.get("annotations")),
                },
            )
            tools[name] = ToolsetTool(
                toolset=self, tool_def=definition, max_retries=ctx.max_retries, args_validator=_AS_SENT
            )
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Call ``name`` through ``Runtime.agent_call``: kxen's text for the model, or ``ToolFailed``
        with kxen's error text (a denial, an error result, a server that is not ready)."""
        out = await self._runtime.agent_call(name, tool_args, timeout=self._timeout)
        if out.is_error:
            raise ToolFailed(out.text)
        return out.text


__all__ = ["KxenToolset"]

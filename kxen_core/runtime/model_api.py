"""The Runtime's model-API formats (mixed into :class:`kxen_core.Runtime`): the tools of
:meth:`~kxen_core.runtime.tools_api.ToolsHost.tools` as one model API's tool definitions, a tool
call in that API's shape run as :meth:`agent_call` runs it and answered in that shape, and the
servers' instructions as one text for a system prompt. The shapes are
:mod:`kxen_core.agent.model_formats` and :mod:`kxen_core.agent.model_calls`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kxen_core.agent.model_formats import ModelTools
    from kxen_core.agent.output import AgentOutput


class ModelHost:
    """Mixed into :class:`kxen_core.Runtime`. The methods below are the runtime's."""

    if TYPE_CHECKING:

        @property
        def output_limit(self) -> int: ...

        def tools(
            self, server: str | None = None, *, include_hidden: bool = False, with_deferred: bool = False
        ) -> list[dict[str, Any]]: ...

        def instructions(self) -> list[dict[str, Any]]: ...

        async def agent_call(
            self,
            name: str,
            arguments: Mapping[str, Any] | None = None,
            *,
            server: str | None = None,
            timeout: float | None = None,
        ) -> AgentOutput: ...

    def model_tools(
        self, format: str, *, server: str | None = None, strict: bool = False, deferred: bool = False
    ) -> ModelTools:
        """The tools the model sees (:meth:`tools`, of one ``server`` or all) as ``format``'s tool
        definitions: ``"openai-chat"``, ``"openai-responses"``, ``"anthropic"`` or ``"gemini"``
        (a list of function declarations). ``strict`` (the OpenAI formats) gives each tool in
        OpenAI's strict subset where it has one. New objects: kxen's catalog is not changed. The
        list's ``notes`` say, per tool, what was dropped, why a tool is not strict or was left out.

        While tool search is on, the list is kxen's (``kxen_search_tools`` and the tools it found);
        ``deferred`` (``anthropic`` and ``openai-responses``, whose APIs load deferred tools
        themselves) gives every tool instead, those behind search with ``defer_loading`` and no
        ``kxen_search_tools`` (:meth:`tools` with ``with_deferred``): the host adds its API's own
        tool-search tool. ``ValueError`` for an unknown format, or ``deferred`` with another."""
        from kxen_core.agent.model_formats import DEFERRING, check_format, model_tools

        if deferred and check_format(format) not in DEFERRING:
            takes = ", ".join(sorted(DEFERRING))
            raise ValueError(f"{format} has no deferred tool loading: deferred=True is for {takes}")
        entries = self.tools(server, with_deferred=True) if deferred else self.tools(server)
        return model_tools(entries, format, strict=strict)

    async def model_call(
        self, format: str, call: Any, *, strict: bool = False, timeout: float | None = None
    ) -> dict[str, Any]:
        """Run a model's tool call given in ``format``'s shape (a dict or the API SDK's object) as
        :meth:`agent_call` runs it -- the votes, an approval, pins, filters, the output bound -- and
        return its result in that format's shape. A call that cannot be read (arguments not a JSON
        object, no name or id) is answered with an error result and nothing is sent. With
        ``strict`` (the tools were given by ``model_tools(..., strict=True)``) a ``null`` the strict
        form stands for "left out" is taken out of the arguments first (a property the tool's own
        schema leaves optional and does not let be ``null``); every other value is the model's.
        ``ValueError`` for an unknown format."""
        from kxen_core.agent.model_calls import call_error_text, parse_call, tool_result
        from kxen_core.agent.output import render_error

        parsed = parse_call(format, call)
        if parsed.error is not None:
            return tool_result(parsed, render_error(call_error_text(parsed), limit=self.output_limit))
        arguments = parsed.arguments
        if strict and format in ("openai-chat", "openai-responses"):
            arguments = self._without_added_nulls(parsed.name, arguments)
        output = await self.agent_call(parsed.name, arguments, timeout=timeout)
        return tool_result(parsed, output)

    def _without_added_nulls(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        from kxen_core.agent.openai_schema import strict_schema, strip_added_nulls
        from kxen_core.agent.tool_names import server_of

        try:
            entries = self.tools(server_of(name))
        except ValueError:  # not <server>__<tool>: one of kxen's own tools
            entries = self.tools()
        entry = next((t for t in entries if t.get("qualifiedName") == name), None)
        if entry is None:
            return arguments
        schema = entry.get("inputSchema")
        if strict_schema(schema)[0] is None:  # given without strict: its nulls are the model's own
            return arguments
        return strip_added_nulls(schema, arguments)

    def model_instructions(self) -> str:
        """What the ready servers say to the model (:meth:`instructions`) as one text for a system
        prompt: each server's words fenced and labelled with whose they are (a project or remote
        server's ``unverified``), bounded; "" when no server sent any. It goes where the API keeps
        the system prompt: Anthropic's ``system``, OpenAI's ``instructions`` (Responses) or a
        ``system`` message (Chat Completions), Gemini's ``system_instruction``."""
        from kxen_core.agent.model_words import instructions_block

        return instructions_block(self.instructions())


__all__ = ["ModelHost"]

"""kxen-adapter-openai-agents: the tools of a kxen :class:`~kxen_core.Runtime` as OpenAI Agents SDK
function tools.

::

    from agents import Agent, Runner
    from kxen_adapter_openai_agents import kxen_function_tools

    async with Runtime(home=home) as rt:
        await rt.wait_ready(30)
        agent = Agent(name="assistant", model=model, tools=kxen_function_tools(rt))
        result = await Runner.run(agent, "What is 2 + 40?")

Function tools, not an object of the SDK's ``MCPServer`` protocol, because only function tools keep
every one of kxen's checks in the path and the model's view kxen's:

* the SDK turns an ``MCPServer`` 's tools into function tools itself, and with the agent's
  ``mcp_config`` ``convert_schemas_to_strict`` it rewrites their schemas (every property required,
  optional ones nullable), so the model sends ``null`` for what it leaves out and those nulls would
  reach the server; a function tool here keeps the schema the server listed (``strict_json_schema``
  off);
* the SDK renders an MCP ``CallToolResult`` for the model itself (images inlined as base64 data URLs,
  ``structuredContent`` instead of the text with ``use_structured_content``), where kxen's answer is
  one bounded text with binary contents as descriptors; a function tool returns exactly that text;
* an ``MCPServer`` brings a second lifecycle (``connect``/``cleanup``) and a second policy layer
  (``require_approval``, ``tool_filter``) beside the runtime's, and the ``mcp`` package's types.

Every call goes through ``Runtime.agent_call``: kxen's policy votes, an ``ask`` to the runtime's
approval channel (not the SDK's ``needs_approval`` interruptions), the output bound, secret
scrubbing. The list is the runtime's tools when it was made; make it again when they change (a tool
kxen no longer shows is refused by kxen with its reason, and nothing is sent).
"""

from __future__ import annotations

from .tools import kxen_function_tools

__all__ = ["kxen_function_tools"]

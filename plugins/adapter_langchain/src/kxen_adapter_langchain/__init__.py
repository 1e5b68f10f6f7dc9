"""kxen-adapter-langchain: the tools, resources and prompts of a kxen :class:`~kxen_core.Runtime`
in LangChain's shapes.

::

    from langchain.agents import create_agent
    from kxen_adapter_langchain import kxen_tools

    async with Runtime(home=home) as rt:
        await rt.wait_ready(30)
        agent = create_agent(model, kxen_tools(rt))
        state = await agent.ainvoke({"messages": [("user", "What is 2 + 40?")]})

* :func:`kxen_tools` -- ``Runtime.tools()`` as LangChain ``StructuredTool`` s (:class:`KxenTool`), the
  JSON schema as ``args_schema``; every call goes through ``Runtime.agent_call`` (kxen's policy votes,
  an ``ask`` to the runtime's approval channel, the output bound, secret scrubbing). The tool message
  holds kxen's text; an error (a denial, an ``isError`` result) is a tool message with
  ``status="error"``. The :class:`~kxen_core.AgentOutput` is the message's ``artifact`` (for the host:
  binary contents through ``artifact.binary_data``; never sent to the model).
* :func:`load_resource` -- a resource read as LangChain ``Blob`` s (through the policy votes).
* :func:`load_prompt` -- a prompt as LangChain messages, as the agent gets it (bounded, binary
  contents as descriptors).

The tools are async (``ainvoke``, ``astream``, an async agent loop): the runtime lives in the host's
event loop. The list is the runtime's tools when it was made; make it again when they change (a
tool kxen no longer shows is refused by kxen with its reason, and nothing is sent).
"""

from __future__ import annotations

from .contents import load_prompt, load_resource
from .tools import KxenTool, kxen_tools

__all__ = ["KxenTool", "kxen_tools", "load_prompt", "load_resource"]

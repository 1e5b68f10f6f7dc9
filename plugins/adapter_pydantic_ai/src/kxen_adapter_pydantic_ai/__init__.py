"""kxen-adapter-pydantic-ai: the tools of a kxen :class:`~kxen_core.Runtime` as a pydantic-ai toolset.

::

    from pydantic_ai import Agent
    from kxen_adapter_pydantic_ai import KxenToolset

    async with Runtime(home=home) as rt:
        await rt.wait_ready(30)
        agent = Agent(model, toolsets=[KxenToolset(rt)])
        result = await agent.run("What is 2 + 40?")

The toolset lists ``Runtime.tools()`` at every run step (a tool held by its pin or kept out by a
filter is gone from the next step on) and sends every call through ``Runtime.agent_call``: kxen's
policy votes, an ``ask`` to the runtime's approval channel, the output bound and secret scrubbing.
The model gets kxen's text; an error (a denial, an ``isError`` result) comes back as a failed tool
return (pydantic-ai's ``ToolFailed``), never as a retry. The runtime's life is the host's: entering
the toolset opens nothing, and it never talks to a server but through the runtime.
"""

from __future__ import annotations

from .toolset import KxenToolset

__all__ = ["KxenToolset"]

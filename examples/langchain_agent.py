"""A LangChain agent whose tools are kxen's, offline: a scripted chat model plays the model.

    uv run python examples/langchain_agent.py --home demo/home

The runtime starts the servers of the kxen home (with demo/home: the bundled demo server), the agent
(``langchain.agents.create_agent``) gets their tools from ``kxen_tools``, and the scripted model asks
for ``demo__add`` and answers with the tool message it got. Every call goes through kxen: its policy
votes (the demo denies ``fail``, so the model is not even shown it), an ``ask`` to the runtime's
approval channel, the output bound. For a real model, pass it instead of the script:
``create_agent("openai:gpt-5", kxen_tools(rt))``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import anyio
from kxen_adapter_langchain import kxen_tools
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from kxen_core import Runtime


class ScriptedChat(BaseChatModel):
    """First ask for demo__add(2, 40), then answer with what came back."""

    tool_names: list[str] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
        self.tool_names = [tool.name for tool in tools]  # what a provider would be sent
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            answer = AIMessage(content=f"2 + 40 gives {last.content}")
        else:
            print("tools:", ", ".join(self.tool_names))
            answer = AIMessage(
                content="", tool_calls=[{"name": "demo__add", "args": {"a": 2, "b": 40}, "id": "call-1"}]
            )
        return ChatResult(generations=[ChatGeneration(message=answer)])


async def main(home: Path | None, workspace: Path | None) -> None:
    async with Runtime(home=home, workspace=workspace) as rt:
        await rt.wait_ready(30)
        agent = create_agent(ScriptedChat(), kxen_tools(rt))
        state = await agent.ainvoke({"messages": [HumanMessage("What is 2 + 40?")]})
        for message in state["messages"]:
            if isinstance(message, AIMessage) and message.tool_calls:
                for call in message.tool_calls:
                    print(f"call: {call['name']} {json.dumps(call['args'])}")
            elif isinstance(message, ToolMessage):
                print(f"returned ({message.status}): {message.content}")
        print("answer:", state["messages"][-1].content)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path)
    parser.add_argument("--workspace", type=Path)
    args = parser.parse_args()
    anyio.run(main, args.home, args.workspace)

"""A pydantic-ai agent whose tools are kxen's, offline: pydantic-ai's ``FunctionModel`` plays the model.

    uv run python examples/pydantic_ai_agent.py --home demo/home

The runtime starts the servers of the kxen home (with demo/home: the bundled demo server), the agent
gets their tools through ``KxenToolset``, and the scripted model asks for ``demo__add`` and answers
with what the tool returned. Every call goes through kxen: its policy votes (the demo denies
``fail``, so the model is not even shown it), an ``ask`` to the runtime's approval channel, the
output bound. For a real model, put its name where the script is: ``Agent("openai:gpt-5", ...)``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import anyio
from kxen_adapter_pydantic_ai import KxenToolset
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from kxen_core import Runtime


def scripted_model() -> FunctionModel:
    """First ask for demo__add(2, 40), then answer with what came back."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(f"2 + 40 gives {returns[0].content}")])
        print("tools:", ", ".join(t.name for t in info.function_tools))
        return ModelResponse(parts=[ToolCallPart("demo__add", {"a": 2, "b": 40})])

    return FunctionModel(respond)


async def main(home: Path | None, workspace: Path | None) -> None:
    async with Runtime(home=home, workspace=workspace) as rt:
        await rt.wait_ready(30)
        agent = Agent(scripted_model(), toolsets=[KxenToolset(rt)])
        result = await agent.run("What is 2 + 40?")
        for message in result.all_messages():
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    print(f"call: {part.tool_name} {json.dumps(part.args_as_dict())}")
                elif isinstance(part, ToolReturnPart):
                    print(f"returned ({part.outcome}): {part.content}")
        print("answer:", result.output)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path)
    parser.add_argument("--workspace", type=Path)
    args = parser.parse_args()
    anyio.run(main, args.home, args.workspace)

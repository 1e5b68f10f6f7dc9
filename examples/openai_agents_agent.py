"""An OpenAI Agents SDK agent whose tools are kxen's, offline: the SDK's ``ScriptedModel`` plays the model.

    uv run python examples/openai_agents_agent.py --home demo/home

The runtime starts the servers of the kxen home (with demo/home: the bundled demo server), the agent
gets their tools from ``kxen_function_tools``, and the scripted model asks for ``demo__add`` and
answers with the function output it got. Every call goes through kxen: its policy votes (the demo
denies ``fail``, so the model is not even shown it), an ``ask`` to the runtime's approval channel,
the output bound. Tracing is off here (the SDK exports traces to OpenAI by default). For a real
model, name it instead of the script: ``Agent(name=..., model="gpt-5", tools=...)``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import anyio
from agents import Agent, RunConfig, Runner
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from kxen_adapter_openai_agents import kxen_function_tools

from kxen_core import Runtime


def answer(call: ModelCall) -> Any:
    """The second model call: answer with the function output the first one asked for."""
    outputs = [i["output"] for i in call.input if isinstance(i, dict) and i.get("type") == "function_call_output"]
    return [assistant_message(f"2 + 40 gives {outputs[0]}")]


async def main(home: Path | None, workspace: Path | None) -> None:
    async with Runtime(home=home, workspace=workspace) as rt:
        await rt.wait_ready(30)
        tools = kxen_function_tools(rt)
        print("tools:", ", ".join(tool.name for tool in tools))
        model = ScriptedModel(
            [[function_call("demo__add", {"a": 2, "b": 40}, call_id="call-1")], ModelStep.respond(answer)]
        )
        agent = Agent(name="assistant", model=model, tools=tools)
        result = await Runner.run(agent, "What is 2 + 40?", run_config=RunConfig(tracing_disabled=True))
        for item in result.new_items:
            if item.type == "tool_call_item":
                print(f"call: {item.raw_item.name} {item.raw_item.arguments}")  # type: ignore[union-attr]
            elif item.type == "tool_call_output_item":
                print(f"returned: {item.output}")
        print("answer:", result.final_output)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path)
    parser.add_argument("--workspace", type=Path)
    args = parser.parse_args()
    anyio.run(main, args.home, args.workspace)

"""Whole pydantic-ai agent loops over kxen, with pydantic-ai's own offline ``FunctionModel``: the
model asks for a tool, kxen votes and calls a real server (the bundled demo server, the rug-pull
server on the official SDK, server-everything), and what kxen made of the result is what the model
gets -- a result, a denial, an ``ask``'s answer, an output cut to the bound."""

from __future__ import annotations

from typing import Any

import pytest
from adapter_support import CUT, DenyTool, demo, everything, flip_rug, model_view, rug_pull, sent_calls
from kxen_adapter_pydantic_ai import KxenToolset
from kxen_testing import Channel, running
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

pytestmark = pytest.mark.anyio

WAIT = 30


class Script:
    """A ``FunctionModel`` that asks for ``calls`` (tool name, arguments) in its first response, then
    answers with the contents of the tool returns it got, one per line. It records the tools it was
    shown (``tools``: name, description, schema) and the returns (``returned``)."""

    def __init__(self, *calls: tuple[str, dict[str, Any]]) -> None:
        self.calls = calls
        self.tools: list[tuple[str, str | None, dict[str, Any]]] = []
        self.metadata: list[dict[str, Any] | None] = []
        self.returned: list[ToolReturnPart] = []
        self.model = FunctionModel(self._respond)

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.tools = [(t.name, t.description, t.parameters_json_schema) for t in info.function_tools]
        self.metadata = [t.metadata for t in info.function_tools]
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returns or not self.calls:
            self.returned = returns
            return ModelResponse(parts=[TextPart("\n".join(str(p.content) for p in returns) or "no tool")])
        return ModelResponse(
            parts=[ToolCallPart(name, args, tool_call_id=f"c{i}") for i, (name, args) in enumerate(self.calls)]
        )

    async def run(self, toolset: KxenToolset, prompt: str = "go") -> str:
        result = await Agent(self.model, toolsets=[toolset]).run(prompt)
        return result.output


async def test_the_model_calls_the_demo_server_through_kxen_and_gets_its_result(kxen_home, ws, tmp_path):
    log = tmp_path / "demo.log"
    servers = {"demo": demo(log, toolPolicies={"fail": "deny"}, disabledTools=["slow"])}
    async with running(kxen_home, ws, servers=servers, allow=["stdio"], wait=WAIT) as rt:
        script = Script(("demo__add", {"a": 2, "b": 40}))
        output = await script.run(KxenToolset(rt))
        # the names, descriptions and schemas kxen shows: no demo__slow (filtered), no demo__fail (denied)
        assert script.tools == model_view(rt)
        assert [name for name, _, _ in script.tools] == ["demo__echo", "demo__add"]
        # for the host's own filters, never sent to the model
        assert script.metadata == [
            {"server": "demo", "tool": t["name"], "title": None, "annotations": None} for t in rt.tools()
        ]
    assert [(p.tool_name, p.outcome, p.content) for p in script.returned] == [("demo__add", "success", '{"sum": 42}')]
    assert output == '{"sum": 42}'
    assert sent_calls(log) == [("add", {"a": 2, "b": 40})]


async def test_a_call_denied_by_a_vote_reaches_the_model_as_kxen_denial_and_nothing_is_sent(kxen_home, ws, tmp_path):
    log = tmp_path / "demo.log"
    deny = DenyTool("echo", "echo is switched off here")
    async with running(kxen_home, ws, deny, servers={"demo": demo(log)}, allow=["stdio"], wait=WAIT) as rt:
        script = Script(("demo__echo", {"text": "hi"}))
        await script.run(KxenToolset(rt))
        expected = await rt.agent_call("demo__echo", {"text": "hi"})
    # kxen's words for the model (the vote's reason is for the host and the audit trail)
    assert expected.is_error and expected.text == "PolicyDenied: demo__echo denied by policy"
    [returned] = script.returned
    assert (returned.outcome, returned.content) == ("failed", expected.text)  # a failure, not a retry prompt
    assert sent_calls(log) == []


@pytest.mark.parametrize("approved", [True, False])
async def test_an_ask_goes_to_the_runtimes_approval_channel(kxen_home, ws, tmp_path, approved):
    log = tmp_path / "demo.log"
    channel = Channel(approved=approved)
    servers = {"demo": demo(log, toolPolicies={"echo": "ask"})}
    async with running(kxen_home, ws, channel, servers=servers, allow=["stdio"], wait=WAIT) as rt:
        script = Script(("demo__echo", {"text": "hi"}))
        await script.run(KxenToolset(rt))
    assert [(r.kind, r.server, r.details.get("tool")) for r in channel.requests] == [("tool_call", "demo", "echo")]
    [returned] = script.returned
    if approved:
        assert (returned.outcome, returned.content) == ("success", "hi")
        assert sent_calls(log) == [("echo", {"text": "hi"})]
    else:
        assert returned.outcome == "failed" and returned.content.startswith("ApprovalDenied:")
        assert sent_calls(log) == []


async def test_the_model_gets_the_output_cut_to_kxens_bound(kxen_home, ws, tmp_path):
    log = tmp_path / "demo.log"
    kxen_home.write_settings("[mcp]\nmax_output_chars = 10000\n")
    text = "x" * 30_000
    async with running(kxen_home, ws, servers={"demo": demo(log)}, allow=["stdio"], wait=WAIT) as rt:
        script = Script(("demo__echo", {"text": text}))
        await script.run(KxenToolset(rt))
    [returned] = script.returned
    assert len(returned.content) <= 10_000 and CUT in returned.content and returned.content.startswith("x" * 9000)
    assert sent_calls(log) == [("echo", {"text": text})]  # the server got the whole argument


async def test_a_tool_held_by_its_pin_is_gone_from_the_next_run_step(kxen_home, ws, tmp_path):
    servers = {"rug": rug_pull(tmp_path / "rug.json")}
    async with running(kxen_home, ws, servers=servers, allow=["stdio"], wait=WAIT) as rt:
        toolset = KxenToolset(rt, server="rug")
        before = Script(("rug__echo", {"text": "hi"}))
        assert await before.run(toolset) == "hi"
        assert [name for name, _, _ in before.tools] == ["rug__echo", "rug__flip"]
        await flip_rug(rt)  # echo's definition changed under kxen: held until a person accepts it
        after = Script()
        await after.run(toolset)
        assert [name for name, _, _ in after.tools] == ["rug__flip"]


async def test_the_model_calls_server_everything_through_kxen(kxen_home, ws, everything_js):
    servers = {"everything": everything(everything_js)}
    async with running(kxen_home, ws, servers=servers, allow=["stdio"], wait=WAIT) as rt:
        script = Script(("everything__get-sum", {"a": 2, "b": 40}), ("everything__get-tiny-image", {}))
        await script.run(KxenToolset(rt))
        assert script.tools == model_view(rt)
        image = await rt.call_tool("everything__get-tiny-image", {})
    payload = next(b["data"] for b in image["content"] if b["type"] == "image")
    [total, picture] = script.returned
    assert (total.outcome, total.content) == ("success", "The sum of 2 and 40 is 42.")
    assert "[binary content not shown: " in picture.content and '"mimeType": "image/png"' in picture.content
    assert payload[:40] not in picture.content  # the bytes never reach the model


async def test_with_tool_search_the_model_finds_a_tool_then_calls_it(kxen_home, ws, everything_js):
    """Tool search on: the model sees kxen_search_tools and not server-everything's tools, searches,
    and the toolset's next step lists what it found, so the call goes through kxen as any other."""
    import json

    kxen_home.write_settings('[tool_search]\nenabled = "on"\n')
    shown: list[set[str]] = []

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        shown.append({t.name for t in info.function_tools})
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("kxen_search_tools", {"query": "sum of two numbers"}, "c0")])
        if returns[0].tool_name == "kxen_search_tools":
            found = json.loads(returns[0].content)["tools"][0]["qualifiedName"]
            return ModelResponse(parts=[ToolCallPart(found, {"a": 2, "b": 40}, "c1")])
        return ModelResponse(parts=[TextPart(str(returns[0].content))])

    servers = {"everything": everything(everything_js)}
    async with running(kxen_home, ws, servers=servers, allow=["stdio"], wait=WAIT) as rt:
        assert rt.tool_search_state()["on"]
        result = await Agent(FunctionModel(respond), toolsets=[KxenToolset(rt)]).run("what is 2 + 40?")
    assert "kxen_search_tools" in shown[0] and "everything__get-sum" not in shown[0]
    assert "everything__get-sum" in shown[1]
    assert result.output == "The sum of 2 and 40 is 42."

"""Whole OpenAI Agents SDK runs over kxen (``Runner.run``) with the SDK's own offline
``agents.testing.ScriptedModel``: the model asks for a tool, kxen votes and calls a real server (the
bundled demo server, the rug-pull server on the official SDK, server-everything), and what kxen
made of the result is the function output the model gets -- a result, a denial, an ``ask``'s
answer, an output cut to the bound."""

from __future__ import annotations

from typing import Any

import pytest
from adapter_support import CUT, DenyTool, demo, everything, flip_rug, model_view, rug_pull, sent_calls
from agents import Agent, FunctionTool, RunConfig, Runner
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from kxen_adapter_openai_agents import kxen_function_tools
from kxen_testing import Channel, running

pytestmark = pytest.mark.anyio

WAIT = 30


class Script:
    """A ``ScriptedModel`` that asks for ``calls`` (tool name, arguments) in its first response, then
    answers with the function outputs it got, one per line (``returned``). Arguments given as a
    string are sent as that string (the JSON text a provider hands the SDK)."""

    def __init__(self, *calls: tuple[str, dict[str, Any] | str]) -> None:
        steps: list[Any] = []
        if calls:
            steps.append([function_call(name, args, call_id=f"c{i}") for i, (name, args) in enumerate(calls)])
        steps.append(ModelStep.respond(self._answer))
        self.model = ScriptedModel(steps)
        self.returned: list[str] = []

    def _answer(self, call: ModelCall) -> Any:
        items = call.input if isinstance(call.input, list) else []
        self.returned = [
            str(i["output"]) for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        return [assistant_message("\n".join(self.returned) or "no tool")]

    @property
    def tools(self) -> list[tuple[str, str | None, dict[str, Any]]]:
        first = self.model.first_call
        assert first is not None
        return [(t.name, t.description, t.params_json_schema) for t in first.tools if isinstance(t, FunctionTool)]

    async def run(self, tools: list[FunctionTool]) -> str:
        agent = Agent(name="kxen-test", model=self.model, tools=tools)
        result = await Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True), max_turns=4)
        self.model.assert_complete()
        return str(result.final_output)


def with_properties(view: list[tuple[str, str | None, dict[str, Any]]]) -> list[tuple[str, str, dict[str, Any]]]:
    """kxen's view as function tools carry it: ``"properties": {}`` where a schema had none."""
    return [(name, description or "", {"properties": {}, **schema}) for name, description, schema in view]


async def test_the_model_calls_the_demo_server_through_kxen_and_gets_its_result(kxen_home, ws, tmp_path):
    log = tmp_path / "demo.log"
    servers = {"demo": demo(log, toolPolicies={"fail": "deny"}, disabledTools=["slow"])}
    async with running(kxen_home, ws, servers=servers, allow=["stdio"], wait=WAIT) as rt:
        script = Script(("demo__add", {"a": 2, "b": 40}))
        output = await script.run(kxen_function_tools(rt))
        # the names, descriptions and schemas kxen shows: no demo__slow (filtered), no demo__fail (denied)
        assert script.tools == model_view(rt)
        assert [name for name, _, _ in script.tools] == ["demo__echo", "demo__add"]
    assert script.returned == ['{"sum": 42}']
    assert output == '{"sum": 42}'
    assert sent_calls(log) == [("add", {"a": 2, "b": 40})]


async def test_a_call_denied_by_a_vote_reaches_the_model_as_kxen_denial_and_nothing_is_sent(kxen_home, ws, tmp_path):
    log = tmp_path / "demo.log"
    deny = DenyTool("echo", "echo is switched off here")
    async with running(kxen_home, ws, deny, servers={"demo": demo(log)}, allow=["stdio"], wait=WAIT) as rt:
        script = Script(("demo__echo", {"text": "hi"}))
        await script.run(kxen_function_tools(rt))
        expected = await rt.agent_call("demo__echo", {"text": "hi"})
    assert expected.is_error and expected.text == "PolicyDenied: demo__echo denied by policy"
    assert script.returned == [expected.text]
    assert sent_calls(log) == []


@pytest.mark.parametrize("approved", [True, False])
async def test_an_ask_goes_to_the_runtimes_approval_channel(kxen_home, ws, tmp_path, approved):
    log = tmp_path / "demo.log"
    channel = Channel(approved=approved)
    servers = {"demo": demo(log, toolPolicies={"echo": "ask"})}
    async with running(kxen_home, ws, channel, servers=servers, allow=["stdio"], wait=WAIT) as rt:
        script = Script(("demo__echo", {"text": "hi"}))
        await script.run(kxen_function_tools(rt))
    assert [(r.kind, r.server, r.details.get("tool")) for r in channel.requests] == [("tool_call", "demo", "echo")]
    [returned] = script.returned
    if approved:
        assert returned == "hi" and sent_calls(log) == [("echo", {"text": "hi"})]
    else:
        assert returned.startswith("ApprovalDenied:") and sent_calls(log) == []


async def test_the_model_gets_the_output_cut_to_kxens_bound(kxen_home, ws, tmp_path):
    log = tmp_path / "demo.log"
    kxen_home.write_settings("[mcp]\nmax_output_chars = 10000\n")
    text = "x" * 30_000
    async with running(kxen_home, ws, servers={"demo": demo(log)}, allow=["stdio"], wait=WAIT) as rt:
        script = Script(("demo__echo", {"text": text}))
        await script.run(kxen_function_tools(rt))
    [returned] = script.returned
    assert len(returned) <= 10_000 and CUT in returned and returned.startswith("x" * 9000)
    assert sent_calls(log) == [("echo", {"text": text})]


async def test_arguments_that_are_not_a_json_object_never_reach_kxen(kxen_home, ws, tmp_path):
    log = tmp_path / "demo.log"
    async with running(kxen_home, ws, servers={"demo": demo(log)}, allow=["stdio"], wait=WAIT) as rt:
        echo = next(t for t in kxen_function_tools(rt) if t.name == "demo__echo")
        script = Script(("demo__echo", "[1, 2]"), ("demo__echo", "{nope"))
        await script.run([echo])
    assert script.returned == [
        "InvalidArguments: the arguments for demo__echo are not a JSON object",
        "InvalidArguments: the arguments for demo__echo are not JSON",
    ]
    assert sent_calls(log) == []


async def test_a_tool_held_by_its_pin_after_the_list_was_made_is_refused_by_kxen(kxen_home, ws, tmp_path):
    servers = {"rug": rug_pull(tmp_path / "rug.json")}
    async with running(kxen_home, ws, servers=servers, allow=["stdio"], wait=WAIT) as rt:
        tools = kxen_function_tools(rt, "rug")  # made before the change: it still has rug__echo
        await flip_rug(rt)
        script = Script(("rug__echo", {"text": "hi"}))
        await script.run(tools)
        assert [t.name for t in kxen_function_tools(rt, "rug")] == ["rug__flip"]  # a new list leaves it out
    [returned] = script.returned
    assert returned.startswith("ToolHeld:")


async def test_the_model_calls_server_everything_and_kxens_own_tools(kxen_home, ws, everything_js):
    servers = {"everything": everything(everything_js)}
    uri = "demo://resource/static/document/features.md"
    async with running(kxen_home, ws, servers=servers, allow=["stdio"], wait=WAIT) as rt:
        script = Script(
            ("everything__get-sum", {"a": 2, "b": 40}),
            ("everything__get-tiny-image", {}),
            ("kxen_read_resource", {"server": "everything", "uri": uri}),
        )
        await script.run(kxen_function_tools(rt))
        assert script.tools == with_properties(model_view(rt))
        image = await rt.call_tool("everything__get-tiny-image", {})
        document = await rt.fetch_resource("everything", uri)
    payload = next(b["data"] for b in image["content"] if b["type"] == "image")
    total, picture, read = script.returned
    assert total == "The sum of 2 and 40 is 42."
    assert "[binary content not shown: " in picture and payload[:40] not in picture
    assert read == document[0].text

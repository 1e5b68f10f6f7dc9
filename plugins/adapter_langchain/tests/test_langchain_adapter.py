"""Whole LangChain agent loops over kxen (``langchain.agents.create_agent``) with a scripted chat model
(a ``BaseChatModel`` whose answers are a script: LangChain's fake chat models cannot bind tools): the
model asks for a tool, kxen votes and calls a real server (the bundled demo server, the rug-pull and
named-arguments servers on the official SDK, server-everything), and what kxen made of the result is
the tool message the model gets -- a result, a denial, an ``ask``'s answer, an output cut to the
bound. Resources and prompts come as LangChain ``Blob`` s and messages."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from adapter_support import CUT, DenyTool, demo, everything, flip_rug, model_view, rug_pull, sent_calls
from kxen_adapter_langchain import KxenTool, kxen_tools, load_prompt, load_resource
from kxen_testing import Channel, running
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

from kxen_core.errors import InvalidArguments

pytestmark = pytest.mark.anyio

WAIT = 30
NAMED_ARGS = Path(__file__).parent / "named_args_server.py"


class ScriptedChat(BaseChatModel):
    """A chat model that asks for ``calls`` (tool name, arguments) in its first answer, then answers
    with the contents of the tool messages it got, one per line. It records the tools bound to it,
    in the OpenAI shape LangChain hands a provider (``bound``), and the tool messages (``returned``)."""

    calls: list[tuple[str, dict[str, Any]]] = []
    bound: list[dict[str, Any]] = []
    returned: list[ToolMessage] = []

    @property
    def _llm_type(self) -> str:
        return "kxen-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
        self.bound = [convert_to_openai_tool(t) for t in tools]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        tail = []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            tail.insert(0, message)
        if tail or not self.calls:
            self.returned = tail
            answer = AIMessage(content="\n".join(str(m.content) for m in tail) or "no tool")
        else:
            calls = [{"name": name, "args": args, "id": f"c{i}"} for i, (name, args) in enumerate(self.calls)]
            answer = AIMessage(content="", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=answer)])


async def run(model: ScriptedChat, tools: list[KxenTool]) -> str:
    state = await create_agent(model, tools).ainvoke({"messages": [HumanMessage("go")]})
    return str(state["messages"][-1].content)


def shown(model: ScriptedChat) -> list[tuple[str, str | None, dict[str, Any]]]:
    return [(t["function"]["name"], t["function"]["description"], t["function"]["parameters"]) for t in model.bound]


async def test_the_model_calls_the_demo_server_through_kxen_and_gets_its_result(kxen_home, ws, tmp_path):
    log = tmp_path / "demo.log"
    servers = {"demo": demo(log, toolPolicies={"fail": "deny"}, disabledTools=["slow"])}
    async with running(kxen_home, ws, servers=servers, allow=["stdio"], wait=WAIT) as rt:
        model = ScriptedChat(calls=[("demo__add", {"a": 2, "b": 40})])
        tools = kxen_tools(rt)
        output = await run(model, tools)
        assert [t.metadata for t in tools] == [
            {"server": "demo", "tool": t["name"], "title": None, "annotations": None} for t in rt.tools()
        ]
        # the names, descriptions and schemas kxen shows: no demo__slow (filtered), no demo__fail (denied)
        assert shown(model) == model_view(rt)
        assert [name for name, _, _ in shown(model)] == ["demo__echo", "demo__add"]
    [returned] = model.returned
    assert (returned.name, returned.status, returned.content) == ("demo__add", "success", '{"sum": 42}')
    assert returned.artifact.raw["structuredContent"] == {"sum": 42}  # the AgentOutput, for the host
    assert output == '{"sum": 42}'
    assert sent_calls(log) == [("add", {"a": 2, "b": 40})]


async def test_a_call_denied_by_a_vote_reaches_the_model_as_kxen_denial_and_nothing_is_sent(kxen_home, ws, tmp_path):
    log = tmp_path / "demo.log"
    deny = DenyTool("echo", "echo is switched off here")
    async with running(kxen_home, ws, deny, servers={"demo": demo(log)}, allow=["stdio"], wait=WAIT) as rt:
        model = ScriptedChat(calls=[("demo__echo", {"text": "hi"})])
        await run(model, kxen_tools(rt))
        expected = await rt.agent_call("demo__echo", {"text": "hi"})
    assert expected.is_error and expected.text == "PolicyDenied: demo__echo denied by policy"
    [returned] = model.returned
    assert (returned.status, returned.content) == ("error", expected.text)
    assert sent_calls(log) == []


@pytest.mark.parametrize("approved", [True, False])
async def test_an_ask_goes_to_the_runtimes_approval_channel(kxen_home, ws, tmp_path, approved):
    log = tmp_path / "demo.log"
    channel = Channel(approved=approved)
    servers = {"demo": demo(log, toolPolicies={"echo": "ask"})}
    async with running(kxen_home, ws, channel, servers=servers, allow=["stdio"], wait=WAIT) as rt:
        model = ScriptedChat(calls=[("demo__echo", {"text": "hi"})])
        await run(model, kxen_tools(rt))
    assert [(r.kind, r.server, r.details.get("tool")) for r in channel.requests] == [("tool_call", "demo", "echo")]
    [returned] = model.returned
    if approved:
        assert (returned.status, returned.content) == ("success", "hi")
        assert sent_calls(log) == [("echo", {"text": "hi"})]
    else:
        assert returned.status == "error" and returned.content.startswith("ApprovalDenied:")
        assert sent_calls(log) == []


async def test_the_model_gets_the_output_cut_to_kxens_bound(kxen_home, ws, tmp_path):
    log = tmp_path / "demo.log"
    kxen_home.write_settings("[mcp]\nmax_output_chars = 10000\n")
    text = "x" * 30_000
    async with running(kxen_home, ws, servers={"demo": demo(log)}, allow=["stdio"], wait=WAIT) as rt:
        model = ScriptedChat(calls=[("demo__echo", {"text": text})])
        await run(model, kxen_tools(rt))
    [returned] = model.returned
    assert len(returned.content) <= 10_000 and CUT in returned.content and returned.content.startswith("x" * 9000)
    assert sent_calls(log) == [("echo", {"text": text})]


async def test_a_tool_held_by_its_pin_after_the_list_was_made_is_refused_by_kxen(kxen_home, ws, tmp_path):
    servers = {"rug": rug_pull(tmp_path / "rug.json")}
    async with running(kxen_home, ws, servers=servers, allow=["stdio"], wait=WAIT) as rt:
        tools = kxen_tools(rt, "rug")  # made before the change: it still has rug__echo
        await flip_rug(rt)
        model = ScriptedChat(calls=[("rug__echo", {"text": "hi"})])
        await run(model, tools)
        assert [t.name for t in kxen_tools(rt, "rug")] == ["rug__flip"]  # a new list leaves it out
    [returned] = model.returned
    assert returned.status == "error" and returned.content.startswith("ToolHeld:")


async def test_parameters_named_like_langchains_own_reach_the_server_as_sent(kxen_home, ws):
    pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK (a dev dependency) is not installed")
    servers = {"named": {"command": sys.executable, "args": [str(NAMED_ARGS)], "defaultToolPolicy": "allow"}}
    args = {"config": "strict", "callbacks": 3, "run_manager": True}
    async with running(kxen_home, ws, servers=servers, allow=["stdio"], wait=WAIT) as rt:
        model = ScriptedChat(calls=[("named__configure", args)])
        await run(model, kxen_tools(rt))
    [returned] = model.returned
    assert returned.status == "success" and json.loads(returned.content) == args


async def test_the_model_calls_server_everything_and_kxens_own_tools(kxen_home, ws, everything_js):
    servers = {"everything": everything(everything_js)}
    uri = "demo://resource/static/document/features.md"
    async with running(kxen_home, ws, servers=servers, allow=["stdio"], wait=WAIT) as rt:
        model = ScriptedChat(
            calls=[
                ("everything__get-sum", {"a": 2, "b": 40}),
                ("everything__get-tiny-image", {}),
                ("kxen_read_resource", {"server": "everything", "uri": uri}),
            ]
        )
        tools = kxen_tools(rt)
        await run(model, tools)
        assert [(t.name, t.description, t.args_schema) for t in tools] == model_view(rt)
        assert [name for name, _, _ in shown(model)] == [name for name, _, _ in model_view(rt)]
        document = await rt.fetch_resource("everything", uri)
    total, picture, read = model.returned
    assert (total.status, total.content) == ("success", "The sum of 2 and 40 is 42.")
    payload = picture.artifact.raw["content"][1]["data"]
    assert "[binary content not shown: " in picture.content and payload[:40] not in picture.content
    assert picture.artifact.binary_data(0) == base64.b64decode(payload)  # the host gets the bytes
    assert read.content == document[0].text


async def test_resources_come_as_blobs_and_prompts_as_messages(kxen_home, ws, everything_js):
    servers = {"everything": everything(everything_js)}
    async with running(kxen_home, ws, servers=servers, allow=["stdio"], wait=WAIT) as rt:
        [doc] = await load_resource(rt, "everything", "demo://resource/static/document/features.md")
        [blob] = await load_resource(rt, "everything", "demo://resource/dynamic/blob/2")
        raw = await rt.fetch_resource("everything", "demo://resource/dynamic/blob/2")
        asked = await load_prompt(rt, "everything", "args-prompt", {"city": "Paris"})
        embedded = await load_prompt(rt, "everything", "resource-prompt", {"resourceType": "Blob", "resourceId": "2"})
        with pytest.raises(InvalidArguments, match="city"):  # checked before it is sent, as kxen checks it
            await load_prompt(rt, "everything", "args-prompt", {})
    assert doc.mimetype == "text/markdown" and doc.metadata == {"server": "everything", "uri": doc.metadata["uri"]}
    assert doc.as_string().startswith("#")
    assert (blob.as_bytes(), blob.mimetype) == (raw[0].data, "text/plain")
    assert [(type(m), m.content) for m in asked] == [(HumanMessage, "What's weather in Paris?")]
    intro, resource = embedded
    assert intro.content.startswith("This prompt includes the Blob resource with id: 2")
    descriptor = json.loads(resource.content.removeprefix("[binary content not shown: ").removesuffix("]"))
    assert descriptor["uri"] == "demo://resource/dynamic/blob/2" and descriptor["type"] == "blob"
    assert raw[0].data.decode() not in resource.content  # the model gets the descriptor, not the bytes


async def test_a_prompt_longer_than_the_output_bound_is_refused_whole(kxen_home, ws, everything_js):
    kxen_home.write_settings("[mcp]\nmax_output_chars = 10000\n")
    servers = {"everything": everything(everything_js)}
    async with running(kxen_home, ws, servers=servers, allow=["stdio"], wait=WAIT) as rt:
        [short] = await load_prompt(rt, "everything", "args-prompt", {"city": "Paris" * 100})
        with pytest.raises(ValueError, match=r"over the output bound of 10000 \(\[mcp\] max_output_chars\)"):
            await load_prompt(rt, "everything", "args-prompt", {"city": "Paris" * 4000})
    assert short.content == f"What's weather in {'Paris' * 100}?"

"""Runtime.model_tools / model_call / model_instructions against real servers (the bundled demo
server, server-everything, the rug-pull server for a held tool), checked with each provider's
official Python SDK: the tool definitions and results validate with the SDK's types, and a whole
turn goes through the SDK's client to a scripted model (tests/model_api_support.py), no network."""

from __future__ import annotations

import copy
import json

import anyio
import pytest
from adapter_support import WAIT, DenyTool, demo, everything, flip_rug, rug_pull, sent_calls
from model_api_support import Scripted, converse, sdk_check, sdk_check_result

from kxen_core import Runtime
from kxen_core.agent.model_formats import FORMATS
from kxen_core.plugins import make_plugin_manager

pytestmark = pytest.mark.anyio
pytest.importorskip("openai")
pytest.importorskip("anthropic")
pytest.importorskip("google.genai")


async def _ready(rt: Runtime) -> Runtime:
    with anyio.fail_after(WAIT):
        assert await rt.wait_ready()
    return rt


def _runtime(servers: dict, *extra: object) -> Runtime:
    return Runtime(servers={"mcpServers": servers}, settings={}, pm=make_plugin_manager(allow=["stdio"], extra=extra))


async def test_every_tool_of_the_demo_server_and_server_everything_is_in_every_format_and_the_sdks_take_it(
    tmp_path, everything_js
):
    servers = {"demo": demo(tmp_path / "demo.log"), "ev": everything(everything_js)}
    async with _runtime(servers) as rt:
        await _ready(rt)
        listed = rt.tools()
        before = copy.deepcopy(listed)
        names = [t["qualifiedName"] for t in listed]
        assert len([n for n in names if n.startswith("ev__")]) >= 10
        strict_counts = {}
        for format in FORMATS:
            for strict in (False, True):
                tools = rt.model_tools(format, strict=strict)
                for tool in tools:
                    sdk_check(format, tool)
                shown = [t.get("name") or t.get("function", {}).get("name") for t in tools]
                assert shown == names, (format, strict)
                if strict and format.startswith("openai"):
                    strict_counts[format] = sum(
                        1 for t in tools if t.get("strict") or t.get("function", {}).get("strict")
                    )
        # kxen_get_prompt's string map (additionalProperties) has no strict form; every other tool has one
        assert strict_counts == {"openai-chat": len(names) - 1, "openai-responses": len(names) - 1}
        notes = rt.model_tools("openai-chat", strict=True).notes
        assert "open to other keys" in notes["kxen_get_prompt"]
        assert rt.tools() == before  # kxen's catalog, schemas and all, as it was


@pytest.mark.parametrize("format", FORMATS)
async def test_a_turn_through_the_sdk_runs_echo_on_the_demo_server_and_sends_the_result_back(tmp_path, format):
    log = tmp_path / "demo.log"
    async with _runtime({"demo": demo(log)}) as rt:
        await _ready(rt)
        model = Scripted(format, "demo__echo", {"text": "hi from the model"})
        result = await converse(rt, format, model)
        sdk_check_result(format, result)
        assert sent_calls(log) == [("echo", {"text": "hi from the model"})]
        first, second = model.requests
        sent_tools = first.get("tools")
        if format == "gemini":
            sent_tools = first["tools"][0]["functionDeclarations"]
        assert [t.get("name") or t["function"]["name"] for t in sent_tools][:4] == [
            "demo__echo", "demo__add", "demo__slow", "demo__fail"
        ]  # fmt: skip
        assert "hi from the model" in json.dumps(second)  # the result went back through the SDK
        assert json.dumps(result).count("hi from the model") == 1


async def test_a_turn_with_server_everything_gives_binary_contents_as_descriptors(everything_js):
    async with _runtime({"ev": everything(everything_js)}) as rt:
        await _ready(rt)
        for format in FORMATS:
            model = Scripted(format, "ev__get-tiny-image", {})
            result = await converse(rt, format, model)
            sdk_check_result(format, result)
            text = json.dumps(result)
            assert '\\"type\\": \\"image\\", \\"mimeType\\": \\"image/png\\"' in text
            assert "iVBOR" not in text  # the PNG's base64 is never in it
        echoed = await rt.model_call("gemini", {"functionCall": {"name": "ev__echo", "args": {"message": "yo"}}})
        assert echoed == {"functionResponse": {"name": "ev__echo", "response": {"output": "Echo: yo"}}}
        block = rt.model_instructions()
        assert '<server-instructions server="ev" scope="user" serverInfo="mcp-servers/everything' in block
        assert "Everything Server" in block and block.endswith("</server-instructions>")


async def test_a_denied_call_is_the_denial_text_with_the_error_flag_and_nothing_is_sent(tmp_path):
    log = tmp_path / "demo.log"
    async with _runtime({"demo": demo(log)}, DenyTool("add", "no sums today")) as rt:
        await _ready(rt)
        for format in FORMATS:
            result = await converse(rt, format, Scripted(format, "demo__add", {"a": 2, "b": 3}))
            sdk_check_result(format, result)
            text = json.dumps(result)
            assert "PolicyDenied: demo__add denied by policy" in text  # the agent's short reason
            if format == "anthropic":
                assert result["is_error"] is True
            if format == "gemini":
                assert "error" in result["functionResponse"]["response"]
        assert sent_calls(log) == []


async def test_a_call_the_model_broke_is_an_error_result_and_nothing_is_sent(tmp_path):
    log = tmp_path / "demo.log"
    async with _runtime({"demo": demo(log)}) as rt:
        await _ready(rt)
        broken = {"id": "c1", "type": "function", "function": {"name": "demo__echo", "arguments": '{"text": '}}
        result = await rt.model_call("openai-chat", broken)
        assert result["tool_call_id"] == "c1" and result["content"].startswith("InvalidToolCall: demo__echo")
        wrong = await rt.model_call("anthropic", {"type": "tool_use", "id": "t", "name": "demo__echo", "input": {}})
        assert wrong["is_error"] is True and wrong["content"].startswith("kxen: not sent: the arguments of tool 'echo'")
        unknown = await rt.model_call("openai-responses", {"call_id": "c", "name": "nope__x", "arguments": "{}"})
        assert unknown["output"].startswith("UnknownTool: "), unknown
        assert sent_calls(log) == []


async def test_strict_mode_s_nulls_for_what_the_model_left_out_are_not_sent(tmp_path):
    log = tmp_path / "demo.log"
    async with _runtime({"demo": demo(log)}) as rt:
        await _ready(rt)
        (slow,) = [t for t in rt.model_tools("openai-chat", strict=True) if t["function"]["name"] == "demo__slow"]
        assert slow["function"]["parameters"]["properties"]["seconds"] == {"type": ["number", "null"]}
        # the model's null for "left out" would be sent as it is without strict (kxen's argument
        # check counts a top-level null as left out); with strict, kxen takes it out itself
        result = await converse(
            rt, "openai-chat", Scripted("openai-chat", "demo__slow", {"seconds": None}), strict=True
        )
        assert not result["content"].startswith("kxen: not sent"), result
        assert sent_calls(log) == [("slow", {})]


async def test_a_filtered_tool_and_a_held_tool_are_in_no_format(tmp_path):
    servers = {"demo": demo(tmp_path / "demo.log", disabledTools=["slow"]), "rug": rug_pull(tmp_path / "rug.json")}
    async with _runtime(servers) as rt:
        await _ready(rt)
        await flip_rug(rt)
        for format in FORMATS:
            for strict in (False, True):
                text = json.dumps(rt.model_tools(format, strict=strict))
                assert "demo__echo" in text and "rug__flip" in text
                assert "demo__slow" not in text and "rug__echo" not in text
        held = await rt.model_call(
            "anthropic", {"type": "tool_use", "id": "t", "name": "rug__echo", "input": {"text": "x"}}
        )
        assert held["is_error"] is True and held["content"].startswith("ToolHeld")
        filtered = await rt.model_call("gemini", {"name": "demo__slow", "args": {}})
        assert "error" in filtered["functionResponse"]["response"]


async def test_with_tool_search_on_each_format_gets_kxen_s_list_or_deferred_loading(tmp_path, everything_js):
    """Search on: every format lists kxen_search_tools and not server-everything's tools; with
    ``deferred`` the two formats that load deferred tools themselves get every tool, those behind
    search with ``defer_loading`` (the SDKs' types take it), and no kxen_search_tools."""
    servers = {"demo": demo(tmp_path / "demo.log"), "ev": everything(everything_js)}
    settings = {"tool_search": {"enabled": "on", "always_visible": ["demo__echo"]}}
    pm = make_plugin_manager(allow=["stdio"])
    async with Runtime(servers={"mcpServers": servers}, settings=settings, pm=pm) as rt:
        await _ready(rt)
        for format in FORMATS:
            tools = rt.model_tools(format)
            shown = {t.get("name") or t.get("function", {}).get("name") for t in tools}
            assert {"kxen_search_tools", "demo__echo"} <= shown and "ev__echo" not in shown, format
            for tool in tools:
                sdk_check(format, tool)
        for format in ("anthropic", "openai-responses"):
            tools = rt.model_tools(format, deferred=True)
            for tool in tools:
                sdk_check(format, tool)
            marked = {t["name"]: t.get("defer_loading", False) for t in tools}
            assert "kxen_search_tools" not in marked
            assert (
                marked["demo__echo"] is False and marked["ev__echo"] is True and marked["kxen_read_resource"] is False
            )
        for format in ("openai-chat", "gemini"):
            with pytest.raises(ValueError, match="no deferred tool loading"):
                rt.model_tools(format, deferred=True)

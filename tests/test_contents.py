"""Resources, templates and prompts through the Runtime and kxen's own agent tools (fake servers).

Real-peer twins: tests/test_contents_peers.py (server-everything, both pinned versions, and an
official-SDK server) and tests/test_contents_hostile.py (a hostile stdlib server over stdio).
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kxen_testing import Channel, FakeServer, mem, running, text_result

from kxen_core.agent.qualified import qualified_name, split_qualified
from kxen_core.config import check_server_key, load_config
from kxen_core.errors import ApprovalDenied, ConfigError, InvalidArguments, PolicyDenied, UnknownTool
from kxen_core.runtime.kxen_tools import GET_PROMPT, LIST_PROMPTS, LIST_RESOURCES, LIST_TEMPLATES, READ_RESOURCE, TOOLS

pytestmark = pytest.mark.anyio

PROVIDER_RULE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
RESOURCES = [{"uri": f"file:///r/{i:03}", "name": f"r{i}", "mimeType": "text/plain"} for i in range(45)]
TEMPLATES = [
    {"uriTemplate": "file:///t/{id}", "name": "by id"},
    {"uriTemplate": "file:///t/{id}", "name": "by id"},  # a duplicate: one is kept
    {"uriTemplate": "file:///u/{name}", "name": "by name", "mimeType": "text/plain"},
]
PROMPTS = [
    {"name": "plain", "description": "no arguments"},
    {
        "name": "weather",
        "description": "weather in a city",
        "arguments": [{"name": "city", "required": True}, {"name": "state", "description": "optional"}],
    },
    {"name": "broken", "arguments": [{"name": "x", "required": "yes"}]},  # skipped by the catalog rules
]
BLOB = bytes(range(256)) * 40


def read(params: dict[str, Any]) -> dict[str, Any]:
    uri = params["uri"]
    if uri.endswith(".bin"):
        return {"contents": [{"uri": uri, "blob": base64.b64encode(BLOB).decode(), "mimeType": "text/plain"}]}
    return {"contents": [{"uri": uri, "text": f"body of {uri}", "mimeType": "text/plain"}]}


def get_prompt(params: dict[str, Any]) -> dict[str, Any]:
    args = params.get("arguments") or {}
    return {
        "description": "d",
        "messages": [{"role": "user", "content": {"type": "text", "text": f"weather in {args}"}}],
    }


def contents_fake(**extra: Any) -> FakeServer:
    methods = {
        "resources/read": read,
        "resources/templates/list": lambda p: {"resourceTemplates": TEMPLATES},
        "prompts/get": get_prompt,
        **extra.pop("methods", {}),
    }
    return FakeServer(
        tools={"echo": lambda a: text_result(str(a.get("text")))},
        resources=extra.pop("resources", RESOURCES),
        prompts=extra.pop("prompts", PROMPTS),
        page_size=10,
        methods=methods,
        **extra,
    )


def agent_json(result: dict[str, Any]) -> Any:
    (block,) = result["content"]
    assert result["isError"] is False, block["text"]
    return json.loads(block["text"])


def sent(fake: FakeServer, method: str) -> list[dict[str, Any]]:
    return [m for m in fake.received if m.get("method") == method]


async def page_through(rt, tool: str, field: str, **args: Any) -> list[list[dict[str, Any]]]:
    pages, cursor = [], None
    for _ in range(200):  # bounded: 10,000 items at 100 a page at most... and far fewer here
        page = agent_json(await rt.call_tool(tool, {**args, **({"cursor": cursor} if cursor else {})}))
        pages.append(page[field])
        cursor = page["nextCursor"]
        if cursor is None:
            return pages
    raise AssertionError("the cursor never ended")


# --- kxen's tools: names and presence -------------------------------------------------------------


def test_kxen_tool_names_follow_the_provider_rule_and_never_look_qualified():
    for name in TOOLS:
        assert PROVIDER_RULE.match(name) and "__" not in name
        with pytest.raises(ValueError):
            split_qualified(name)


servers = st.text(alphabet="_-aZ09k", min_size=1, max_size=32).filter(lambda s: check_server_key(s) is None)


@settings(max_examples=500, deadline=None)
@given(
    server=servers | st.sampled_from(["kxen", "kxen_list", "k"]),
    tool=st.text(min_size=1, max_size=40) | st.sampled_from(list(TOOLS)),
)
def test_no_server_tool_name_is_a_kxen_tool_name(server, tool):
    assert qualified_name(server, tool) not in TOOLS


async def test_the_tools_appear_only_when_a_ready_server_declares_the_capability(kxen_home, tmp_path, fakes):
    fakes.add("plain", tools={"echo": lambda a: text_result("x")})
    fakes.add("res", tools={}, resources=[])
    servers = {"a": mem("plain"), "b": mem("res")}
    async with running(kxen_home, tmp_path, servers=servers) as rt:
        kxen = {t["name"]: t for t in rt.tools() if t["server"] is None}
        assert set(kxen) == {LIST_RESOURCES, LIST_TEMPLATES, READ_RESOURCE}  # no server offers prompts
        assert all(t["qualifiedName"] == t["name"] and t["inputSchema"]["type"] == "object" for t in kxen.values())
        assert rt.tools("a") == [t for t in rt.tools() if t["server"] == "a"]  # one server's: its own only
        with pytest.raises(UnknownTool):
            await rt.call_tool(LIST_PROMPTS, {})
    fakes.add("plain2", tools={"echo": lambda a: text_result("x")})
    async with running(kxen_home, tmp_path, servers={"a": mem("plain2")}) as rt:
        assert [t for t in rt.tools() if t["server"] is None] == []


# --- listing resources ----------------------------------------------------------------------------


async def test_the_agent_pages_through_every_resource_twenty_at_a_time(kxen_home, tmp_path, fakes):
    fake = fakes.add("f", contents_fake())
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        assert len(sent(fake, "resources/list")) == 5  # the catalog: 45 items in pages of 10
        pages = await page_through(rt, LIST_RESOURCES, "resources")
        assert [len(p) for p in pages] == [20, 20, 5]
        assert [r["uri"] for p in pages for r in p] == [r["uri"] for r in RESOURCES]
        assert pages[0][0] == {"server": "s", "uri": "file:///r/000", "name": "r0", "mimeType": "text/plain"}
        everything = agent_json(await rt.call_tool(LIST_RESOURCES, {"limit": 100}))
        assert len(everything["resources"]) == 45 and everything["nextCursor"] is None and everything["total"] == 45
        assert len(sent(fake, "resources/list")) == 5  # listing is served from kxen's catalog


@pytest.mark.parametrize(
    "args, rule",
    [
        ({"limit": 101}, "limit must be an integer from 1 to 100"),
        ({"limit": 0}, "limit must be"),
        ({"limit": "5"}, "limit must be"),
        ({"limit": True}, "limit must be"),
        ({"cursor": "bm9wZQ=="}, "invalid cursor"),
        ({"cursor": "x" * 100}, "invalid cursor"),
        ({"cursor": 3}, "cursor must be a string"),
        ({"server": "nope"}, "no server named 'nope'"),
        ({"bogus": 1}, "unknown argument(s) 'bogus'"),
    ],
)
async def test_bad_listing_arguments_are_clear_errors(kxen_home, tmp_path, fakes, args, rule):
    fakes.add("f", contents_fake())
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        with pytest.raises((InvalidArguments, UnknownTool), match=re.escape(rule)):
            await rt.call_tool(LIST_RESOURCES, args)
        out = await rt.agent_call(LIST_RESOURCES, args)  # the agent gets the same as an error text
        assert out.is_error and rule in out.text


async def test_one_server_or_all(kxen_home, tmp_path, fakes):
    fakes.add("f", contents_fake())
    fakes.add("g", contents_fake(resources=[{"uri": "mem://g", "name": "g"}], prompts=[]))
    async with running(kxen_home, tmp_path, servers={"a": mem("f"), "b": mem("g")}) as rt:
        only_b = agent_json(await rt.call_tool(LIST_RESOURCES, {"server": "b"}))
        assert only_b == {"nextCursor": None, "total": 1, "resources": [{"server": "b", "uri": "mem://g", "name": "g"}]}
        pages = await page_through(rt, LIST_RESOURCES, "resources", limit=7)
        assert sum(len(p) for p in pages) == 46 and pages[-1][-1]["server"] == "b"


async def test_a_page_holds_only_what_fits_the_bound_and_every_item_stays_reachable(kxen_home, tmp_path, fakes):
    wordy = [{"uri": f"file:///w/{i}", "name": f"w{i}", "description": "d" * 5000} for i in range(30)]
    fakes.add("f", contents_fake(resources=wordy))
    kxen_home.write_settings("[mcp]\nmax_output_chars = 10000\n")
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        assert rt.output_limit == 10_000
        pages, cursor = [], None
        for _ in range(100):
            out = await rt.agent_call(LIST_RESOURCES, {"limit": 100, **({"cursor": cursor} if cursor else {})})
            assert len(out.text) <= 10_000 and not out.truncated
            page = json.loads(out.text)
            pages.append(page["resources"])
            cursor = page["nextCursor"]
            if cursor is None:
                break
        assert len(pages) > 3 and [r["uri"] for p in pages for r in p] == [r["uri"] for r in wordy]
        assert all(len(r["description"]) == 1001 for p in pages for r in p)  # shortened, marked with …


async def test_templates_are_listed_deduplicated_by_uri_template(kxen_home, tmp_path, fakes):
    fake = fakes.add("f", contents_fake())
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        assert [t["uriTemplate"] for t in rt.resource_templates()] == ["file:///t/{id}", "file:///u/{name}"]
        page = agent_json(await rt.call_tool(LIST_TEMPLATES, {}))
        assert page["resourceTemplates"][1] == {
            "server": "s",
            "uriTemplate": "file:///u/{name}",
            "name": "by name",
            "mimeType": "text/plain",
        }
        assert len(sent(fake, "resources/templates/list")) == 1
        # resources/list_changed fetches the templates again too
        await fake.notify("notifications/resources/list_changed")
        for _ in range(500):
            if len(sent(fake, "resources/templates/list")) == 2:
                break
            await anyio.sleep(0.01)
        assert len(sent(fake, "resources/templates/list")) == 2


async def test_a_server_without_templates_keeps_its_resources(kxen_home, tmp_path, fakes):
    fakes.add("f", tools={}, resources=RESOURCES[:3])  # resources/templates/list: method not found
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        assert rt.status()[0]["state"] == "ready" and rt.status()[0]["resources"] == 3
        assert rt.resource_templates() == []
        assert any("resources/templates/list failed" in d for d in rt.status()[0]["diagnostics"])


# --- the host's view ------------------------------------------------------------------------------


async def test_the_host_lists_pages_and_reads(kxen_home, tmp_path, fakes):
    fakes.add("f", contents_fake())
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        whole = rt.resources()
        assert whole["nextCursor"] is None and [r["uri"] for r in whole["resources"]] == [r["uri"] for r in RESOURCES]
        first = rt.resources("s", limit=40)
        assert len(first["resources"]) == 40 and first["nextCursor"]
        rest = rt.resources(cursor=first["nextCursor"])
        assert [r["name"] for r in rest["resources"]] == ["r40", "r41", "r42", "r43", "r44"] and rest[
            "nextCursor"
        ] is None
        with pytest.raises(InvalidArguments):
            rt.resources(cursor="garbage")
        with pytest.raises(UnknownTool):
            rt.resources("nope")
        prompts = {p["name"]: p for p in rt.prompts()}
        assert set(prompts) == {"plain", "weather"}
        assert prompts["weather"]["arguments"][0] == {"name": "city", "required": True}
        text = await rt.read_resource("s", "file:///r/001")
        assert (text.text, text.binary) == ("body of file:///r/001", ())
        blob = await rt.read_resource("s", "file:///x.bin")
        assert base64.b64encode(BLOB).decode()[:50] not in blob.text and blob.binary[0].size == len(BLOB)
        assert blob.binary_data(0) == BLOB
        (fetched,) = await rt.fetch_resource("s", "file:///x.bin")
        assert (fetched.uri, fetched.mime_type, fetched.data, fetched.text) == (
            "file:///x.bin",
            "text/plain",
            BLOB,
            None,
        )
        (plain,) = await rt.fetch_resource("s", "file:///r/002")
        assert plain.text == "body of file:///r/002" and plain.data is None


# --- reading ------------------------------------------------------------------------------------


async def test_the_agent_reads_text_as_text_and_blobs_as_descriptors_without_being_asked(kxen_home, tmp_path, fakes):
    fake = fakes.add("f", contents_fake())
    channel = Channel(approved=False)  # the server's default policy is "ask": reads are not asked
    async with running(kxen_home, tmp_path, channel, servers={"s": mem("f")}) as rt:
        text = await rt.call_tool(READ_RESOURCE, {"server": "s", "uri": "file:///r/007"})
        assert text == {"content": [{"type": "text", "text": "body of file:///r/007"}], "isError": False}
        blob = await rt.agent_call(READ_RESOURCE, {"server": "s", "uri": "file:///b.bin"})
        assert blob.text.startswith("[binary content not shown: ") and f'"bytes": {len(BLOB)}' in blob.text
        assert base64.b64encode(BLOB).decode()[:50] not in blob.text
        assert [m["params"] for m in sent(fake, "resources/read")] == [
            {"uri": "file:///r/007"},
            {"uri": "file:///b.bin"},
        ]
        # a server tool is still asked (and refused here)
        with pytest.raises(ApprovalDenied):
            await rt.call_tool("s__echo", {"text": "x"})
    assert [r.kind for r in channel.requests] == ["tool_call"]


@pytest.mark.parametrize(
    "entry, listed",
    [
        ({"toolPolicies": {"resources/read": "deny"}}, True),
        ({"toolPolicies": {"resources/read": "ask"}}, True),
        ({"defaultToolPolicy": "deny"}, False),
    ],
)
async def test_the_user_can_switch_reads_off(kxen_home, tmp_path, fakes, entry, listed):
    fake = fakes.add("f", contents_fake())
    async with running(kxen_home, tmp_path, servers={"s": mem("f", **entry)}) as rt:
        with pytest.raises((PolicyDenied, ApprovalDenied)):
            await rt.read_resource("s", "file:///r/001")
        out = await rt.agent_call(READ_RESOURCE, {"server": "s", "uri": "file:///r/001"})
        assert out.is_error and "resources/read" in out.text
        assert sent(fake, "resources/read") == []
        if listed:
            page = agent_json(await rt.call_tool(LIST_RESOURCES, {}))
            assert page["total"] == 45 and "skipped" not in page
        else:  # every server that offers it denies the listing: the model is not shown it, a call is refused
            assert LIST_RESOURCES not in {t["name"] for t in rt.tools()}
            with pytest.raises(PolicyDenied, match="denies resources/list"):
                await rt.call_tool(LIST_RESOURCES, {})


async def test_a_listing_denied_for_one_server_skips_it(kxen_home, tmp_path, fakes):
    fakes.add("f", contents_fake())
    fakes.add("g", contents_fake(resources=[{"uri": "mem://g", "name": "g"}]))
    servers = {"a": mem("f", toolPolicies={"resources/list": "deny"}), "b": mem("g")}
    async with running(kxen_home, tmp_path, servers=servers) as rt:
        page = agent_json(await rt.call_tool(LIST_RESOURCES, {}))
        assert [r["server"] for r in page["resources"]] == ["b"]
        assert list(page["skipped"]) == ["a"] and "denied by policy" in page["skipped"]["a"]


async def test_a_server_tool_named_like_a_method_gets_no_read_only_pass(kxen_home, tmp_path, fakes):
    # a "/" is outside MCP's tool name rule: the catalog skips the tool, so it cannot even be called
    fake = fakes.add("f", tools={"resources/read": lambda a: text_result("ran")})
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        with pytest.raises(UnknownTool):
            await rt.call_tool("resources/read", {}, server="s")
        assert any("item 'resources/read' rejected by kxen.tool-catalog" in d for d in rt.servers["s"].diagnostics)
    assert sent(fake, "tools/call") == []


@pytest.mark.parametrize(
    "args, rule",
    [
        ({"server": "s"}, "uri must be a string"),
        ({"server": "s", "uri": ""}, "uri must be a string"),
        ({"server": "s", "uri": "u" * 9000}, "uri must be a string"),
        ({"uri": "file:///a"}, "server must be a non-empty string"),
        ({"server": "s", "uri": 5}, "uri must be a string"),
    ],
)
async def test_bad_read_arguments_send_nothing(kxen_home, tmp_path, fakes, args, rule):
    fake = fakes.add("f", contents_fake())
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        with pytest.raises(InvalidArguments, match=rule):
            await rt.call_tool(READ_RESOURCE, args)
    assert sent(fake, "resources/read") == []


async def test_reading_from_a_server_without_resources_is_refused(kxen_home, tmp_path, fakes):
    fakes.add("f", contents_fake())
    fakes.add("plain", tools={"echo": lambda a: text_result("x")})
    async with running(kxen_home, tmp_path, servers={"s": mem("f"), "p": mem("plain")}) as rt:
        with pytest.raises(InvalidArguments, match="does not offer resources"):
            await rt.read_resource("p", "file:///a")


# --- prompts ----------------------------------------------------------------------------------


async def test_prompts_keep_their_arguments_and_bad_ones_are_skipped(kxen_home, tmp_path, fakes):
    fakes.add("f", contents_fake())
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        page = agent_json(await rt.call_tool(LIST_PROMPTS, {}))
        assert page["prompts"] == [
            {"server": "s", "name": "plain", "description": "no arguments", "arguments": []},
            {
                "server": "s",
                "name": "weather",
                "description": "weather in a city",
                "arguments": [
                    {"name": "city", "required": True},
                    {"name": "state", "description": "optional", "required": False},
                ],
            },
        ]
        assert any(
            "'broken' skipped: arguments[0].required must be true or false" in d for d in rt.status()[0]["diagnostics"]
        )


@pytest.mark.parametrize(
    "name, arguments, rule",
    [
        ("weather", {}, "missing required argument(s): 'city'"),
        ("weather", None, "missing required argument(s): 'city'"),
        ("weather", {"city": "Paris", "country": "FR"}, "unknown argument(s): 'country' (it takes: 'city', 'state')"),
        ("weather", {"city": 3}, "argument values must be strings: 'city'"),
        ("weather", {"city": "Paris", "state": None}, "argument values must be strings: 'state'"),
        ("weather", ["Paris"], "arguments must be an object of strings"),
        ("plain", {"x": "1"}, "unknown argument(s): 'x' (it takes: none)"),
        ("nope", {}, "has no prompt named 'nope'"),
        ("broken", {"x": "1"}, "has no prompt named 'broken'"),
        ("", {}, "name must be a non-empty string"),
    ],
)
async def test_a_failing_prompt_check_sends_nothing(kxen_home, tmp_path, fakes, name, arguments, rule):
    fake = fakes.add("f", contents_fake())
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        with pytest.raises(InvalidArguments) as info:
            await rt.get_prompt("s", name, arguments)
        assert rule in str(info.value)
        args: dict[str, Any] = {"server": "s", "name": name}
        if arguments is not None:
            args["arguments"] = arguments
        out = await rt.agent_call(GET_PROMPT, args)
        assert out.is_error and out.text.startswith("InvalidArguments: ") and rule in out.text
    assert sent(fake, "prompts/get") == []


async def test_a_good_prompt_call_reaches_the_agent_as_json(kxen_home, tmp_path, fakes):
    fake = fakes.add("f", contents_fake())
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        data = agent_json(
            await rt.call_tool(GET_PROMPT, {"server": "s", "name": "weather", "arguments": {"city": "Oslo"}})
        )
        assert data == {
            "description": "d",
            "messages": [{"role": "user", "content": {"type": "text", "text": "weather in {'city': 'Oslo'}"}}],
        }
        out = await rt.get_prompt("s", "plain")
        assert json.loads(out.text)["messages"] and out.raw["description"] == "d"
    assert [m["params"] for m in sent(fake, "prompts/get")] == [
        {"name": "weather", "arguments": {"city": "Oslo"}},
        {"name": "plain", "arguments": {}},
    ]


# --- the bound through the Runtime ------------------------------------------------------------------


async def test_agent_call_bounds_server_results_and_errors(kxen_home, tmp_path, fakes):
    def huge(args: dict[str, Any]) -> dict[str, Any]:
        return {
            "content": [
                {"type": "text", "text": "h" * 200_000},
                {"type": "image", "data": "QUJD" * 100_000, "mimeType": "image/png"},
            ]
        }

    fakes.add("f", tools={"huge": huge})
    kxen_home.write_settings("[mcp]\nmax_output_chars = 12345\n")
    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        raw = await rt.call_tool("s__huge", {})
        assert len(raw["content"][0]["text"]) == 200_000  # the host's view is the server's result
        out = await rt.agent_call("s__huge", {})
        assert len(out.text) == 12345 and out.truncated and out.original_chars > 200_000
        assert out.binary[0].size == 300_000 and out.binary_data(0) == b"ABC" * 100_000
        missing = await rt.agent_call("s__nope", {})
        assert missing.is_error and missing.text.startswith("UnknownTool: ")


@pytest.mark.parametrize("value", ["9999", "10000001", "true", "5e4", '"50000"'])
def test_the_output_bound_setting_is_checked(kxen_home, tmp_path: Path, value):
    kxen_home.write_settings(f"[mcp]\nmax_output_chars = {value}\n")
    with pytest.raises(ConfigError) as info:
        load_config(kxen_home.path, tmp_path)
    (problem,) = info.value.problems
    assert problem.startswith(str(kxen_home.path / "config.toml") + ": mcp.max_output_chars: ")


def test_the_output_bound_setting_defaults_to_50000(kxen_home, tmp_path: Path):
    assert load_config(kxen_home.path, tmp_path).settings.mcp.max_output_chars == 50_000
    kxen_home.write_settings("[mcp]\nmax_output_chars = 20000\n")
    assert load_config(kxen_home.path, tmp_path).settings.mcp.max_output_chars == 20_000

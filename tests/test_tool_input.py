"""A call's arguments are checked against the tool's ``inputSchema`` before anything is sent: a call
the server would refuse is refused by kxen with the argument, the rule and the schema path, and a
schema kxen cannot evaluate safely is passed as before."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kxen_testing import Channel, FakeServer, mem, running, text_result

from kxen_core.agent import tool_input
from kxen_core.agent.tool_input import MAX_REASON_CHARS, check_arguments, input_check

WAIT = 30
SDK_SERVER = Path(__file__).parent / "peers" / "sdk_server.py"

ADD = {
    "type": "object",
    "properties": {"a": {"type": "integer", "title": "A"}, "b": {"type": "integer", "title": "B"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
#: 2020-12 keywords the fast check does not take: checked by jsonschema
RICH = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"pos": {"type": "integer", "exclusiveMinimum": 0}},
    "properties": {
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"$ref": "#/$defs/pos"}], "items": False},
        "mode": {"enum": ["a", "b"]},
        "code": {"type": "string", "pattern": "(a+)+$"},
    },
    "dependentRequired": {"pair": ["mode"]},
}


def fake(schema: dict[str, Any]) -> FakeServer:
    tools = [
        {"name": "add", "inputSchema": copy.deepcopy(ADD)},
        {"name": "rich", "inputSchema": copy.deepcopy(schema)},
    ]
    return FakeServer(tools={"add": lambda a: text_result("sum"), "rich": lambda a: text_result("ok")}, tool_defs=tools)


def calls_sent(server: FakeServer) -> int:
    return server.received_methods().count("tools/call")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "args", "reason"),
    [
        ("add", {"a": "two", "b": 40}, "at $.a (type, schema path properties/a/type): 'two' is not of type 'integer'"),
        ("add", {"a": True, "b": 40}, "at $.a (type, schema path properties/a/type): True is not of type 'integer'"),
        ("add", {"a": 2}, "at $ (required, schema path required): 'b' is a required property"),
        ("add", {"a": 2, "b": 40, "c": 1}, "at $ (additionalProperties, schema path additionalProperties)"),
        ("rich", {"pair": ["x", 0], "mode": "a"}, "at $.pair[1] (exclusiveMinimum, schema path "),
        (
            "rich",
            {"pair": ["x", 1]},
            "(dependentRequired, schema path dependentRequired): 'mode' is a dependency of 'pair'",
        ),
        ("rich", {"mode": "c"}, "at $.mode (enum, schema path properties/mode/enum)"),
    ],
)
async def test_arguments_the_server_would_refuse_are_not_sent(kxen_home, fakes, ws, tool, args, reason):
    server = fakes.add("f", fake(RICH))
    async with running(kxen_home, ws, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        with anyio.fail_after(WAIT):
            result = await rt.call_tool(f"s__{tool}", args)
        assert result["isError"] is True, result
        [block] = result["content"]
        assert block["text"].startswith(f"kxen: not sent: the arguments of tool {tool!r} do not match its inputSchema")
        assert reason in block["text"], block["text"]
        assert calls_sent(server) == 0


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("add", {"a": 2, "b": 40}),
        ("add", {"a": 2.0, "b": 40}),  # 2.0 is an integer to JSON Schema
        ("rich", {"pair": ["x", 1], "mode": "a"}),
        ("rich", {"code": "a" * 40 + "!"}),  # a crafted pattern is not evaluated: sent, no hang
        ("rich", {}),
    ],
)
async def test_conforming_arguments_are_sent(kxen_home, fakes, ws, tool, args):
    server = fakes.add("f", fake(RICH))
    async with running(kxen_home, ws, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        with anyio.fail_after(WAIT):
            result = await rt.call_tool(f"s__{tool}", args)
    assert not result.get("isError"), result
    assert calls_sent(server) == 1


@pytest.mark.anyio
async def test_a_refused_call_asks_nobody(kxen_home, fakes, ws):
    server = fakes.add("f", fake(RICH))
    channel = Channel(approved=True)
    async with running(kxen_home, ws, channel, servers={"s": mem("f", defaultToolPolicy="ask")}) as rt:
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("s__add", {"a": "x", "b": 1})
            assert result["isError"] is True
            assert channel.requests == [] and calls_sent(server) == 0
            result = await rt.call_tool("s__add", {"a": 1, "b": 1})
    assert not result.get("isError") and len(channel.requests) == 1 and calls_sent(server) == 1


def test_the_reason_is_bounded():
    result = check_arguments({"name": "add", "inputSchema": ADD}, {"a": "x" * 100_000, "b": 1})
    assert result is not None
    [block] = result["content"]
    assert len(block["text"]) <= MAX_REASON_CHARS and block["text"].endswith("...")


# --- what is not checked: passed as before ------------------------------------------------------------

DEEP: dict[str, Any] = {"type": "object"}
_node = DEEP
for _ in range(40):
    _node["properties"] = {"x": {"type": "object"}}
    _node = _node["properties"]["x"]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"$ref": "https://example.invalid/a.json"}}, "required": ["b"]},
        {"type": "object", "properties": {"a": {"$dynamicRef": "other.json#x"}}, "required": ["b"]},
        {**DEEP, "required": ["b"]},
        {"type": "object", "required": ["b"], "description": "x" * (tool_input.MAX_SCHEMA_CHARS + 1)},
        {"$schema": "https://example.invalid/my-dialect", "type": "object", "required": ["b"]},
        {"type": "object", "required": ["b"], "properties": {"a": {"type": "strin"}}},  # not a valid schema
        {"type": "object", "required": "b"},  # not a valid schema
        ["not", "an", "object"],
    ],
)
def test_a_schema_kxen_cannot_evaluate_safely_is_passed(schema):
    assert check_arguments({"name": "t", "inputSchema": schema}, {"a": 1}) is None


def test_arguments_too_many_to_check_are_passed():
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}, "required": ["b"]}
    many = {"a": list(range(tool_input.MAX_CHECKED_VALUES + 1))}
    assert check_arguments({"name": "t", "inputSchema": schema}, many) is None
    assert check_arguments({"name": "t", "inputSchema": schema}, {"a": [1]}) is not None


def test_a_schema_is_prepared_once_per_distinct_schema(monkeypatch):
    made: list[Any] = []
    real = tool_input._library_validator
    monkeypatch.setattr(tool_input, "_library_validator", lambda s: made.append(s) or real(s))
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}, "description": "once"}
    first = input_check(schema)
    assert first is not None and first is input_check(copy.deepcopy(schema))  # equal schemas: one check
    for i in range(50):  # a new copy each time, as after a catalog refresh
        result = check_arguments({"name": "t", "inputSchema": copy.deepcopy(schema)}, {"n": i % 5})
        assert (result is None) == (i % 5 >= 3), result
    assert len(made) == 1


def test_the_common_shape_is_checked_without_the_library():
    check = input_check(copy.deepcopy(ADD))
    assert check is not None and check.fast is not None
    assert input_check(copy.deepcopy(RICH)).fast is None  # other keywords: the library's


# the fast check must accept exactly what JSON Schema accepts, for every schema of its shape
_TYPE_NAMES = ["string", "integer", "number", "boolean", "null", "array", "object"]
_property = st.one_of(
    st.just({}),
    st.builds(lambda t: {"type": t}, st.sampled_from(_TYPE_NAMES)),
    st.builds(lambda ts: {"type": ts, "title": "x"}, st.lists(st.sampled_from(_TYPE_NAMES), min_size=1, max_size=3)),
)
_names = st.sampled_from(["a", "b", "c", "d"])
_schemas = st.builds(
    lambda props, required, extra: {
        "type": "object",
        "properties": props,
        "required": required,
        **({} if extra is None else {"additionalProperties": extra}),
    },
    st.dictionaries(_names, _property, max_size=4),
    st.lists(_names, max_size=3),
    st.one_of(st.none(), st.booleans()),
)
_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_schemas, st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), _values, max_size=5))
def test_the_fast_check_agrees_with_json_schema(schema, args):
    from jsonschema import Draft202012Validator

    fast = tool_input._fast(schema)
    assert fast is not None
    assert fast(args) == Draft202012Validator(schema).is_valid(args)


# --- the real-peer twin: the official Python SDK server over stdio ----------------------------------


@pytest.mark.anyio
async def test_sdk_peer_arguments_checked_against_its_schema(kxen_home, ws):
    pytest.importorskip("mcp")
    entry = {"command": sys.executable, "args": [str(SDK_SERVER), "stdio"], "defaultToolPolicy": "allow"}
    async with running(kxen_home, ws, servers={"sdk": entry}, allow=["stdio"], wait=60) as rt:
        assert rt.servers["sdk"].state == "ready", rt.servers["sdk"].snapshot()
        with anyio.fail_after(WAIT):
            refused = await rt.call_tool("sdk__add", {"a": "two", "b": 40})
            missing = await rt.call_tool("sdk__add", {"a": 2})
            added = await rt.call_tool("sdk__add", {"a": 2, "b": 40})
    # kxen's own refusal (the SDK's would be a pydantic message): nothing reached the server
    assert refused["isError"] is True
    assert refused["content"][0]["text"].startswith("kxen: not sent: the arguments of tool 'add' do not match")
    assert "at $.a (type, schema path properties/a/type)" in refused["content"][0]["text"]
    assert "'b' is a required property" in missing["content"][0]["text"]
    assert not added.get("isError") and "42" in json.dumps(added), added


def test_a_null_for_an_argument_the_schema_does_not_require_counts_as_left_out():
    """MCP's header mirroring (SEP-2243) treats a null argument as not given, and the conformance
    harness sends one for a boolean it does not require: kxen sends it; a required one stays refused."""
    schema = {
        "type": "object",
        "properties": {"region": {"type": "string"}, "verbose": {"type": "boolean"}, "tags": {"type": "array"}},
        "required": ["region"],
    }
    tool = {"name": "t", "inputSchema": schema}
    assert check_arguments(tool, {"region": "us", "verbose": None}) is None
    assert check_arguments(tool, {"region": "us", "verbose": None, "tags": None}) is None
    refused = check_arguments(tool, {"region": None, "verbose": None})
    assert refused is not None and refused["isError"] and "$.region" in refused["content"][0]["text"]
    assert check_arguments(tool, {"region": "us", "verbose": "yes"}) is not None  # a wrong value still is
    # the library's path too: a schema outside the fast shape
    rich = {**schema, "properties": {**schema["properties"], "region": {"type": "string", "minLength": 2}}}
    assert check_arguments({"name": "r", "inputSchema": rich}, {"region": "us", "verbose": None}) is None
    assert check_arguments({"name": "r", "inputSchema": rich}, {"region": "u", "verbose": None}) is not None

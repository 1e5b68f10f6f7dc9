"""Tools keep what the server sent (schemas exactly, JSON Schema 2020-12 keywords included), and a
result's ``structuredContent`` is checked against the tool's ``outputSchema``: a mismatch is a clear
``isError`` result, never a crash, and the check is bounded for hostile schemas and results."""

from __future__ import annotations

import copy
from typing import Any

import anyio
import pytest
from kxen_testing import FakeServer, mem, running, text_result

from kxen_core.agent.tool_output import MAX_CHECKED_VALUES, bounded_schema, check_result

pytestmark = pytest.mark.anyio

WAIT = 30

#: an input schema using 2020-12 keywords; it must reach the host exactly as sent
SCHEMA_2020 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"pos": {"type": "integer", "exclusiveMinimum": 0}},
    "properties": {
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"$ref": "#/$defs/pos"}], "items": False},
        "mode": {"enum": ["a", "b"], "default": "a"},
        "pattern": {"type": "string", "pattern": "^x"},
    },
    "dependentRequired": {"pair": ["mode"]},
    "unevaluatedProperties": False,
}
OUTPUT = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "tag": {"type": "string", "pattern": "(a+)+$"}},
    "required": ["n"],
}
FULL_TOOL = {
    "name": "full",
    "title": "A full tool",
    "description": "every field",
    "inputSchema": SCHEMA_2020,
    "outputSchema": OUTPUT,
    "annotations": {
        "title": "Full",
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    },
    "execution": {"taskSupport": "optional"},
    "icons": [{"src": "data:image/png;base64,AA==", "mimeType": "image/png"}],
    "_meta": {"vendor.example/x": 1},
}


def output_fake(structured: Any, *, with_content: bool = True) -> FakeServer:
    def call(args: dict[str, Any]) -> dict[str, Any]:
        result = text_result("text form")
        if with_content:
            result["structuredContent"] = args.get("value", structured)
        return result

    # the test sends the content to return as the argument "value": the input schema names it (an
    # argument the schema refuses is not sent: test_tool_input.py)
    tool = copy.deepcopy(FULL_TOOL)
    tool["inputSchema"]["properties"]["value"] = {}
    return FakeServer(tools={"full": call}, tool_defs=[tool])


def kept_fake() -> FakeServer:
    return FakeServer(tools={"full": lambda a: text_result("text form")}, tool_defs=[copy.deepcopy(FULL_TOOL)])


async def test_tools_keep_every_field_and_the_schemas_exactly(kxen_home, fakes, tmp_path):
    fakes.add("f", kept_fake())
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        (tool,) = rt.tools()
    assert tool == {**FULL_TOOL, "server": "s", "qualifiedName": "s__full", "policy": "ask"}


@pytest.mark.parametrize(
    "value, error",
    [
        ({"n": 1}, None),
        ({"n": 1, "tag": "a" * 40 + "!"}, None),  # the crafted pattern is not evaluated: no hang
        ({"n": "one"}, "at $.n (type): 'one' is not of type 'integer'"),
        ({}, "at $ (required): 'n' is a required property"),
        ([1, 2], "at $ (type)"),
    ],
)
async def test_structured_content_is_checked_against_the_output_schema(kxen_home, fakes, tmp_path, value, error):
    fakes.add("f", output_fake(None))
    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("s__full", {"value": value})
    if error is None:
        assert result == {**text_result("text form"), "structuredContent": value}
    else:
        assert result["isError"] is True and "structuredContent" not in result
        (block,) = result["content"]
        assert "kxen: the structuredContent of tool 'full' does not match its outputSchema" in block["text"]
        assert error in block["text"], block["text"]


async def test_a_result_without_structured_content_is_an_error_when_a_schema_is_declared(kxen_home, fakes, tmp_path):
    fakes.add("f", output_fake(None, with_content=False))
    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("s__full", {})
    assert result["isError"] is True and "has no structuredContent" in result["content"][0]["text"]


def test_an_error_result_or_a_tool_without_schema_is_passed_on():
    error = {**text_result("failed", is_error=True), "structuredContent": "whatever"}
    assert check_result({"name": "t", "outputSchema": OUTPUT}, error) is error
    plain = {**text_result("x"), "structuredContent": [1]}
    assert check_result({"name": "t"}, plain) is plain


def test_a_huge_instance_is_passed_on_unchecked_with_a_note():
    notes: list[str] = []
    result = {"content": [], "structuredContent": {"n": "wrong", "items": list(range(MAX_CHECKED_VALUES + 1))}}
    assert check_result({"name": "t", "outputSchema": OUTPUT}, result, notes.append) is result
    assert notes and "not checked" in notes[0]


def test_a_deep_instance_against_a_recursive_schema_is_an_error_not_a_crash():
    schema = {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"}
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    result = check_result({"name": "t", "outputSchema": schema}, {"content": [], "structuredContent": deep})
    assert result["isError"] is True and "nests too deeply" in result["content"][0]["text"]


def test_an_unusable_schema_passes_the_result_on_with_a_note():
    notes: list[str] = []
    result = {"content": [], "structuredContent": {"a": 1}}
    assert (
        check_result({"name": "t", "outputSchema": {"properties": {"a": {"$ref": "#/nowhere"}}}}, result, notes.append)
        is result
    )
    assert notes and "could not be used" in notes[0]


def test_the_bounded_schema_drops_only_what_it_cannot_bound():
    schema = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "pattern": "(a+)+$"},
            "list": {"type": "array", "uniqueItems": True},
        },
        "patternProperties": {"^x": {"type": "string"}},
        "additionalProperties": False,
        "$defs": {"d": {"anyOf": [{"pattern": "x"}, {"const": {"pattern": "data stays"}}]}},
    }
    assert bounded_schema(schema) == {
        "type": "object",
        "properties": {"pattern": {"type": "string"}, "list": {"type": "array"}},
        "$defs": {"d": {"anyOf": [{}, {"const": {"pattern": "data stays"}}]}},
    }

"""The two non-auth parts the conformance client needed from kxen, checked on their own and against
real peers: elicitation answers with the requested schema's defaults
(:func:`kxen_core.asks.apply_schema_defaults`; the harness scenario is
``elicitation-sep1034-client-defaults``), and tool schemas kept exactly as the server sent them
(``json-schema-2020-12-preservation``). The harness runs are in tests/test_conformance.py."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kxen_testing import Answers, running

from kxen_core.asks import apply_schema_defaults

WAIT = 60
STDIO = ("stdio", "memory")
SCHEMA_SERVER = Path(__file__).parent / "conformance" / "schema_server.py"

#: the requestedSchema of the harness's elicitation-sep1034-client-defaults scenario
SEP1034 = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}


def test_defaults_fill_every_field_the_person_left_out() -> None:
    assert apply_schema_defaults(SEP1034, {}) == {
        "name": "John Doe",
        "age": 30,
        "score": 95.5,
        "status": "active",
        "verified": True,
    }
    assert apply_schema_defaults(SEP1034) == apply_schema_defaults(SEP1034, {})


def test_what_the_person_gave_wins_and_nothing_is_changed_in_place() -> None:
    schema, content = copy.deepcopy(SEP1034), {"name": "Ada", "verified": False, "extra": "kept"}
    out = apply_schema_defaults(schema, content)
    assert out == {"name": "Ada", "verified": False, "extra": "kept", "age": 30, "score": 95.5, "status": "active"}
    assert content == {"name": "Ada", "verified": False, "extra": "kept"} and schema == SEP1034


@pytest.mark.parametrize(
    ("prop", "applied"),
    [
        ({"type": "integer", "default": True}, False),  # a boolean is not an integer
        ({"type": "integer", "default": 2.5}, False),
        ({"type": "integer", "default": 30.0}, True),
        ({"type": "integer", "default": float("inf")}, False),
        ({"type": "number", "default": "3"}, False),
        ({"type": "number", "default": 3}, True),
        ({"type": "boolean", "default": 1}, False),
        ({"type": "string", "default": 7}, False),
        ({"type": "string", "enum": ["a", "b"], "default": "c"}, False),
        ({"type": "string", "enum": ["a", "b"], "default": "b"}, True),
        ({"type": "string", "oneOf": [{"const": "x", "title": "X"}], "default": "x"}, True),
        ({"type": "string", "oneOf": [{"const": "x", "title": "X"}], "default": "y"}, False),
        ({"type": "array", "items": {"type": "string", "enum": ["g", "p"]}, "default": ["g"]}, True),
        ({"type": "array", "items": {"type": "string", "enum": ["g", "p"]}, "default": ["g", "z"]}, False),
        ({"type": "array", "items": {"anyOf": [{"const": "f1"}, {"const": "f2"}]}, "default": ["f2"]}, True),
        ({"type": "array", "items": {"type": "string"}, "default": "g"}, False),
        ({"type": "object", "default": {}}, False),  # not a field an elicitation form has
        ({"default": "untyped"}, False),
        ({"type": "string"}, False),  # no default: nothing to add
    ],
)
def test_a_default_is_applied_only_when_it_fits_its_property(prop: dict[str, Any], applied: bool) -> None:
    out = apply_schema_defaults({"type": "object", "properties": {"f": prop}}, {})
    assert out == ({"f": prop["default"]} if applied else {})


@pytest.mark.parametrize(
    "schema",
    [
        {},
        {"properties": None},
        {"properties": ["f"]},
        {"properties": {"f": "string"}},
        {"properties": {1: {"type": "string", "default": "x"}}},
    ],
)
def test_schemas_without_usable_properties_add_nothing(schema: Any) -> None:
    assert apply_schema_defaults(schema, {"a": 1}) == {"a": 1}


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.lists(st.text(max_size=3), max_size=3),
)
_props = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "integer", "number", "boolean", "array", "object", None])},
    optional={"default": _values, "enum": st.lists(_values, max_size=3)},
)


@given(
    properties=st.dictionaries(st.text(max_size=4), _props, max_size=6),
    content=st.dictionaries(st.text(max_size=4), _values, max_size=4),
)
def test_property_content_is_kept_and_only_schema_defaults_are_added(
    properties: dict[str, Any], content: dict[str, Any]
) -> None:
    out = apply_schema_defaults({"type": "object", "properties": properties}, content)
    for key, value in content.items():
        assert out[key] is value
    for key in out.keys() - content.keys():
        assert key in properties and out[key] is properties[key]["default"]


# --- against real peers ---------------------------------------------------------------------


@pytest.mark.peer
@pytest.mark.anyio
async def test_everything_gets_the_schema_defaults_for_what_the_person_left_out(
    kxen_home, tmp_path, everything_js: str
) -> None:
    """server-everything asks for eleven fields, seven with defaults; the host's handler gives only
    the name and the checkbox and lets :func:`apply_schema_defaults` fill in the rest. The server
    checks the answer against its schema and reports what it got."""
    sent: list[dict[str, Any]] = []

    def answer(request: Any) -> dict[str, Any]:
        content = apply_schema_defaults(request.requested_schema, {"name": "Ada Lovelace", "check": True})
        sent.append(content)
        return {"action": "accept", "content": content}

    server = {
        "command": "node",
        "args": [everything_js, "stdio"],
        "defaultToolPolicy": "allow",
        "timeouts": {"requestSeconds": 30},
    }
    async with running(
        kxen_home, tmp_path, Answers(elicitation=answer), servers={"ev": server}, allow=STDIO, wait=WAIT
    ) as rt:
        with anyio.fail_after(WAIT):
            while "trigger-elicitation-request" not in {t["name"] for t in rt.tools("ev")}:
                await anyio.sleep(0.02)  # registered after initialize, for the declared capability
            result = await rt.call_tool("ev__trigger-elicitation-request", {})
    text = json.dumps(result)
    assert not result.get("isError") and "User provided the requested information" in text, result
    assert "Name: Ada Lovelace" in text and "Favorite Integer: 42" in text and "Favorite Number: 3.14" in text, result
    (content,) = sent
    assert content == {
        "name": "Ada Lovelace",
        "check": True,
        "firstLine": "It was a dark and stormy night.",
        "integer": 42,
        "number": 3.14,
        "untitledSingleSelectEnum": "Monica",
        "untitledMultipleSelectEnum": ["Guitar"],
        "titledSingleSelectEnum": "hero-1",
        "titledMultipleSelectEnum": ["fish-1"],
        "legacyTitledEnum": "pet-1",
    }


def wire_tools(argv: list[str]) -> list[dict[str, Any]]:
    """``tools/list`` exactly as the server sends it: initialize, initialized, list over raw stdio
    (bounded: a watchdog kills a silent server, and at most 100 lines are read)."""
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    ) as proc:
        watchdog = threading.Timer(WAIT, proc.kill)
        watchdog.start()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write("".join(json.dumps(m) + "\n" for m in lines))
            proc.stdin.flush()
            for _ in range(100):
                line = proc.stdout.readline()
                if not line:
                    break
                message = json.loads(line)
                if message.get("id") == 2:
                    return message["result"]["tools"]
            raise AssertionError("no tools/list answer")
        finally:
            watchdog.cancel()
            proc.kill()


@pytest.mark.peer
@pytest.mark.anyio
async def test_a_2020_12_schema_is_kept_and_sent_back_exactly_as_the_sdk_server_sent_it(kxen_home, tmp_path) -> None:
    """The official SDK server lists a tool whose input schema uses the 2020-12 vocabulary. What
    ``Runtime.tools`` holds is that schema as it came on the wire, key for key and in the same
    order, and passing it as an argument sends it unchanged (the conformance scenario's round trip)."""
    argv = [sys.executable, str(SCHEMA_SERVER)]
    (wire,) = [t["inputSchema"] for t in wire_tools(argv) if t["name"] == "profile"]
    assert "$anchor" in json.dumps(wire) and "unevaluatedProperties" in wire  # the peer served the rich schema
    # the wire above is the handshake era's answer: kxen speaks that era too, to compare like with like
    # (the SDK server answers tools/list in the stateless era with the schema's keys in another order)
    server = {
        "command": argv[0],
        "args": argv[1:],
        "defaultToolPolicy": "allow",
        "timeouts": {"requestSeconds": 30},
        "protocolEra": "legacy",
    }
    async with running(kxen_home, tmp_path, servers={"sch": server}, allow=STDIO, wait=WAIT) as rt:
        status = {s["name"]: s for s in rt.status()}["sch"]
        assert status["state"] == "ready", status
        held = {t["name"]: t for t in rt.tools("sch")}["profile"]["inputSchema"]
        with anyio.fail_after(WAIT):
            echoed = await rt.call_tool("echo_schema", {"schema": held}, server="sch")
    # same text: the same keys, values and key order at every level
    assert json.dumps(held) == json.dumps(wire)
    assert echoed["content"][0]["text"] == json.dumps(wire)

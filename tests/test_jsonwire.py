"""kxen_core.jsonwire.loads gives what json.loads gives -- the same value, or the same error -- for
random JSON texts and for the inputs where orjson and the standard library part ways."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kxen_core import jsonwire


def _same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN and an int never equal to a float (1 == 1.0 would hide a change)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _outcome(loads: Any, data: Any) -> tuple[str, Any]:
    try:
        return "value", loads(data)
    except RecursionError:
        return "error", ("RecursionError", "")
    except Exception as exc:
        return "error", (type(exc).__name__, str(exc))


def assert_same_as_json(data: Any) -> None:
    want, got = _outcome(json.loads, data), _outcome(jsonwire.loads, data)
    assert want[0] == got[0], (data[:200], want, got)
    if want[0] == "value":
        assert _same(want[1], got[1]), (data[:200], want, got)
    else:
        assert want[1] == got[1], (data[:200], want, got)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_values, ascii_only=st.booleans(), spaced=st.booleans(), as_bytes=st.booleans())
def test_random_json_texts_read_the_same(value, ascii_only, spaced, as_bytes):
    text = json.dumps(value, ensure_ascii=ascii_only, separators=(", ", ": ") if spaced else (",", ":"))
    assert_same_as_json(text.encode("utf-8", "surrogatepass") if as_bytes else text)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64) | st.text(max_size=64))
def test_random_bytes_and_text_read_the_same(data):
    assert_same_as_json(data)


HOSTILE = [
    b"18446744073709551615",  # the largest u64: orjson reads it as an int
    b"18446744073709551616",  # one past it: orjson would give a float
    b"-9223372036854775809",  # one below i64: the same
    b'{"id": 123456789012345678901234567890, "x": 1}',
    b'"a string of digits 1234567890123456789"',  # a false alarm: still the same answer
    b"1e400",
    b"-1e400",
    b"1.7976931348623157e309",
    b"NaN",
    b"-Infinity",
    b"[1, NaN, 2]",
    b'"\\ud800"',
    '"\udc80"',
    b"\xef\xbb\xbf{}",  # a byte-order mark
    '{"a": 1}'.encode("utf-16"),
    '{"a": 1}'.encode("utf-32-le"),
    b"\xff\xfe",
    b'{"a": "\xc3"}',  # invalid UTF-8
    b'{"a": 1, "a": 2}',  # duplicate keys: the last one
    b"[" * 1100 + b"]" * 1100,  # past orjson's depth
    b"[" * 100_000,  # past the interpreter's
    b"",
    b" ",
    b"[1, 2,]",
    b'{"a": 1} x',
    b'"tab\there"',  # a raw control character in a string
    b"-0",
    b"0.1e-400",
    b'"\\u0000"',
    "é" * 10,
    '"é"',
    b"  \n\t{}\r\n",
]


@pytest.mark.parametrize("data", HOSTILE, ids=lambda d: repr(d)[:40])
def test_where_the_two_libraries_part_ways_the_answer_is_jsons(data):
    assert_same_as_json(data)


def test_a_big_integer_stays_an_integer():
    assert jsonwire.loads(b'{"id": 18446744073709551616}') == {"id": 2**64}
    assert type(jsonwire.loads(b"-9223372036854775809")) is int


def test_importing_kxen_does_not_load_orjson():
    import subprocess

    code = "import sys, kxen_core.jsonwire, kxen_core.runtime.workspace; print('orjson' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_a_plain_reply_is_read_by_orjson(monkeypatch):
    def refuse(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("json.loads was asked")

    monkeypatch.setattr(jsonwire.json, "loads", refuse)
    reply = b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}'
    assert jsonwire.loads(reply) == json.JSONDecoder().decode(reply.decode())
    assert jsonwire.loads(reply.decode()) == jsonwire.loads(reply)
    with pytest.raises(AssertionError, match="json.loads was asked"):
        jsonwire.loads(b"NaN")  # what orjson refuses goes to json.loads


# --- dumps: what kxen sends ------------------------------------------------------------------------

_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _stdlib(message: Any) -> bytes:
    """The stdio transport's own encoding (its fallback), newline included."""
    try:
        return (_ENCODE(message) + "\n").encode()
    except UnicodeEncodeError:
        return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    return False


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_values)
def test_random_values_are_written_as_json_writes_them(value):
    got, want = jsonwire.dumps(value, _stdlib, newline=True), _stdlib(value)
    assert got.endswith(b"\n")
    assert _same(json.loads(got), json.loads(want))
    if not _has_float(value):  # a float may take another of its shortest forms (1.5e-7, 1.5e-07)
        assert got == want


class Text(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {"big": 2**64},
        {"small": -(2**63) - 1},
        {1: "an int key"},
        {None: "a None key"},
        {"nan": float("nan"), "inf": float("inf")},
        {"lone": "\ud800"},
        {"sub": Text("a str subclass")},
        {"none": None},
        {"text": "nullable, but no null"},
        {"ctl": '\x00\x1f\x7f\u2028"\\\n'},
    ],
    ids=lambda v: next(iter(v)) if isinstance(next(iter(v)), str) else repr(next(iter(v))),
)
def test_where_orjson_would_write_otherwise_json_writes(value):
    assert jsonwire.dumps(value, _stdlib, newline=True) == _stdlib(value)


def test_what_json_refuses_is_refused_with_its_error():
    for value in ({"b": b"bytes"}, {"s": {1, 2}}, {"o": object()}):
        with pytest.raises(TypeError) as want:
            _stdlib(value)
        with pytest.raises(TypeError) as got:
            jsonwire.dumps(value, _stdlib)
        assert str(got.value) == str(want.value)


def test_the_two_objects_orjson_writes_and_json_refuses_are_as_documented():
    import enum
    import uuid

    class Colour(enum.Enum):
        RED = "red"

    assert jsonwire.dumps({"id": uuid.UUID(int=5)}, _stdlib) == b'{"id":"00000000-0000-0000-0000-000000000005"}'
    assert jsonwire.dumps({"c": Colour.RED}, _stdlib) == b'{"c":"red"}'


def test_a_plain_request_is_written_by_orjson():
    def refuse(_message: Any) -> bytes:
        raise AssertionError("the fallback was asked")

    request = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"a": 1}}}
    assert jsonwire.dumps(request, refuse, newline=True) == _stdlib(request)
    assert jsonwire.dumps(request, refuse) == _stdlib(request)[:-1]

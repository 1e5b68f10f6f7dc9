"""The one output bound and binary descriptors (kxen_core.agent.output), on results built here."""

from __future__ import annotations

import base64
import gc
import json
import math
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kxen_core.agent.output import (
    DEFAULT_OUTPUT_CHARS,
    Budget,
    base64_size,
    error_output,
    json_pieces,
    render_json,
    render_prompt,
    render_read,
    render_tool_result,
)
from kxen_core.errors import PolicyDenied

MiB = 1024 * 1024


def b64(size: int, fill: bytes = b"\x89") -> str:
    return base64.b64encode(fill * size).decode()


def text_block(text: str) -> dict:
    return {"type": "text", "text": text}


# --- the bound --------------------------------------------------------------------------------


def test_a_small_result_is_its_text_unchanged():
    out = render_tool_result({"content": [text_block("hello")]}, server="s", tool="t")
    assert (out.text, out.truncated, out.original_chars, out.is_error) == ("hello", False, 5, False)
    assert out.as_result() == {"content": [{"type": "text", "text": "hello"}], "isError": False}


def test_blocks_are_joined_by_newlines_and_is_error_is_kept():
    out = render_tool_result({"content": [text_block("a"), text_block("b")], "isError": True}, server="s", tool="t")
    assert (out.text, out.is_error) == ("a\nb", True)


def test_exactly_the_limit_is_not_cut_and_one_more_is():
    exact = render_tool_result({"content": [text_block("x" * 100)]}, server="s", tool="t", limit=100)
    assert (exact.text, exact.truncated) == ("x" * 100, False)
    over = render_tool_result({"content": [text_block("x" * 101)]}, server="s", tool="t", limit=100)
    assert over.truncated and len(over.text) == 100 and over.original_chars == 101
    assert over.text.endswith("more than the limit of 100]") and "101 characters" in over.text


def test_a_5_mib_result_is_cut_to_the_bound_with_a_marker_naming_its_length():
    text = "y" * (5 * MiB)
    out = render_tool_result({"content": [text_block(text)]}, server="s", tool="t")
    assert len(out.text) == DEFAULT_OUTPUT_CHARS
    assert out.text.startswith("y" * 1000)
    assert f"{5 * MiB} characters" in out.text.splitlines()[-1] and out.original_chars == 5 * MiB


def test_200_blocks_of_5000_characters_count_together():
    blocks = [text_block(chr(ord("a") + i % 26) * 5000) for i in range(200)]
    out = render_tool_result({"content": blocks}, server="s", tool="t")
    assert len(out.text) <= DEFAULT_OUTPUT_CHARS and out.truncated
    assert out.original_chars == 200 * 5000 + 199  # the newlines between blocks count too


def test_structured_content_counts_in_the_bound():
    big = {"rows": ["z" * 1000 for _ in range(200)]}
    out = render_tool_result({"content": [], "structuredContent": big}, server="s", tool="t", limit=10_000)
    assert len(out.text) == 10_000 and out.truncated
    assert out.original_chars == len(json.dumps(big, ensure_ascii=False))


def test_structured_content_is_shown_when_no_text_carries_the_result():
    only = render_tool_result({"content": [], "structuredContent": {"sum": 3}}, server="s", tool="t")
    assert json.loads(only.text) == {"sum": 3}
    both = render_tool_result(
        {"content": [text_block('{"sum": 3}')], "structuredContent": {"sum": 3}}, server="s", tool="t"
    )
    assert both.text == '{"sum": 3}'  # not twice


def test_a_huge_structured_content_string_is_measured_without_encoding_it_whole():
    value = {"s": "\x01" * (2 * MiB)}  # each character escapes to six
    out = render_tool_result({"structuredContent": value}, server="s", tool="t", limit=10_000)
    assert out.original_chars == len(json.dumps(value, ensure_ascii=False)) and len(out.text) == 10_000


def test_errors_are_bounded_too():
    out = error_output(PolicyDenied("x" * 100_000), limit=10_000)
    assert out.is_error and len(out.text) == 10_000 and out.text.startswith("PolicyDenied: xxx")


def test_lone_surrogates_never_reach_the_agent():
    out = render_tool_result({"content": [text_block("a\ud800b")]}, server="s", tool="t")
    assert out.text == "a\ufffdb"
    out.text.encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.text(max_size=300), max_size=30),
    limit=st.integers(min_value=100, max_value=2000),
)
def test_the_budget_never_passes_the_limit_and_counts_the_whole(pieces, limit):
    budget = Budget(limit)
    for piece in pieces:
        budget.add(piece)
    text, cut = budget.finish()
    whole = "".join(pieces)
    assert len(text) <= limit
    assert budget.total == len(whole) and cut == (len(whole) > limit)
    if not cut:
        assert text == whole.translate({c: "\ufffd" for c in range(0xD800, 0xE000)})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=30,
)


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_json_pieces_write_what_json_dumps_writes(value):
    assert "".join(json_pieces(value)) == json.dumps(_finite(value), ensure_ascii=False)


def test_json_pieces_chunk_a_long_string_and_stay_equal():
    value = {"k": 'é"\\\n' * 100_000}
    pieces = list(json_pieces(value))
    assert max(len(p) for p in pieces) < 300_000
    assert "".join(pieces) == json.dumps(value, ensure_ascii=False)


# --- memory -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape",
    ["one text block", "structured content", "many blocks", "embedded text resource"],
)
def test_a_20_mib_result_is_rendered_in_bounded_memory(shape):
    size = 20 * MiB
    if shape == "one text block":
        result = {"content": [text_block("q" * size)]}
    elif shape == "structured content":
        result = {"content": [], "structuredContent": {"data": "q" * size}}
    elif shape == "many blocks":
        result = {"content": [text_block("q" * 5000) for _ in range(size // 5000)]}
    else:
        result = {"content": [{"type": "resource", "resource": {"uri": "u" * 1000, "text": "q" * size}}]}
    gc.collect()
    tracemalloc.start()
    try:
        out = render_tool_result(result, server="s", tool="t")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(out.text) == DEFAULT_OUTPUT_CHARS and out.original_chars >= size
    # the brief's bound is "less than 3x the input"; the renderer stays far below even one copy
    assert peak < 3 * size
    assert peak < 4 * MiB, f"peak {peak} bytes while rendering a {size}-character result"


# --- binary contents ----------------------------------------------------------------------------


def test_image_audio_and_embedded_blobs_are_descriptors_never_base64():
    image, audio, blob = b64(2 * MiB), b64(MiB, b"\x00"), b64(3 * MiB, b"\xff")
    result = {
        "content": [
            text_block("here:"),
            {"type": "image", "data": image, "mimeType": "image/png"},
            {"type": "audio", "data": audio, "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///x.bin", "blob": blob, "mimeType": "text/plain"}},
        ]
    }
    out = render_tool_result(result, server="ev", tool="media")
    assert image[:200] not in out.text and audio[:200] not in out.text and blob[:200] not in out.text
    assert len(out.text) < 2000
    described = [json.loads(line[len("[binary content not shown: ") : -1]) for line in out.text.splitlines()[1:]]
    assert described == [
        {"server": "ev", "tool": "media", "content": 1, "type": "image", "mimeType": "image/png", "bytes": 2 * MiB},
        {"server": "ev", "tool": "media", "content": 2, "type": "audio", "mimeType": "audio/wav", "bytes": MiB},
        {
            "server": "ev",
            "tool": "media",
            "uri": "file:///x.bin",
            "content": 3,
            "type": "blob",
            "mimeType": "text/plain",
            "bytes": 3 * MiB,
        },
    ]
    # the host gets the bytes
    assert [out.binary_data(i)[:1] for i in range(3)] == [b"\x89", b"\x00", b"\xff"]
    assert len(out.binary_data(out.binary[2])) == 3 * MiB


@pytest.mark.parametrize("n", range(0, 12))
def test_base64_size_is_the_decoded_length(n):
    assert base64_size(base64.b64encode(b"a" * n).decode()) == n


def test_base64_size_of_no_string_is_none():
    assert base64_size(None) is None and base64_size(12) is None


def test_a_bad_base64_blob_is_an_error_for_the_host_not_a_crash():
    out = render_tool_result(
        {"content": [{"type": "image", "data": "%%%", "mimeType": "image/png"}]}, server="s", tool="t"
    )
    with pytest.raises(ValueError, match="not valid base64"):
        out.binary_data(0)


def test_unknown_block_types_are_named_not_shown():
    out = render_tool_result({"content": [{"type": "video", "data": "A" * 10_000}]}, server="s", tool="t")
    assert out.text == "[content 0: a block 'video' is not shown]"


def test_a_resource_link_is_a_line_of_json():
    link = {"type": "resource_link", "uri": "file:///a", "name": "a", "mimeType": "text/plain", "_meta": {"x": 1}}
    out = render_tool_result({"content": [link]}, server="s", tool="t")
    assert out.text == '[resource link: {"uri": "file:///a", "name": "a", "mimeType": "text/plain"}]'


def test_malformed_results_are_named_errors():
    assert render_tool_result([1, 2], server="s", tool="t").is_error
    assert render_tool_result({"content": "no list"}, server="s", tool="t").text == ""
    assert render_read({"contents": 3}, server="s", uri="u").is_error


# --- reads and prompts ----------------------------------------------------------------------------


def test_a_text_read_comes_back_as_its_text():
    out = render_read(
        {"contents": [{"uri": "file:///a", "text": "body", "mimeType": "text/plain"}]}, server="s", uri="file:///a"
    )
    assert out.text == "body" and not out.binary


def test_a_blob_read_is_a_descriptor_whatever_its_mime_type():
    blob = b64(1000)
    result = {
        "contents": [
            {"uri": "file:///a", "text": "first", "mimeType": "text/markdown"},
            {"uri": "file:///b", "blob": blob, "mimeType": "text/plain"},
        ]
    }
    out = render_read(result, server="s", uri="file:///a")
    lines = out.text.splitlines()
    assert lines[:2] == ["[resource file:///a (text/markdown)]", "first"]
    assert json.loads(lines[2][len("[binary content not shown: ") : -1]) == {
        "server": "s",
        "uri": "file:///b",
        "content": 1,
        "type": "blob",
        "mimeType": "text/plain",
        "bytes": 1000,
    }
    assert blob[:100] not in out.text and out.binary_data(0) == b"\x89" * 1000


def test_a_prompt_result_is_json_with_binary_as_descriptors():
    image = b64(5000)
    result = {
        "description": "d",
        "messages": [
            {"role": "user", "content": text_block("hi")},
            {"role": "user", "content": {"type": "image", "data": image, "mimeType": "image/png"}},
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "file:///b", "blob": image}}},
        ],
    }
    out = render_prompt(result, server="s", name="p")
    data = json.loads(out.text)
    assert data["description"] == "d" and data["messages"][0] == {"role": "user", "content": text_block("hi")}
    assert data["messages"][1]["content"] == {
        "type": "image",
        "binary": {
            "server": "s",
            "message": 1,
            "type": "image",
            "mimeType": "image/png",
            "bytes": 5000,
            "prompt": "p",
            "shown": False,
        },
    }
    assert data["messages"][2]["content"]["binary"]["uri"] == "file:///b"
    assert image[:100] not in out.text
    assert out.binary_data(1) == b"\x89" * 5000


def test_a_listing_is_bounded_json():
    out = render_json({"items": ["x" * 1000] * 100}, limit=10_000)
    assert len(out.text) == 10_000 and out.truncated

"""A remote catalog item nested too deeply to measure is refused alone (a problem for that tool),
never a RecursionError that fails the whole listing."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st


def test_a_remote_tool_schema_nested_too_deeply_to_measure_is_refused_alone():
    from kxen_core.config.models import RemoteCatalogLimits
    from kxen_core.defaults import tool_problem as remote_tool_problem

    schema: dict[str, Any] = {"type": "object"}
    for _ in range(100_000):  # built without recursion; measuring it recurses
        schema = {"type": "object", "properties": {"x": schema}}
    assert remote_tool_problem({"name": "deep", "inputSchema": schema}, RemoteCatalogLimits()) == (
        "inputSchema nests too deeply to measure"
    )


def _walked(schema: Any, max_depth: int) -> str | None:
    """The depth and reference rules by a plain walk of every node (what the text test shortcuts)."""
    stack = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            return f"s nests deeper than {max_depth}"
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("$ref", "$dynamicRef") and not (isinstance(value, str) and value.startswith("#")):
                    return f"s has a non-local {key} (only '#...' references are allowed)"
                stack.append((value, depth + 1))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return None


_keys = st.sampled_from(["type", "$ref", "$dynamicRef", "properties", "items", "x", "{[", '"$ref"'])
_leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.sampled_from(["#/a", "http://x/y", "{", "[[", "$ref", ""]))
_schemas = st.recursive(_leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4), max_leaves=30)


@settings(max_examples=500, deadline=None)
@given(schema=st.dictionaries(_keys, _schemas, max_size=4), depth=st.integers(min_value=2, max_value=8))
def test_the_text_shortcut_decides_like_the_walk(schema, depth):
    """Whatever the schema holds (brackets and "$ref" inside strings included), the shortcut on its
    JSON text never lets through what the walk of every node refuses, and refuses nothing more."""
    from kxen_core.config.models import RemoteCatalogLimits
    from kxen_core.defaults import schema_problem

    limits = RemoteCatalogLimits(max_schema_depth=depth, max_schema_bytes=16 * 1024 * 1024)
    assert schema_problem("s", schema, limits) == _walked(schema, depth)

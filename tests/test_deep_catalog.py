"""A remote catalog item nested too deeply to measure is refused alone (a problem for that tool),
never a RecursionError that fails the whole listing."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st


def test_a_remote_tool_schema_nested_too_deeply_to_measure_is_refused_alone():
    from kxen_core.config.models import RemoteCatalogLimits
    from kxen_core.policy.defaults import tool_problem as remote_tool_problem

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
_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(), st.sampled_from(["#/a", "http://x/y", "{", "[[", "$ref", ""])
)
_schemas = st.recursive(
    _leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4), max_leaves=30
)


@settings(max_examples=500, deadline=None)
@given(schema=st.dictionaries(_keys, _schemas, max_size=4), depth=st.integers(min_value=2, max_value=8))
def test_the_text_shortcut_decides_like_the_walk(schema, depth):
    """Whatever the schema holds (brackets and "$ref" inside strings included), the shortcut on its
    JSON text never lets through what the walk of every node refuses, and refuses nothing more."""
    from kxen_core.config.models import RemoteCatalogLimits
    from kxen_core.policy.defaults import schema_problem

    limits = RemoteCatalogLimits(max_schema_depth=depth, max_schema_bytes=16 * 1024 * 1024)
    assert schema_problem("s", schema, limits) == _walked(schema, depth)


# --- the page judge's plain-tool loop decides like tool_problem on every item --------------------

_valid_names = st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True)
_names = st.one_of(
    _valid_names,
    st.one_of(
        st.sampled_from(["echo", "tool_1", "a.b-c", "", "has space", "x" * 129, "x" * 128, "naïve"]),
        st.text(max_size=12),
        st.integers(),
        st.none(),
    ),
)
_descs = st.one_of(st.none(), st.text(max_size=40), st.integers(), st.lists(st.text(max_size=3), max_size=2))
_small = st.recursive(
    _leaves, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(_keys, inner, max_size=2), max_leaves=4
)
_object_schemas = st.builds(lambda extra: {"type": "object", **extra}, st.dictionaries(_keys, _small, max_size=3))
_input_schemas = st.one_of(
    _object_schemas,
    _object_schemas,
    st.builds(lambda extra: {"type": "object", **extra}, st.dictionaries(_keys, _schemas, max_size=4)),
    _schemas,
    st.dictionaries(_keys, _schemas, max_size=3),
)
_extras = st.dictionaries(
    st.sampled_from(["title", "outputSchema", "annotations", "execution", "_meta", "icons", "other"]),
    st.one_of(_schemas, _object_schemas, st.text(max_size=40)),
    max_size=2,
)


@st.composite
def _tools(draw: st.DrawFn) -> dict[str, Any]:
    item: dict[str, Any] = {"name": draw(_names)}
    if draw(st.booleans()):
        item["description"] = draw(_descs)
    if draw(st.integers(0, 5)):  # mostly present
        item["inputSchema"] = draw(_input_schemas)
    if draw(st.integers(0, 3)) == 0:
        item.update(draw(_extras))
    if draw(st.integers(0, 7)) == 0:
        item.pop("name")
    return item


_plain_tools = st.builds(
    lambda name, desc, schema: {"name": name, "description": desc, "inputSchema": schema},
    _valid_names,
    st.one_of(st.none(), st.text(max_size=40)),
    _object_schemas,
)


@settings(max_examples=500, deadline=None)
@given(
    items=st.lists(st.one_of(_tools(), _plain_tools), max_size=8),
    desc=st.integers(min_value=0, max_value=30),
    size=st.integers(min_value=64, max_value=400),
    depth=st.integers(min_value=2, max_value=8),
)
def test_the_plain_tool_loop_decides_like_tool_problem(items, desc, size, depth):
    """``tool_verdicts`` (the page judge) rejects exactly the items ``tool_problem`` finds a problem
    with, with its message, whatever they hold: valid and invalid names, descriptions over the
    bound, schemas too large, too deep, with references, not objects, extra fields."""
    from kxen_core.config.models import RemoteCatalogLimits
    from kxen_core.policy.defaults import tool_problem, tool_verdicts
    from kxen_core.protocol.catalog import Verdict

    limits = RemoteCatalogLimits(max_description_chars=desc, max_schema_bytes=size, max_schema_depth=depth)
    expected = [Verdict.reject(i, p) for i, item in enumerate(items) if (p := tool_problem(item, limits))]
    assert tool_verdicts(items, limits) == expected


def test_the_plain_tool_loop_sees_both_kinds_of_items():
    """The property above is not vacuous: the loop passes plain tools itself and sends the rest on."""
    from kxen_core.config.models import RemoteCatalogLimits
    from kxen_core.policy.defaults import tool_verdicts

    limits = RemoteCatalogLimits(max_description_chars=10, max_schema_bytes=64, max_schema_depth=3)
    plain = {"name": "t", "description": "short", "inputSchema": {"type": "object"}}
    deep = {"name": "t", "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}
    long = {**plain, "description": "x" * 11}
    big = {"name": "t", "inputSchema": {"type": "object", "enum": ["y" * 60]}}
    ref = {"name": "t", "inputSchema": {"type": "object", "$ref": "http://elsewhere/s"}}
    verdicts = tool_verdicts([plain, deep, long, big, ref], limits)
    assert [(v.index, v.reason) for v in verdicts] == [
        (1, "inputSchema nests deeper than 3"),
        (2, "description is longer than 10 characters"),
        (3, "inputSchema is larger than 64 bytes"),
        (4, "inputSchema has a non-local $ref (only '#...' references are allowed)"),
    ]

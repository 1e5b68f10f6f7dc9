"""A remote catalog item nested too deeply to measure is refused alone (a problem for that tool),
never a RecursionError that fails the whole listing."""

from __future__ import annotations

from typing import Any


def test_a_remote_tool_schema_nested_too_deeply_to_measure_is_refused_alone():
    from kxen_core.config.models import RemoteCatalogLimits
    from kxen_core.defaults import tool_problem as remote_tool_problem

    schema: dict[str, Any] = {"type": "object"}
    for _ in range(100_000):  # built without recursion; measuring it recurses
        schema = {"type": "object", "properties": {"x": schema}}
    assert remote_tool_problem({"name": "deep", "inputSchema": schema}, RemoteCatalogLimits()) == (
        "inputSchema nests too deeply to measure"
    )

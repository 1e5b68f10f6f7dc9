"""What the conformance harness's 2026-07-28 scenarios (the stateless era) ask of the client, beyond
starting and listing (:func:`scenarios.run_scenario` does it).

Each scenario names the tools to call (with their arguments) and, for the header scenario, a
resource to read and a prompt to get, so every ``Mcp-Name`` check is exercised. ``http-custom-headers``
hands its calls over in ``MCP_CONFORMANCE_CONTEXT`` (``toolCalls``).
"""

from __future__ import annotations

import json
from typing import Any

from kxen_core import Runtime

#: tools/call requests per scenario: (tool, arguments)
CALLS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    # the MRTR flow: state echoed, no state omitted, an unrelated call in between, no resultType
    "sep-2322-client-request-state": [
        ("test_mrtr_echo_state", {}),
        ("test_mrtr_unrelated", {}),
        ("test_mrtr_no_state", {}),
        ("test_mrtr_no_result_type", {}),
    ],
    "http-standard-headers": [("test_headers", {}), ("my-hyphenated-tool", {})],
    "http-invalid-tool-headers": [("valid_tool", {"region": "us-west1"})],
}


def context_calls(context: str | None) -> list[tuple[str, dict[str, Any]]]:
    """The ``toolCalls`` the harness passes in ``MCP_CONFORMANCE_CONTEXT`` (none when absent)."""
    try:
        data = json.loads(context) if context else {}
    except ValueError:
        return []
    calls = data.get("toolCalls") if isinstance(data, dict) else None
    if not isinstance(calls, list):
        return []
    return [
        (c["name"], dict(c.get("arguments") or {}))
        for c in calls
        if isinstance(c, dict) and isinstance(c.get("name"), str)
    ]


def calls_for(scenario: str, context: str | None) -> list[tuple[str, dict[str, Any]]]:
    """The tools/call requests of ``scenario``: its own, then those the context hands over."""
    return list(CALLS.get(scenario, [])) + context_calls(context)


async def extras(rt: Runtime, server: str, scenario: str) -> list[str]:
    """Read every listed resource and get every listed prompt (the header scenario checks
    ``Mcp-Name`` on both); returns what failed."""
    failed: list[str] = []
    if scenario != "http-standard-headers":
        return failed
    for resource in rt.resources(server).get("resources", []):
        try:
            await rt.read_resource(server, resource["uri"])
        except Exception as exc:
            failed.append(f"read {resource['uri']}: {exc}")
    for prompt in rt.prompts(server):
        try:
            await rt.get_prompt(server, prompt["name"])
        except Exception as exc:
            failed.append(f"prompt {prompt['name']}: {exc}")
    return failed

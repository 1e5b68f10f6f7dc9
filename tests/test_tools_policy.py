"""Each tool in ``Runtime.tools()`` carries its ``policy``: what a call with nothing else voting
would be (``allow`` or ``ask``), the same as ``Runtime.tool_policy`` counts with every vote (the
core's plugins only here), for configs, roles, ``allowReadOnly`` and unaccepted definitions.
Fakes for the cases; server-everything (stdio) for the real twin."""

from __future__ import annotations

import shutil
from typing import Any

import anyio
import pytest
from kxen_testing import mem, running, text_result

from kxen_core import Runtime
from kxen_core.plugins import make_plugin_manager

pytestmark = pytest.mark.anyio

DEFS = [
    {"name": "read", "description": "r", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "write", "description": "w", "inputSchema": {"type": "object"}},
    {"name": "rm", "description": "rm", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": False}},
]
CASES = {
    "default ask": ({}, None, {"read": "ask", "write": "ask", "rm": "ask"}),
    "default allow": ({"defaultToolPolicy": "allow"}, None, {"read": "allow", "write": "allow", "rm": "allow"}),
    "per tool": ({"toolPolicies": {"write": "allow", "rm": "deny"}}, None, {"read": "ask", "write": "allow"}),
    "read-only": ({"allowReadOnly": True, "toolPolicies": {"rm": "ask"}}, None,
                  {"read": "allow", "write": "ask", "rm": "ask"}),
    "a role": ({"defaultToolPolicy": "allow"}, "reader", {"read": "allow", "write": "ask"}),
}  # fmt: skip


async def same_as_the_votes(rt: Any, server: str) -> dict[str, str]:
    shown = {t["name"]: t["policy"] for t in rt.tools(server)}
    for tool, policy in shown.items():
        assert (await rt.tool_policy(server, tool))[0] == policy, tool
    return shown


@pytest.mark.parametrize("case", list(CASES))
async def test_the_listed_policy_is_what_the_votes_decide(kxen_home, fakes, tmp_path, case):
    entry, role, want = CASES[case]
    fakes.add("f", tools={d["name"]: (lambda a: text_result("ok")) for d in DEFS}, tool_defs=DEFS)
    settings = '[roles.reader]\nallow = ["s__read"]\nask = ["s__write"]\ndeny = ["s__rm"]\n'
    kxen_home.write_settings(settings)
    async with running(kxen_home, tmp_path, servers={"s": mem("f", **entry)}, role=role) as rt:
        assert await same_as_the_votes(rt, "s") == want


async def test_a_changed_definition_on_a_warn_server_is_listed_as_ask(kxen_home, fakes, tmp_path):
    fake = fakes.add("f", tools={"read": lambda a: text_result("ok")}, tool_defs=DEFS[:1])
    servers = {"s": mem("f", defaultToolPolicy="allow")}
    async with running(kxen_home, tmp_path, servers=servers):
        pass
    fake.tool_defs = [{**DEFS[0], "description": "read, and more"}]
    async with running(kxen_home, tmp_path, servers=servers) as rt:
        assert await same_as_the_votes(rt, "s") == {"read": "ask"}
        await rt.accept_pin("s", "read")
        assert await same_as_the_votes(rt, "s") == {"read": "allow"}


async def test_server_everything_lists_its_policies(kxen_home, ws, everything_js):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    entry = {"command": node, "args": [everything_js, "stdio"], "allowReadOnly": True,
             "toolPolicies": {"get-sum": "allow", "get-env": "ask"}}  # fmt: skip
    kxen_home.write_servers({"ev": entry})
    async with Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"])) as rt:
        with anyio.fail_after(60):
            assert await rt.wait_ready()
        shown = await same_as_the_votes(rt, "ev")
    assert shown["echo"] == "allow" and shown["get-sum"] == "allow"  # read-only, and allowed by name
    assert shown["get-env"] == "ask" and shown["toggle-simulated-logging"] == "ask"

"""Model-facing names (``<server>__<tool>``) are injective: one name never stands for two tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kxen_core.agent_tools import qualified_name, split_qualified
from kxen_core.config import check_server_key, load_config
from kxen_testing import mem, running, text_result

pytestmark = pytest.mark.anyio

#: every allowed server name (the rule itself decides; the alphabet is the legal one, '_' weighted)
servers = st.text(alphabet="_-aZ09_", min_size=1, max_size=32).filter(lambda s: check_server_key(s) is None)
#: any non-empty tool name a server may list, separators and underscores included
_pieces = st.sampled_from(["_", "__", "-", "a", "Z", "0", "é", "\x1b"])
tools = st.lists(_pieces, min_size=1, max_size=12).map("".join) | st.text(min_size=1, max_size=20)


@settings(max_examples=400, deadline=None)
@given(server=servers, tool=tools)
def test_split_inverts_qualified_name_for_every_allowed_pair(server, tool):
    assert split_qualified(qualified_name(server, tool)) == (server, tool)


@settings(max_examples=400, deadline=None)
@given(a=st.tuples(servers, tools), b=st.tuples(servers, tools))
def test_two_different_pairs_never_give_one_name(a, b):
    if a != b:
        assert qualified_name(*a) != qualified_name(*b)


@pytest.mark.parametrize("server", ["a", "a-", "_a", "-", "a_b", "x" * 32])
@pytest.mark.parametrize("tool", ["x", "_x", "__x", "x__", "_", "__"])
def test_the_ambiguous_neighbours(server, tool):
    assert check_server_key(server) is None
    assert split_qualified(qualified_name(server, tool)) == (server, tool)


@pytest.mark.parametrize("name", ["a_", "_", "a-_", "ab_"])
@pytest.mark.parametrize("scope", ["user", "project"])
def test_a_server_name_ending_in_underscore_is_a_config_error_with_its_path(kxen_home, tmp_path: Path, name, scope):
    ws = tmp_path / "ws"
    (ws / ".kxen").mkdir(parents=True)
    if scope == "user":
        kxen_home.write_servers({name: {"command": "x"}})
        with pytest.raises(Exception) as info:
            load_config(kxen_home.path, ws)
        problems = info.value.problems  # type: ignore[attr-defined]
    else:
        (ws / ".kxen" / "mcp.json").write_text(json.dumps({"mcpServers": {name: {"command": "x"}}}))
        problems = list(load_config(kxen_home.path, ws).project_problems)
    assert len(problems) == 1
    assert f": mcpServers.{name}: " in problems[0] and "must not end with '_'" in problems[0]


async def test_the_call_goes_to_the_server_the_name_means(kxen_home, fakes, tmp_path):
    # 'a' with tool '_x' and 'a_' with tool 'x' were both a___x; 'a_' is no longer a server name
    fakes.add("one", tools={"_x": lambda args: text_result("a/_x")})
    fakes.add("two", tools={"x": lambda args: text_result("b/x")})
    servers = {"a": mem("one", defaultToolPolicy="allow"), "a-": mem("two", defaultToolPolicy="allow")}
    async with running(kxen_home, tmp_path, servers=servers) as rt:
        names = [t["qualifiedName"] for t in rt.tools()]
        assert sorted(names) == ["a-__x", "a___x"] and len(set(names)) == len(names)
        assert await rt.call_tool("a___x", {}) == text_result("a/_x")
        assert await rt.call_tool("a-__x", {}) == text_result("b/x")

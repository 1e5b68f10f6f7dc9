"""Model-facing names (``<server>__<tool>``) are injective: one name never stands for two tools."""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kxen_testing import mem, running, text_result

from kxen_core.agent import tool_names
from kxen_core.agent.qualified import qualified_name, split_qualified
from kxen_core.config import check_server_key, load_config

pytestmark = pytest.mark.anyio

#: every allowed server name (the rule itself decides; the alphabet is the legal one, '_' weighted)
servers = st.text(alphabet="_-aZ09_", min_size=1, max_size=32).filter(lambda s: check_server_key(s) is None)
#: any non-empty tool name a server may list, separators and underscores included
_pieces = st.sampled_from(["_", "__", "-", "a", "Z", "0", "é", "\x1b"])
tools = st.lists(_pieces, min_size=1, max_size=12).map("".join) | st.text(min_size=1, max_size=20)


#: tool names that are provider-safe as they are (and never end like a shortened name)
safe_tools = st.text(alphabet="_-aZ09", min_size=1, max_size=30).filter(lambda t: not tool_names._ends_shortened(t))


@settings(max_examples=400, deadline=None)
@given(server=servers, tool=safe_tools)
def test_a_safe_name_is_kept_and_split_inverts_it(server, tool):
    assert qualified_name(server, tool) == f"{server}__{tool}"
    assert split_qualified(qualified_name(server, tool)) == (server, tool)


@settings(max_examples=600, deadline=None)
@given(server=servers, tool=tools | st.text(min_size=1, max_size=200))
def test_every_model_facing_name_is_provider_safe_and_keeps_its_server(server, tool):
    name = qualified_name(server, tool)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name), name
    assert tool_names.server_of(name) == server
    assert qualified_name(server, tool) == name  # a function of the pair alone


@settings(max_examples=600, deadline=None)
@given(a=st.tuples(servers, tools), b=st.tuples(servers, tools))
def test_two_different_pairs_never_give_one_name(a, b):
    if a != b:
        assert qualified_name(*a) != qualified_name(*b)


@contextmanager
def weak_hash():
    """A 1-bit hash: shortened names of one server collide all the time."""
    real = tool_names.name_hash
    tool_names.name_hash = lambda server, tool: "0000000" + str(len(tool) % 2)
    tool_names.model_name.cache_clear()  # names are cached once computed: none from the real hash
    try:
        yield
    finally:
        tool_names.name_hash = real
        tool_names.model_name.cache_clear()


@settings(max_examples=200, deadline=None)
@given(
    server=servers, names=st.lists(tools | st.text(min_size=1, max_size=140), min_size=1, max_size=30), data=st.data()
)
def test_assign_is_injective_and_order_free_even_when_hashes_collide(server, names, data):
    """assign gives one name per tool, drops a colliding one with a reason, and decides the same
    whatever order the server lists its tools in."""
    shuffled = data.draw(st.permutations(names))
    with weak_hash():
        by_tool, by_model, dropped = tool_names.assign(server, names)
        again = tool_names.assign(server, shuffled)
    assert again == (by_tool, by_model, dropped)
    assert len(set(by_tool.values())) == len(by_tool) and {v: k for k, v in by_tool.items()} == by_model
    assert set(by_tool) <= set(names) and len(by_tool) + len(dropped) == len(set(names))
    for name in by_tool.values():
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) and tool_names.server_of(name) == server


def test_a_collision_keeps_the_tool_whose_name_sorts_first():
    with weak_hash():
        by_tool, by_model, dropped = tool_names.assign("s", ["a.b", "a,b", "plain"])
    assert by_tool == {"a,b": "s__a_b__00000001", "plain": "s__plain"}
    assert dropped == ["tool 'a.b' dropped: its model-facing name 's__a_b__00000001' is already 'a,b''s"]


def test_the_shortened_name_is_the_same_on_every_machine():
    # sha256(b"srv\0admin.tools.list")[:8] == "ab37440b": a literal, so a change of scheme shows here
    assert qualified_name("srv", "admin.tools.list") == "srv__admin_tools_list__ab37440b"
    long = "t" * 128
    name = qualified_name("x" * 32, long)
    assert len(name) == 64 and name.startswith("x" * 32 + "__" + "t" * 20 + "__")


@pytest.mark.parametrize(
    "tool", ["dotted.name", "a" * 63, "a" * 128, "tool__deadbeef", "has space", "emoji_\U0001f600", "x\n", "-"]
)
def test_names_outside_the_rule_are_shortened(tool):
    name = qualified_name("s", tool)
    if tool == "-":
        assert name == "s__-"
        return
    assert name != f"s__{tool}" and re.fullmatch(r"s__[A-Za-z0-9_-]*__[0-9a-f]{8}", name), name


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


async def test_each_refresh_names_what_the_server_lists_then(kxen_home, fakes, tmp_path):
    """The names the model sees follow the catalog across refreshes: unchanged (the maps made
    before stand), reordered, shrunk, grown, and around a clash (the dropped tool listed again, then
    no longer listed), another tool of the same count; each time what ``assign`` gives for that listing."""
    long_a, long_b = "x" * 70, "x" * 72  # cut to one stem; the 1-bit hash below makes them clash
    fake = fakes.add("one", tools={n: (lambda m: lambda args: text_result(m))(n) for n in ["a", "b.c", "d"]})

    with weak_hash():
        async with running(
            kxen_home, tmp_path, servers={"s": mem("one", defaultToolPolicy="allow", pinning="off")}
        ) as rt:
            server = rt.servers["s"]
            for listing in (
                ["a", "b.c", "d"],
                ["a", "b.c", "d"],
                ["d", "a", "b.c"],
                ["a", "b.c"],
                ["a", "e.f"],
                ["a", "b.c"],
                ["a", "b.c", long_b, long_a],
                ["a", "b.c", long_b, long_a],
                ["a", "b.c", long_a],
                ["a", "b.c", long_a],
            ):
                fake.tool_defs[:] = [{"name": n, "inputSchema": {"type": "object"}} for n in listing]
                await rt.refresh("s", "tools")
                by_tool, by_model, dropped = tool_names.assign("s", listing)
                assert {t["name"]: t["qualifiedName"] for t in rt.tools("s")} == by_tool
                assert server.tool_names == by_tool and server.model_tools == by_model
                assert [t["name"] for t in rt.tools("s")] == [n for n in listing if n in by_tool]
                assert bool(dropped) == (long_b in listing)
                assert [d for d in server.catalogs["tools"].diagnostics if "dropped" in d] == dropped
            assert await rt.call_tool(server.tool_names["b.c"], {}) == text_result("b.c")

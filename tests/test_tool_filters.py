"""Tool filters (issue 27, part 2): the config's shape checked at load (file, key path, rule), the
pattern rule and its matching (hypothesis: a valid pattern matches exactly what fnmatch matches, an
exact name only itself), layers that only narrow (hypothesis), the annotation filter with MCP's
defaults, and the shortcut that skips the deny votes. The runs against real servers are in
tests/test_tool_filters_peers.py; the fake-server tests here (what reaches the server) have their
twins there."""

from __future__ import annotations

import json
from fnmatch import fnmatchcase

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kxen_testing import mem, running, text_result

from kxen_core.config.filters import MAX_PATTERNS, AnnotationFilter, is_glob, pattern_rule
from kxen_core.config.loader import load_config, servers_from, settings_from
from kxen_core.config.models import ServerConfig
from kxen_core.config.settings import ProjectFilters, ProjectTools, Role, Settings
from kxen_core.errors import ConfigError, PolicyDenied
from kxen_core.plugins import make_plugin_manager
from kxen_core.policy import ToolCall
from kxen_core.policy.tool_filters import Matcher, denied, filtered, fixed_impls, layer, layers_for, may_deny

NAME = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"
names = st.text(alphabet=NAME, min_size=1, max_size=12)


# --- the config's shape ------------------------------------------------------------------------


def _problems(entry: dict) -> list[str]:
    problems: list[str] = []
    servers_from({"mcpServers": {"s": {"command": "x", **entry}}}, "/h/mcp.json", "user", problems)
    return problems


@pytest.mark.parametrize(
    "entry, where, rule",
    [
        ({"enabledTools": "echo"}, "mcpServers.s.enabledTools", "expected a list"),
        ({"enabledTools": [3]}, "mcpServers.s.enabledTools[0]", "expected a string"),
        ({"disabledTools": ["write file"]}, "mcpServers.s.disabledTools", "disabledTools[0]: a pattern holds"),
        ({"disabledTools": ["ok", "[ab"]}, "mcpServers.s.disabledTools", "disabledTools[1]: a '[' opens a set"),
        ({"disabledTools": ["a]"]}, "mcpServers.s.disabledTools", "a ']' closes a set only after a '['"),
        ({"disabledTools": ["!a"]}, "mcpServers.s.disabledTools", "'!' only negates a set"),
        ({"disabledTools": ["[]"]}, "mcpServers.s.disabledTools", "names at least one character"),
        ({"disabledTools": ["[a*]"]}, "mcpServers.s.disabledTools", "a set '[...]' holds characters"),
        ({"enabledTools": [""]}, "mcpServers.s.enabledTools", "must be 1-200 characters"),
        ({"enabledTools": ["a" * 201]}, "mcpServers.s.enabledTools", "must be 1-200 characters"),
        ({"enabledTools": ["a"] * (MAX_PATTERNS + 1)}, "mcpServers.s.enabledTools", "at most 256 patterns"),
        ({"annotationFilter": {"readOnly": True}}, "mcpServers.s.annotationFilter", "did you mean 'readOnlyHint'"),
        ({"annotationFilter": {"readOnlyHint": "true"}}, "annotationFilter.readOnlyHint", "expected true or false"),
        ({"annotationFilter": {"destructiveHint": 0}}, "annotationFilter.destructiveHint", "expected true or false"),
        ({"annotationFilter": ["readOnlyHint"]}, "mcpServers.s.annotationFilter", ""),
    ],
)
def test_a_bad_filter_names_file_key_path_and_rule(entry, where, rule):
    (problem,) = _problems(entry)
    assert problem.startswith("/h/mcp.json: ") and where in problem and rule in problem, problem


def test_good_filters_load_and_leave_equality_alone():
    problems: list[str] = []
    entry = {
        "enabledTools": ["echo", "get-*", "[!x]?"],
        "annotationFilter": {"readOnlyHint": True, "openWorldHint": None},
    }
    (server,) = servers_from({"mcpServers": {"s": {"command": "x", **entry}}}, "f", "user", problems).values()
    assert problems == []
    assert server.enabledTools == ["echo", "get-*", "[!x]?"] and server.disabledTools == []
    assert server.annotationFilter.wanted() == (("readOnlyHint", True),)
    # what runs is the same: a reload that changes only the filters keeps the server and its catalog
    assert server == ServerConfig(name="s", scope="user", source="f", command="x")


def test_project_filters_in_user_settings_are_checked(tmp_path):
    problems: list[str] = []
    data = {
        "project_filters": [
            {"workspace": "/w", "server": "p", "enabledTools": ["a"]},
            {"workspace": "w", "server": "p__x", "disabled_tools": ["[a"], "annotation_filter": {"readOnlyHint": 1}},
        ]
    }
    settings_from(data, "/h/config.toml", problems)
    text = "\n".join(problems)
    assert "/h/config.toml: project_filters[0]: unknown key(s): enabledTools (did you mean 'enabled_tools'?)" in text
    assert "project_filters[1].workspace: must be an absolute path" in text
    assert "project_filters[1].server: must be a server name" in text
    assert "project_filters[1].disabled_tools: disabled_tools[0]: a '[' opens a set" in text
    assert "project_filters[1].annotation_filter.readOnlyHint: expected true or false" in text
    # and the loader refuses the whole file, as for any settings problem
    (tmp_path / "config.toml").write_text('[[project_filters]]\nworkspace = "/w"\nserver = "p"\nenabled_tools = "a"\n')
    with pytest.raises(ConfigError, match=r"config.toml: project_filters\[0\].enabled_tools: expected a list"):
        load_config(tmp_path, tmp_path)


# --- patterns and matching ---------------------------------------------------------------------

#: one piece of a valid pattern: a name character, * or ?, or a set (maybe negated, maybe with ranges)
_set = st.builds(
    lambda neg, body: "[" + ("!" if neg else "") + body + "]",
    st.booleans(),
    st.text(alphabet=NAME, min_size=1, max_size=4),
)
_piece = st.one_of(st.sampled_from(list(NAME)), st.sampled_from(["*", "?"]), _set)
patterns = st.lists(_piece, min_size=1, max_size=8).map("".join).filter(lambda p: len(p) <= 200)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(patterns, min_size=1, max_size=5), names)
def test_a_valid_pattern_matches_exactly_what_fnmatch_matches(pats, name):
    for p in pats:
        assert pattern_rule(p) is None, p
    found = Matcher.of(pats).match(name)
    assert (found is not None) == any(fnmatchcase(name, p) for p in pats)
    if found is not None:
        assert found in pats and fnmatchcase(name, found)


@settings(max_examples=200, deadline=None)
@given(names, names)
def test_an_exact_name_matches_only_itself(pattern, name):
    assert pattern_rule(pattern) is None and not is_glob(pattern)
    assert (Matcher.of([pattern]).match(name) is not None) == (name == pattern)
    assert (Matcher.of([pattern]).match(pattern.swapcase()) is None) == (pattern.swapcase() != pattern)  # case counts


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=20))
def test_a_pattern_with_a_character_no_tool_name_has_is_refused(text):
    outside = set(text) - set(NAME) - set("*?[]!")
    if outside:
        assert pattern_rule(text) is not None


# --- layers ------------------------------------------------------------------------------------

ANNOTATED = {"name": "echo", "annotations": {"readOnlyHint": True, "destructiveHint": False}}


def test_absent_hints_count_as_mcps_defaults_and_a_non_boolean_matches_nothing():
    def why(wanted: dict, info: dict) -> str | None:
        return filtered(
            [layer("(user config)", ("e", "d", "annotationFilter"), None, [], AnnotationFilter(**wanted))], "t", info
        )

    assert why({"readOnlyHint": True}, ANNOTATED) is None
    assert why({"destructiveHint": False}, ANNOTATED) is None
    no_hints = {"name": "t"}
    assert "readOnlyHint is false (not given: MCP's default), not true" in why({"readOnlyHint": True}, no_hints)
    assert "destructiveHint is true (not given" in why({"destructiveHint": False}, no_hints)
    assert why({"openWorldHint": True, "idempotentHint": False}, no_hints) is None
    assert "is not a boolean" in why({"readOnlyHint": True}, {"annotations": {"readOnlyHint": "yes"}})
    assert "is not a boolean" in why({"readOnlyHint": False}, {"annotations": {"readOnlyHint": 0}})
    assert why({"readOnlyHint": True}, {"annotations": "not an object"}) is not None


def _layers(data: dict, scope: str = "user") -> tuple:
    server = ServerConfig(name="s", scope=scope, command="x", **data)
    return layers_for(server)


filters = st.fixed_dictionaries(
    {},
    optional={
        "enabledTools": st.lists(st.one_of(patterns, names), max_size=3),
        "disabledTools": st.lists(st.one_of(patterns, names), max_size=3),
        "annotationFilter": st.builds(
            AnnotationFilter,
            readOnlyHint=st.sampled_from([None, True, False]),
            openWorldHint=st.sampled_from([None, False]),
        ),
    },
)
hint_values = st.sampled_from([True, False, "yes", None])
tools = st.builds(
    lambda name, ro, ow: {
        "name": name,
        "annotations": {k: v for k, v in (("readOnlyHint", ro), ("openWorldHint", ow)) if v is not None},
    },
    names,
    hint_values,
    hint_values,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(filters, filters, filters, st.lists(tools, max_size=8))
def test_a_project_only_narrows_what_the_user_allows(user, project, rule, listed):
    """Whatever a project entry says, with the user's entry of its name and a [[project_filters]]
    rule on top, no tool the user's own filters hide comes back, nor one the project's hide: the
    layers intersect."""
    user_entry = ServerConfig(name="s", scope="user", command="x", **user)
    project_entry = ServerConfig(name="s", scope="project", command="x", **project)
    settings_ = Settings(
        project_filters=[
            ProjectFilters(
                workspace="/w",
                server="s",
                enabled_tools=rule.get("enabledTools"),
                disabled_tools=rule.get("disabledTools", []),
                annotation_filter=rule.get("annotationFilter"),
            )
        ]
    )
    all_layers = layers_for(project_entry, user_entry=user_entry, settings=settings_, workspace="/w/sub")
    for t in listed:
        shown = filtered(all_layers, t["name"], t) is None
        if filtered(layers_for(user_entry), t["name"], t) is not None:
            assert not shown
        if filtered(layers_for(project_entry), t["name"], t) is not None:
            assert not shown
    # the rule is for /w (and what is inside it): a workspace elsewhere is not touched by it
    assert layers_for(project_entry, settings=settings_, workspace="/elsewhere") == layers_for(project_entry)
    assert layers_for(project_entry, settings=settings_, workspace="/wx") == layers_for(project_entry)


# --- the deny shortcut -------------------------------------------------------------------------

policies = st.sampled_from(["allow", "ask", "deny"])
PM = make_plugin_manager(allow=[])  # the core's votes only


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["user", "project"]),
    policies,
    st.dictionaries(names, policies, max_size=3),
    st.sampled_from([None, "reader", "ghost"]),
    st.dictionaries(names, policies, max_size=2),
    names,
)
def test_the_shortcut_never_skips_a_deny(scope, default, by_tool, role, project_rules, tool):
    """``may_deny`` False means the fixed votes deny no tool (and no read-only method)."""
    server = ServerConfig(name="s", scope=scope, command="x", defaultToolPolicy=default, toolPolicies=by_tool)
    settings_ = Settings(
        roles={"reader": Role(allow=["s__*"], deny=["s__rm"])},
        project_tools=[ProjectTools(workspace="/w", server="s", launch="a" * 64, tools=project_rules)],
    )
    impls = fixed_impls(PM)
    candidates = [*by_tool, *project_rules, tool, "resources/read"]
    if not may_deny(server, role, settings_):
        for name in candidates:
            call = ToolCall(server=server, tool=name, arguments={}, role=role, settings=settings_)
            assert denied(PM, call, impls) is None


# --- what reaches the server (fake twins of the peer tests) -------------------------------------


@pytest.mark.anyio
async def test_a_filtered_call_sends_nothing(kxen_home, tmp_path, fakes):
    fake = fakes.add("f", tools={"echo": lambda a: text_result("e"), "rm": lambda a: text_result("r")})
    servers = {"s": mem("f", defaultToolPolicy="allow", disabledTools=["rm"])}
    async with running(kxen_home, tmp_path, servers=servers) as rt:
        assert [t["qualifiedName"] for t in rt.tools("s")] == ["s__echo"]
        for call in (rt.call_tool("s__rm", {}), rt.call_tool("rm", {}, server="s")):
            with pytest.raises(PolicyDenied, match=r"filtered by disabledTools 'rm' \(user config\); nothing was sent"):
                await call
        out = await rt.agent_call("s__rm", {})
        assert (
            out.is_error
            and out.text == "PolicyDenied: s__rm is not available: filtered by disabledTools 'rm' (user config)"
        )
        assert (await rt.call_tool("s__echo", {}))["content"][0]["text"] == "e"
    assert [m["params"]["name"] for m in fake.received if m.get("method") == "tools/call"] == ["echo"]


@pytest.mark.anyio
async def test_sizes_count_the_json_the_model_gets(kxen_home, tmp_path, fakes):
    defs = [
        {"name": "echo", "description": "Ünïcode ✓", "inputSchema": {"type": "object"}},
        {"name": "rm", "description": "x" * 1000, "inputSchema": {"type": "object"}},
    ]
    fakes.add("f", tool_defs=defs, tools={"echo": lambda a: text_result("e"), "rm": lambda a: text_result("r")})
    async with running(kxen_home, tmp_path, servers={"s": mem("f", disabledTools=["rm"])}) as rt:
        (row,) = rt.status()
        text = json.dumps(rt.tools("s"), ensure_ascii=False, separators=(",", ":"))
        assert (row["toolsHidden"], row["toolChars"], row["toolTokens"]) == (1, len(text), -(-len(text) // 4))
        assert row["toolChars"] < 200  # the long description is not counted: the model is not shown it

"""Tool search (``[tool_search]``, ``kxen_search_tools``): the ranking, the thresholds, the
settings' errors, what is deferred and what stays listed, that a filtered or held tool is never
found, and that a found tool is called the normal way (votes, approvals). Fakes for each rule;
the demo server and server-everything for the real twin."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from kxen_testing import Channel, mem, running, text_result

from kxen_core import Runtime
from kxen_core.agent import tool_search
from kxen_core.agent.tool_search import IndexCache, ToolIndex, query_words, words
from kxen_core.config.loader import settings_from
from kxen_core.plugins import make_plugin_manager

pytestmark = pytest.mark.anyio

DEMO = Path(__file__).resolve().parent.parent / "demo" / "server.py"
ON = '[tool_search]\nenabled = "on"\n'


def tool(name: str, description: str, **params: str) -> dict[str, Any]:
    props = {p: {"type": "string", "description": d} for p, d in params.items()}
    return {"name": name, "description": description, "inputSchema": {"type": "object", "properties": props}}


CATALOG = [
    tool("create_issue", "Open a new issue in a repository.", repo="owner/name", title="issue title"),
    tool("list_issues", "List the open issues of a repository.", repo="owner/name"),
    tool("send_message", "Post a message to a chat channel.", channel="channel id", text="message text"),
    tool("read_file", "Read a file from disk and return its text.", path="file path"),
    tool("listDirectory", "List the entries of a folder.", path="directory path"),
    tool("get_weather", "Current weather and forecast for a city.", city="city name"),
]


def _echo(arguments: dict[str, Any]) -> dict[str, Any]:
    return text_result(json.dumps(arguments, sort_keys=True))


def fake_tools() -> dict[str, Any]:
    return {t["name"]: _echo for t in CATALOG}


def entries() -> list[dict[str, Any]]:
    return [{**t, "qualifiedName": f"s__{t['name']}"} for t in CATALOG]


# --- the ranking (pure) ---------------------------------------------------------------------


def test_words_split_names_and_the_index_stems_them():
    assert words("listDirectory get_user-by_ID HTTPServer2") == "list Directory get user by ID HTTP Server 2"
    assert len(words("word " * 5000)) <= tool_search.MAX_FIELD_CHARS
    # FTS5's porter tokenizer: "files" finds "file", "listing" finds "list"
    index = ToolIndex([tool("read_file", "Read one file."), tool("list_dir", "List a folder.")])
    assert [pos for pos, _ in index.search("files", 5)] == [0]
    assert [pos for pos, _ in index.search("listing", 5)] == [1]


def test_query_syntax_is_never_fts5_syntax():
    index = ToolIndex(entries())
    for query in ['issue" OR "x', "issue NEAR(file)", "issue*", "-issue", "title:issue", "issue AND NOT file"]:
        assert index.search(query, 5), query  # searched as words, never an FTS5 error


def test_the_tool_a_person_means_comes_first():
    index = ToolIndex(entries())
    names = [e["qualifiedName"] for e in entries()]

    def first(query: str) -> str:
        return names[index.search(query, 5)[0][0]]

    assert first("open a new issue") == "s__create_issue"
    assert first("list a folder") == "s__listDirectory"
    assert first("post to a channel") == "s__send_message"
    assert first("weather in Paris") == "s__get_weather"
    assert first("read a file") == "s__read_file"
    assert index.search("zebra quantum", 5) == []  # no shared word: nothing, not noise
    assert len(index.search("a file or an issue or a message", 2)) == 2  # bounded by limit


@pytest.mark.parametrize(
    ("query", "limit", "message"),
    [
        (42, 5, "must be a string"),
        ("x" * (tool_search.MAX_QUERY_CHARS + 1), 5, "at most 500"),
        ("the to of", 5, "no word to search for"),
        ("", 5, "no word to search for"),
        ("issue", 0, "between 1 and 20"),
        ("issue", 21, "between 1 and 20"),
        ("issue", True, "between 1 and 20"),
        ("issue", "5", "between 1 and 20"),
    ],
)
def test_bad_queries_are_errors(query, limit, message):
    with pytest.raises(ValueError, match=message):
        ToolIndex(entries()).search(query, limit)


def test_a_query_is_ranked_on_at_most_its_first_words():
    assert len(query_words(" ".join(f"w{i}" for i in range(100)))) == tool_search.MAX_QUERY_WORDS


def test_the_index_is_built_again_only_when_its_key_changes():
    cache, catalog, view = IndexCache(), {"a": 1}, {}
    made = []

    def listed() -> list[dict[str, Any]]:
        made.append(1)
        return entries()

    cache.get((catalog, view), listed)
    cache.get((catalog, view), listed)
    assert cache.builds == 1 and len(made) == 1
    cache.get(({"a": 1}, view), listed)  # an equal but replaced catalog: a new listing
    assert cache.builds == 2


# --- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"enabled": "yes"}, "tool_search.enabled: must be one of auto, on, off"),
        ({"results": 50}, "tool_search.results: results must be between 1 and 20"),
        ({"results": "5"}, "tool_search.results: expected an integer"),
        ({"threshold_tools": 0}, "tool_search.threshold_tools: threshold_tools must be between"),
        ({"always_visible": ["a b"]}, "always_visible[0] must be a qualified tool name"),
        ({"always_visible": "s__a"}, "tool_search.always_visible"),
        ({"pinned": []}, "tool_search: unknown key(s): pinned"),
    ],
)
def test_settings_errors_name_the_file_key_and_rule(table, message):
    problems: list[str] = []
    settings_from({"tool_search": table}, "config.toml", problems)
    assert problems and problems[0].startswith("config.toml: ") and message in problems[0], problems


def test_a_host_mapping_is_checked_by_the_same_rules():
    with pytest.raises(Exception, match=r"Runtime\(settings=...\): tool_search.results"):
        Runtime(settings={"tool_search": {"results": 99}}, servers={"mcpServers": {}}).load()


# --- the runtime -------------------------------------------------------------------------------


def names(listing: list[dict[str, Any]]) -> list[str]:
    return [t["qualifiedName"] for t in listing]


async def test_a_turn_nobody_saw_is_told_to_the_next_listener(kxen_home, fakes, tmp_path):
    # while nobody listens the turn is not worked out on each change (it reads every server); the
    # state asked for is still right, and a later listener hears of the turn at the next change
    fakes.add("f", tools=fake_tools(), tool_defs=CATALOG)
    kxen_home.write_settings("[tool_search]\nthreshold_tools = 6\n")
    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        await rt.reload(settings={"tool_search": {"threshold_tools": 5}})  # on, and nobody listening
        assert rt.tool_search_state()["on"] and names(rt.tools()) == ["kxen_search_tools"]
        async with rt.settings_events() as sub:
            await rt.reload(settings={"tool_search": {"threshold_tools": 4}})  # still on
            events = []
            while (event := sub.take()) is not None:
                events.append(event)
            assert [e["server"] for e in events if e["type"] == "tools"] == [None]


async def test_off_below_the_thresholds_on_above_them(kxen_home, fakes, tmp_path):
    fakes.add("f", tools=fake_tools(), tool_defs=CATALOG)
    kxen_home.write_settings("[tool_search]\nthreshold_tools = 6\n")
    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        state = rt.tool_search_state()
        assert (state["on"], state["tools"]) == (False, 6) and "within the thresholds" in state["why"]
        assert "kxen_search_tools" not in names(rt.tools())
        async with rt.settings_events() as sub:
            await rt.reload(settings={"tool_search": {"threshold_tools": 5}})
            events = []
            while (event := sub.take()) is not None:
                events.append(event)
            assert [e["server"] for e in events if e["type"] == "tools"] == [None]
        state = rt.tool_search_state()
        assert state["on"] and "more than threshold_tools (5)" in state["why"] and state["deferred"] == 6
        assert names(rt.tools()) == ["kxen_search_tools"]
        await rt.reload(settings={"tool_search": {"threshold_tokens": 100}})
        assert "more than threshold_tokens (100)" in rt.tool_search_state()["why"]
        assert (await rt.settings_snapshot())["toolSearch"]["on"] is True


async def test_always_visible_stays_listed_and_with_deferred_marks_the_rest(kxen_home, fakes, tmp_path):
    fakes.add("f", tools=fake_tools(), tool_defs=CATALOG)
    kxen_home.write_settings(ON + 'always_visible = ["s__read_file", "s__list*"]\n')
    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        assert names(rt.tools()) == ["s__list_issues", "s__read_file", "s__listDirectory", "kxen_search_tools"]
        full = rt.tools(with_deferred=True)
        assert names(full) == [f"s__{t['name']}" for t in CATALOG]
        deferred = {t["qualifiedName"] for t in full if t.get("deferred")}
        assert deferred == {"s__create_issue", "s__send_message", "s__get_weather"}
        assert rt.tools("s") == rt.tools("s", with_deferred=False)  # one server's listing is as before
        assert len(rt.tools("s")) == 6


async def test_a_filtered_denied_or_held_tool_is_never_found(kxen_home, fakes, tmp_path):
    fakes.add("f", tools=fake_tools(), tool_defs=CATALOG)
    kxen_home.write_settings(ON)
    entry = mem("f", defaultToolPolicy="allow", disabledTools=["create_issue"], toolPolicies={"get_weather": "deny"})
    async with running(kxen_home, tmp_path, servers={"s": entry}) as rt:
        found = names(rt.search_tools("issue weather", limit=20))
        assert "s__create_issue" not in found and "s__get_weather" not in found
        assert "s__list_issues" in found
        out = await rt.agent_call("kxen_search_tools", {"query": "open a new issue"})
        assert "create_issue" not in out.text
        rt.servers["s"].tools_by_name = {k: v for k, v in rt.servers["s"].tools_by_name.items() if k != "list_issues"}
        assert "s__list_issues" not in names(rt.search_tools("issues"))  # held: gone from the index too


async def test_a_found_tool_is_called_with_its_votes_and_an_ask_still_asks(kxen_home, fakes, tmp_path):
    fake = fakes.add("f", tools=fake_tools(), tool_defs=CATALOG)
    kxen_home.write_settings(ON)
    channel = Channel(approved=False)
    entry = mem("f", defaultToolPolicy="allow", toolPolicies={"send_message": "ask"})
    async with running(kxen_home, tmp_path, channel, servers={"s": entry}) as rt:
        out = await rt.agent_call("kxen_search_tools", {"query": "read a file", "limit": 1})
        found = json.loads(out.text)["tools"]
        assert [t["qualifiedName"] for t in found] == ["s__read_file"]
        assert found[0]["inputSchema"] == CATALOG[3]["inputSchema"]
        result = await rt.agent_call(found[0]["qualifiedName"], {"path": "/etc/hosts"})
        assert (result.is_error, result.text) == (False, '{"path": "/etc/hosts"}')
        asked = await rt.agent_call("s__send_message", {"channel": "c", "text": "hi"})
        assert asked.is_error and asked.text.startswith("ApprovalDenied:")
        assert [r.details.get("tool") for r in channel.requests] == ["send_message"]
        sent = [m["params"]["name"] for m in fake.received if m.get("method") == "tools/call"]
        assert sent == ["read_file"]  # the ask that was refused sent nothing


async def test_the_search_result_is_bounded_and_bad_input_is_a_clear_error(kxen_home, fakes, tmp_path):
    wordy = [tool(f"t{i}", "archive record " + "x" * 3000, **{f"p{j}": "field" for j in range(30)}) for i in range(20)]
    fakes.add("f", tools={t["name"]: _echo for t in wordy}, tool_defs=wordy)
    kxen_home.write_settings(ON + "[mcp]\nmax_output_chars = 10000\n")
    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        out = await rt.agent_call("kxen_search_tools", {"query": "archive a record", "limit": 20})
        assert len(out.text) <= 10_000 and not out.truncated
        body = json.loads(out.text)
        assert 1 <= len(body["tools"]) < 20 and len(body["tools"]) + len(body["more"]) == 20
        for arguments, message in [
            ({}, "query is required"),
            ({"query": "x", "server": "s"}, "unknown argument(s) 'server'"),
            ({"query": ["a"]}, "must be a string"),
            ({"query": "archive", "limit": 99}, "between 1 and 20"),
            ({"query": "y" * 600}, "at most 500"),
        ]:
            bad = await rt.agent_call("kxen_search_tools", arguments)
            assert bad.is_error and message in bad.text, (arguments, bad.text)
        nothing = json.loads((await rt.agent_call("kxen_search_tools", {"query": "zebra"})).text)
        assert nothing["tools"] == [] and "no tool matched" in nothing["note"]


async def test_when_search_is_off_the_agent_tool_is_unknown(kxen_home, fakes, tmp_path):
    fakes.add("f", tools=fake_tools(), tool_defs=CATALOG)
    kxen_home.write_settings('[tool_search]\nenabled = "off"\n')
    async with running(kxen_home, tmp_path, servers={"s": mem("f")}) as rt:
        out = await rt.agent_call("kxen_search_tools", {"query": "issue"})
        assert out.is_error and "tool search is off (off in [tool_search] enabled)" in out.text
        assert names(rt.search_tools("list the issues"))[0] == "s__list_issues"  # the host's search still works


# --- the real twin: the demo server and server-everything ---------------------------------------


@pytest.fixture
def peers(everything_js: str) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    return {
        "mcpServers": {
            "demo": {"command": sys.executable, "args": [str(DEMO)], "toolPolicies": {"echo": "allow"}},
            "ev": {"command": node, "args": [everything_js, "stdio"], "defaultToolPolicy": "allow"},
        }
    }


async def test_search_finds_and_calls_tools_of_the_real_peers(peers, tmp_path):
    pm = make_plugin_manager(allow=["stdio"], extra=[Channel(approved=False)])
    settings = {"tool_search": {"enabled": "on", "always_visible": ["ev__get-sum"]}}
    async with Runtime(home=tmp_path, workspace=tmp_path, servers=peers, settings=settings, pm=pm) as rt:
        with anyio.fail_after(60):
            assert await rt.wait_ready()
        plain = names(rt.tools())
        assert "ev__get-sum" in plain and "kxen_search_tools" in plain and "demo__echo" not in plain
        assert {"demo__echo", "ev__echo"} <= {
            t["qualifiedName"] for t in rt.tools(with_deferred=True) if t.get("deferred")
        }
        out = await rt.agent_call("kxen_search_tools", {"query": "echo my text back", "limit": 3})
        found = [t["qualifiedName"] for t in json.loads(out.text)["tools"]]
        assert {"demo__echo", "ev__echo"} <= set(found), found
        assert (await rt.agent_call("demo__echo", {"text": "hello"})).text == "hello"
        assert "hi there" in (await rt.agent_call("ev__echo", {"message": "hi there"})).text
        denied = await rt.agent_call("demo__add", {"a": 1, "b": 2})  # found or not, an ask still asks
        assert denied.text.startswith("ApprovalDenied:")
        sums = names(rt.search_tools("add two numbers", limit=2))
        assert set(sums) == {"demo__add", "ev__get-sum"}, sums


async def test_a_new_listing_rebuilds_the_index_and_can_turn_search_on(kxen_home, fakes, tmp_path):
    fake = fakes.add("f", tools=fake_tools(), tool_defs=CATALOG[:2])
    kxen_home.write_settings("[tool_search]\nthreshold_tools = 3\n")
    async with running(kxen_home, tmp_path, servers={"s": mem("f", pinning="off")}) as rt:
        rt.search_tools("issue")
        rt.search_tools("repository")
        assert rt._search_index.builds == 1  # the same list: the same index
        async with rt.settings_events() as sub:
            fake.tool_defs = CATALOG
            await fake.notify("notifications/tools/list_changed")
            with anyio.fail_after(10):
                while len(rt.servers["s"].tools_by_name) != len(CATALOG):
                    await anyio.sleep(0.01)
            servers = []
            while (event := sub.take()) is not None:
                servers += [event["server"]] if event["type"] == "tools" else []
        assert servers == ["s", None]  # the server's list, then search turning on
        assert names(rt.search_tools("weather")) == ["s__get_weather"]
        assert rt._search_index.builds == 2


async def test_found_entries_carry_the_policy_of_the_config_in_force(kxen_home, fakes, tmp_path):
    fakes.add("f", tools=fake_tools(), tool_defs=CATALOG)
    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow", pinning="off")}) as rt:
        assert rt.search_tools("weather", limit=1)[0]["policy"] == "allow"
        kxen_home.write_servers(
            {"s": mem("f", defaultToolPolicy="allow", pinning="off", toolPolicies={"get_weather": "ask"})}
        )
        await rt.reload()  # a changed entry: the server starts again
        with anyio.fail_after(10):
            assert await rt.wait_ready()
        assert rt.search_tools("weather", limit=1)[0]["policy"] == "ask"


def test_kxen_mcp_tools_says_when_search_keeps_tools_out_of_its_list(kx, kxen_home, fakes, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the table's names whole, whatever terminal runs the tests
    fakes.add("f", tools=fake_tools(), tool_defs=CATALOG)
    kxen_home.write_servers({"s": mem("f", defaultToolPolicy="allow")})
    kxen_home.write_settings(ON + 'always_visible = ["s__read_file"]\n')
    code, out, err = kx("mcp", "tools", "--wait", "10")
    assert code == 0, err
    assert "s__read_file" in out and "kxen_search_tools" in out and "s__get_weather" not in out
    assert "tool search is on (on in [tool_search] enabled): 5 tools not listed here" in " ".join(out.split())
    code, out, err = kx("mcp", "tools", "--all", "--wait", "10")
    assert code == 0 and "s__get_weather" in out and "tool search is on" not in out


async def test_without_fts5_search_stays_off_and_every_tool_is_listed(kxen_home, fakes, tmp_path, monkeypatch):
    monkeypatch.setattr(tool_search, "available", lambda: "this Python's SQLite has no full-text search (FTS5)")
    fakes.add("f", tools=fake_tools(), tool_defs=CATALOG)
    kxen_home.write_settings(ON)
    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        state = rt.tool_search_state()
        assert state["on"] is False and "no full-text search (FTS5)" in state["why"]
        names = {t["qualifiedName"] for t in rt.tools()}
        assert {e["qualifiedName"] for e in entries()} <= names and "kxen_search_tools" not in names


async def test_what_the_model_found_joins_the_list_until_forgotten(kxen_home, fakes, tmp_path):
    """A framework that lists the tools at each step (pydantic-ai) can call what a search found:
    the found tools join plain tools(), a tools event says so, and forget_found_tools ends it."""
    fakes.add("f", tools=fake_tools(), tool_defs=CATALOG)
    kxen_home.write_settings(ON)
    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow")}) as rt:
        assert "s__get_weather" not in {t["qualifiedName"] for t in rt.tools()}
        async with rt.settings_events() as events:
            out = await rt.agent_call("kxen_search_tools", {"query": "weather in Paris", "limit": 1})
            assert json.loads(out.text)["tools"][0]["qualifiedName"] == "s__get_weather"
            with anyio.fail_after(5):
                event = await anext(aiter(events))
            assert event["type"] == "tools" and event["server"] is None
            listed = {t["qualifiedName"] for t in rt.tools()}
            assert "s__get_weather" in listed and "s__read_file" not in listed
            # marked as listed, not deferred, for a provider that defers the rest
            marks = {t["qualifiedName"]: t.get("deferred") for t in rt.tools(with_deferred=True)}
            assert marks["s__get_weather"] is None and marks["s__read_file"] is True
            # the same search again changes nothing: no event
            await rt.agent_call("kxen_search_tools", {"query": "weather in Paris", "limit": 1})
            rt.forget_found_tools()
            with anyio.fail_after(5):
                event = await anext(aiter(events))
            assert event["type"] == "tools" and event["server"] is None
            assert "s__get_weather" not in {t["qualifiedName"] for t in rt.tools()}
            assert events.take() is None


def test_the_found_tools_are_bounded():
    from kxen_core.runtime import search_tools

    class Host:
        _found_tools: dict[str, None] = {}
        published: list[str] = []

        class _events:  # noqa: N801 (stands for the runtime's hub)
            @staticmethod
            def publish(kind: str, **data: Any) -> None:
                Host.published.append(kind)

    for i in range(100):
        search_tools.remember_found(Host, [f"s__t{i}", f"s__u{i}"])
    assert len(Host._found_tools) == search_tools.MAX_FOUND
    # a search's best result is the newest; the oldest found leave first
    assert list(Host._found_tools)[-2:] == ["s__u99", "s__t99"] and "s__t0" not in Host._found_tools
    assert len(Host.published) == 100

"""A listing takes the objects of the listing before it where nothing changed
(kxen_core.protocol.catalog_reuse): the keys tell every change apart, a change of a value's type
included; what is taken is the same object; plugins are told what they judged before only in the
same context; an object changed in place is not taken. The twin against a real peer (the rug-pull
server on the official SDK, over stdio): a definition changed only from ``true`` to ``1`` is held by
its pin, and the unchanged tools stay the objects they were."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from kxen_testing import running
from remote_support import status_of, until

from kxen_core.errors import ToolHeld
from kxen_core.protocol.catalog import CatalogPage, Verdict, fetch_catalog
from kxen_core.protocol.catalog_reuse import content_key

pytestmark = pytest.mark.anyio

RUG = Path(__file__).resolve().parent / "peers" / "rug_pull_server.py"
WAIT = 30


def tool(name: str, default: Any = None, description: str = "d") -> dict[str, Any]:
    prop: dict[str, Any] = {"type": "string"}
    if default is not None:
        prop["default"] = default
    return {"name": name, "description": description, "inputSchema": {"type": "object", "properties": {"t": prop}}}


def decoded(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items as a transport hands them over: parsed anew from JSON."""
    return json.loads(json.dumps(items))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (True, 1),
        (False, 0),
        (1, 1.0),
        (0.0, -0.0),
        ("1", 1),
        (None, False),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
        ([1, 2], [2, 1]),
        ({"x": [True]}, {"x": [1]}),
    ],
)
def test_the_key_tells_apart_what_python_calls_equal_or_json_calls_the_same(a, b):
    assert content_key(a) != content_key(b)
    text = json.dumps(a)  # two parses of the same text (what a transport hands over): the same key
    assert content_key(json.loads(text)) == content_key(json.loads(text))


def test_a_value_marshal_cannot_write_has_no_key_and_is_never_taken():
    deep: Any = []
    for _ in range(3000):
        deep = [deep]
    assert content_key(deep) is None


class Pager:
    """Pages of fresh objects (as decoded JSON), two tools a page."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    async def __call__(self, cursor: str | None) -> dict[str, Any]:
        start = int(cursor or 0)
        page = decoded(self.items[start : start + 2])
        nxt = start + 2
        return {"tools": page, **({"nextCursor": str(nxt)} if nxt < len(self.items) else {})}


class Judge:
    def __init__(self) -> None:
        self.known: list[frozenset[int]] = []
        self.note: str | None = None  # annotate the tool of this name

    async def __call__(self, page: CatalogPage) -> list[tuple[str, Verdict]]:
        self.known.append(page.known)
        return [("p", Verdict.annotate(i, "k", "v")) for i, t in enumerate(page.items) if t["name"] == self.note]


async def test_unchanged_items_are_the_objects_of_the_last_listing_and_changed_ones_are_new():
    pager = Pager([tool("a"), tool("b", True), tool("c"), tool("d")])
    judge = Judge()
    first = await fetch_catalog("tools", pager, judge=judge, context=("ctx",))
    assert first.reused == set() and judge.known == [frozenset(), frozenset()]
    pager.items[1] = tool("b", 1)  # a change of type only: true -> 1
    judge.known.clear()
    second = await fetch_catalog("tools", pager, judge=judge, before=first, context=("ctx",))
    by_name = {t["name"]: t for t in second.items}
    old = {t["name"]: t for t in first.items}
    assert [n for n in "abcd" if by_name[n] is old[n]] == ["a", "c", "d"]
    assert by_name["b"]["inputSchema"]["properties"]["t"]["default"] == 1
    assert type(by_name["b"]["inputSchema"]["properties"]["t"]["default"]) is int
    assert second.reused == {id(old["a"]), id(old["c"]), id(old["d"])}
    # the page with b: only a was judged before; the other page whole
    assert judge.known == [frozenset({0}), frozenset({0, 1})]
    assert second.items == decoded(pager.items)  # the catalog as the server sent it


async def test_plugins_are_told_what_they_judged_only_in_the_same_context():
    pager = Pager([tool("a"), tool("b")])
    judge = Judge()
    first = await fetch_catalog("tools", pager, judge=judge, context=("settings-1",))
    judge.known.clear()
    second = await fetch_catalog("tools", pager, judge=judge, before=first, context=("settings-2",))
    assert judge.known == [frozenset()]  # the settings changed: judged again
    assert second.items[0] is first.items[0]  # the same object all the same


async def test_an_annotated_item_is_judged_again_and_an_item_changed_in_place_is_not_taken():
    pager = Pager([tool("a"), tool("b"), tool("c")])
    judge = Judge()
    judge.note = "b"
    first = await fetch_catalog("tools", pager, judge=judge, context=())
    assert first.notes == {"b": {"k": "v"}}
    judge.known.clear()
    second = await fetch_catalog("tools", pager, judge=judge, before=first, context=())
    assert judge.known == [frozenset({0}), frozenset({0})]  # b carried a note: not among the known
    assert second.items[1] is not first.items[1] and second.notes == {"b": {"k": "v"}}
    # a host changed a schema it was given (it must copy it first): that object is not taken again
    second.items[0]["inputSchema"]["properties"]["t"]["type"] = "integer"
    third = await fetch_catalog("tools", pager, judge=judge, before=second, context=())
    assert third.items[0] is not second.items[0]
    assert third.items[0]["inputSchema"]["properties"]["t"]["type"] == "string"
    assert third.items[2] is second.items[2]


async def test_a_change_of_type_only_is_held_by_its_pin_and_the_rest_stays_the_same_objects(kxen_home, tmp_path):
    pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK (a dev dependency) is not installed")
    state = tmp_path / "rug.json"
    state.write_text(json.dumps({"description": "Echo the text back.", "retype": True}))
    ws = tmp_path / "ws"
    ws.mkdir()
    entry = {
        "command": sys.executable,
        "args": [str(RUG), "stdio", "--state", str(state)],
        "pinning": "hold",
        "defaultToolPolicy": "allow",
        "protocolEra": "legacy",  # list_changed needs a session
    }
    async with running(kxen_home, ws, servers={"rug": entry}, allow=["stdio"], wait=WAIT) as rt:
        server = rt.servers["rug"]
        flip = server.listed_tools["flip"]
        assert (await rt.call_tool("rug__retype", {"value": "true"}))["content"][0]["text"] == "retyped"
        await until(lambda: "echo" in server.held_tools, WAIT)
        assert await rt.accept_pin("rug", "echo") == ["echo"]
        assert (await rt.call_tool("rug__echo", {"text": "hi"}))["content"][0]["text"] == "hi"
        before = server.pin_digests["echo"]
        assert (await rt.call_tool("rug__retype", {"value": "1"}))["content"][0]["text"] == "retyped"
        await until(lambda: "echo" in server.held_tools, WAIT)
        schema = server.listed_tools["echo"]["inputSchema"]
        assert type(schema["properties"]["text"]["default"]) is int  # what the server sent now
        assert server.pin_digests["echo"] != before and status_of(rt, "rug")["held"] == ["echo"]
        assert server.held_tools["echo"].fields == ("inputSchema",)
        with pytest.raises(ToolHeld):
            await rt.call_tool("rug__echo", {"text": "hi"})
        assert server.listed_tools["flip"] is flip  # listed three times, the same object

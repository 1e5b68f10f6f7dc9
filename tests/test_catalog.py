"""Bounded, deduplicated, validated catalogs: kxen_core.protocol.catalog.fetch_catalog."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kxen_core.protocol.catalog import MAX_CURSOR_CHARS, Catalog, CatalogPage, Verdict, fetch_catalog

pytestmark = pytest.mark.anyio


# --- a scripted pager -------------------------------------------------------------------------


@attrs.define
class Page:
    items: list[Any]
    next: Any = None  # nextCursor; None ends the walk
    fail: bool = False


class Pager:
    """Serves ``pages`` in call order and checks that each call passes the cursor it was given."""

    def __init__(self, pages: Sequence[Page], field: str = "tools") -> None:
        self.pages = list(pages)
        self.field = field
        self.cursors: list[str | None] = []
        self.mismatches: list[str] = []  # checked by run(): fetch_catalog swallows errors of later pages

    @property
    def calls(self) -> int:
        return len(self.cursors)

    async def __call__(self, cursor: str | None) -> dict[str, Any]:
        n = len(self.cursors)
        expected = None if n == 0 else self.pages[n - 1].next
        if cursor != expected:
            self.mismatches.append(f"call {n + 1} passed cursor {cursor!r}, the previous page said {expected!r}")
        self.cursors.append(cursor)
        page = self.pages[n] if n < len(self.pages) else Page([])
        if page.fail:
            raise RuntimeError(f"page {n + 1} exploded")
        result: dict[str, Any] = {self.field: page.items}
        if page.next is not None:
            result["nextCursor"] = page.next
        return result


def run(kind: str, pager: Pager, **kwargs: Any) -> Catalog:
    async def main() -> Catalog:
        with anyio.fail_after(10):
            return await fetch_catalog(kind, pager, **kwargs)

    try:
        return anyio.run(main)
    finally:
        assert pager.mismatches == []


def tool(name: str, variant: int = 0, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": f"v{variant}", "inputSchema": {"type": "object"}, **extra}


def names(catalog: Catalog) -> list[str]:
    return [t["name"] for t in catalog.items]


# --- the reference model ----------------------------------------------------------------------


def model(pages: Sequence[Page], max_pages: int, max_items: int) -> tuple[int, list[dict[str, Any]], bool]:
    """(fetches, kept items, complete) as the documented rules describe them (no failing pages)."""
    kept: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    for n in range(max_pages):
        page = pages[n] if n < len(pages) else Page([])
        for item in page.items:
            if item["name"] in kept:
                continue
            if len(kept) >= max_items:
                return n + 1, list(kept.values()), False
            kept[item["name"]] = item
        if page.next is None:
            return n + 1, list(kept.values()), True
        if page.next in seen:
            return n + 1, list(kept.values()), False
        seen.add(page.next)
    return max_pages, list(kept.values()), False


_items = st.lists(st.builds(tool, st.sampled_from("abcdefgh"), st.integers(0, 1)), max_size=6)
_cursors = st.one_of(st.none(), st.sampled_from(["c1", "c2", "c3", "c4", "c5"]))
_pages = st.lists(st.builds(Page, _items, _cursors), min_size=1, max_size=12)

_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(pages=_pages, max_pages=st.integers(1, 8), max_items=st.integers(1, 10))
def test_walk_matches_the_rules_and_stays_bounded(pages, max_pages, max_items):
    pager = Pager(pages)
    catalog = run("tools", pager, max_pages=max_pages, max_items=max_items)
    fetches, kept, complete = model(pages, max_pages, max_items)

    assert pager.calls <= max_pages
    assert len(catalog.items) <= max_items
    assert pager.calls == fetches
    assert catalog.pages == fetches
    assert catalog.items == kept  # first wins, in order of first appearance
    assert catalog.complete is complete
    assert len(set(names(catalog))) == len(catalog.items)
    if not complete:
        assert catalog.diagnostics, "an incomplete catalog must say why"


@_SETTINGS
@given(pages=_pages)
def test_repeated_cursor_stops_the_walk(pages):
    # make the last page point back at a cursor already used (or at itself)
    used = [p.next for p in pages[:-1] if p.next is not None]
    if not used:
        pages = [Page(pages[0].items, "loop"), Page([], "loop")]
    else:
        pages = [*pages[:-1], Page(pages[-1].items, used[0])]
    pager = Pager(pages)
    catalog = run("tools", pager, max_pages=50)
    distinct = {c for c in pager.cursors if c is not None}
    assert pager.calls <= len(distinct) + 1  # never fetches the same cursor twice
    assert len(pager.cursors[1:]) == len(set(pager.cursors[1:]))
    if pager.calls == len(pages) and pages[-1].next in distinct:
        assert catalog.complete is False
        assert any("cursor repeated" in d for d in catalog.diagnostics)


def test_self_referencing_cursor_fetches_twice_at_most():
    pager = Pager([Page([tool("a")], "same"), Page([tool("b")], "same"), Page([tool("c")], "same")])
    catalog = run("tools", pager, max_pages=100)
    assert pager.calls == 2
    assert names(catalog) == ["a", "b"]
    assert catalog.complete is False
    assert any("cursor repeated" in d for d in catalog.diagnostics)


def test_page_limit():
    pages = [Page([tool(f"t{i}")], f"c{i}") for i in range(20)]
    pager = Pager(pages)
    catalog = run("tools", pager, max_pages=5)
    assert pager.calls == 5
    assert names(catalog) == [f"t{i}" for i in range(5)]
    assert catalog.complete is False
    assert any("more than 5 pages" in d for d in catalog.diagnostics)


def test_item_limit_within_one_page():
    pager = Pager([Page([tool(f"t{i}") for i in range(10)])])
    catalog = run("tools", pager, max_items=4)
    assert names(catalog) == ["t0", "t1", "t2", "t3"]
    assert catalog.complete is False
    assert any("more than 4" in d for d in catalog.diagnostics)


def test_item_limit_reached_exactly_is_complete():
    pager = Pager([Page([tool("a"), tool("b")], "x"), Page([tool("c"), tool("a")])])
    catalog = run("tools", pager, max_items=3)
    assert names(catalog) == ["a", "b", "c"]
    assert catalog.complete is True


# --- failing pages ----------------------------------------------------------------------------


def test_first_page_failure_raises():
    pager = Pager([Page([], fail=True)])
    with pytest.raises(RuntimeError, match="page 1 exploded"):
        run("tools", pager)
    assert pager.calls == 1


async def test_first_page_failure_raises_the_fetch_error_itself():
    class Boom(Exception):
        pass

    async def fetch(cursor):
        raise Boom("no")

    with anyio.fail_after(5), pytest.raises(Boom):
        await fetch_catalog("prompts", fetch)


def test_failing_later_page_keeps_items_so_far():
    pager = Pager([Page([tool("a"), tool("b")], "p2"), Page([tool("c")], "p3"), Page([], fail=True)])
    catalog = run("tools", pager)
    assert pager.calls == 3
    assert catalog.complete is False
    assert any("page 3 failed" in d for d in catalog.diagnostics)
    assert names(catalog) == ["a", "b", "c"]


def test_failing_later_page_is_diagnosed_and_incomplete():
    pager = Pager([Page([tool("a")], "p2"), Page([], fail=True), Page([tool("never")])])
    catalog = run("tools", pager)
    assert pager.calls == 2
    assert catalog.complete is False
    assert any("page 2 failed" in d and "exploded" in d for d in catalog.diagnostics)
    assert "never" not in names(catalog)


def test_later_page_without_a_list_keeps_items_so_far():
    class Odd(Pager):
        async def __call__(self, cursor):
            result = await super().__call__(cursor)
            if self.calls == 2:
                result["tools"] = "not a list"
            return result

    catalog = run("tools", Odd([Page([tool("a")], "p2"), Page([])]))
    assert catalog.complete is False
    assert names(catalog) == ["a"]


@_SETTINGS
@given(pages=_pages, data=st.data())
def test_property_failing_later_page_keeps_every_item_so_far(pages, data):
    pages = [attrs.evolve(p, next=f"n{i}") for i, p in enumerate(pages)] + [Page([], fail=True)]
    at = data.draw(st.integers(1, len(pages) - 1), label="failing page index")
    pages[at] = Page([], fail=True)
    pager = Pager(pages)
    catalog = run("tools", pager, max_pages=50, max_items=1000)
    assert pager.calls == at + 1
    assert catalog.complete is False
    _, kept, _ = model(pages[:at] + [Page([])], 50, 1000)
    assert catalog.items == kept


# --- deduplication ----------------------------------------------------------------------------


def test_identical_duplicate_is_silent():
    pager = Pager([Page([tool("a"), tool("a")], "2"), Page([tool("a"), tool("b")])])
    catalog = run("tools", pager)
    assert names(catalog) == ["a", "b"]
    assert catalog.complete is True
    assert catalog.diagnostics == []


def test_conflicting_duplicate_keeps_first_and_is_diagnosed():
    first, second = tool("a", 0), tool("a", 1)
    pager = Pager([Page([first, tool("b")], "2"), Page([second])])
    catalog = run("tools", pager)
    assert catalog.items == [first, tool("b")]
    assert catalog.complete is True
    dup = [d for d in catalog.diagnostics if "duplicate" in d]
    assert len(dup) == 1 and "'a'" in dup[0] and "page 2" in dup[0]


def test_resources_are_keyed_by_uri():
    pager = Pager(
        [
            Page(
                [
                    {"uri": "file:///a", "name": "x"},
                    {"uri": "file:///b", "name": "x"},
                    {"uri": "file:///a", "name": "y"},
                ]
            )
        ],
        field="resources",
    )
    catalog = run("resources", pager)
    assert [r["uri"] for r in catalog.items] == ["file:///a", "file:///b"]
    assert catalog.items[0]["name"] == "x"
    assert any("duplicate" in d for d in catalog.diagnostics)


@_SETTINGS
@given(pages=_pages)
def test_property_first_wins_and_only_conflicts_are_diagnosed(pages):
    pager = Pager(pages)
    catalog = run("tools", pager, max_pages=100, max_items=1000)
    fetched = [item for p in pages[: pager.calls] for item in p.items]
    first: dict[str, dict[str, Any]] = {}
    conflicts = 0
    for item in fetched:
        if item["name"] not in first:
            first[item["name"]] = item
        elif first[item["name"]] != item:
            conflicts += 1
    assert catalog.items == list(first.values())
    assert sum("duplicate" in d for d in catalog.diagnostics) == conflicts


# --- item validation --------------------------------------------------------------------------

INVALID = [
    ("not-an-object", "not an object"),
    ({"name": 3}, "'name'"),
    ({"name": ""}, "'name'"),
    ({"description": "no name"}, "'name'"),
    ({"name": "schema", "inputSchema": ["x"]}, "inputSchema"),
    ({"name": "desc", "description": 5}, "description"),
    ({"name": "x" * 2049}, "2048"),
]


@pytest.mark.parametrize(("bad", "why"), INVALID)
def test_invalid_item_is_skipped_and_named_others_kept(bad, why):
    pager = Pager([Page([tool("a"), bad, tool("b")])])
    catalog = run("tools", pager)
    assert names(catalog) == ["a", "b"]
    assert len(catalog.diagnostics) == 1
    diag = catalog.diagnostics[0]
    assert "page 1" in diag and why in diag and "skipped" in diag
    if isinstance(bad, dict) and isinstance(bad.get("name"), str) and bad["name"]:
        assert repr(bad["name"][:80]) in diag  # names the item by its key (shortened)
    else:
        assert "item #1 " in diag  # no usable key: named by its place on the page


def test_many_invalid_items_bound_the_diagnostics():
    pager = Pager([Page([{"name": i} for i in range(1000)] + [tool("ok")])])
    catalog = run("tools", pager)
    assert names(catalog) == ["ok"]
    assert len(catalog.diagnostics) <= 201


@pytest.mark.parametrize("cursor", [5, True, ["x"], "c" * (MAX_CURSOR_CHARS + 1)])
def test_invalid_next_cursor_stops_with_items(cursor):
    pager = Pager([Page([tool("a")], cursor)])
    catalog = run("tools", pager)
    assert pager.calls == 1
    assert names(catalog) == ["a"]
    assert catalog.complete is False
    assert any("nextCursor" in d for d in catalog.diagnostics)


def test_first_page_without_a_list_is_incomplete():
    async def fetch(cursor):
        return {"tools": {"a": 1}}

    catalog = anyio.run(fetch_catalog, "tools", fetch)
    assert catalog.items == [] and catalog.complete is False
    assert any("'tools'" in d for d in catalog.diagnostics)


# --- plugin verdicts --------------------------------------------------------------------------


class Judge:
    def __init__(self, decide) -> None:
        self.decide = decide
        self.pages: list[CatalogPage] = []

    async def __call__(self, page: CatalogPage):
        self.pages.append(page)
        return self.decide(page)


def test_judge_rejects_by_index_into_the_validated_page():
    judge = Judge(lambda page: [("guard", Verdict.reject(0, "looks like injection"))] if page.number == 1 else [])
    pager = Pager([Page(["junk", tool("a"), tool("b")], "2"), Page([tool("c")])])
    catalog = run("tools", pager, judge=judge)
    # the judge saw only items that passed the core rules; index 0 is "a"
    assert judge.pages[0].items == (tool("a"), tool("b"))
    assert judge.pages[0].number == 1 and judge.pages[0].kind == "tools"
    assert [p.number for p in judge.pages] == [1, 2]
    assert names(catalog) == ["b", "c"]
    rejected = [d for d in catalog.diagnostics if "rejected" in d]
    assert len(rejected) == 1
    assert "'a'" in rejected[0] and "guard" in rejected[0] and "looks like injection" in rejected[0]


def test_verdicts_from_several_plugins_and_out_of_range_indexes():
    def decide(page):
        return [
            ("p1", Verdict.reject(1, "r1")),
            ("p2", Verdict.reject(1, "again")),  # the same item twice: one diagnostic
            ("p2", Verdict.reject(99, "out of range")),
            ("p3", Verdict.reject(-1, "negative")),
            ("p3", Verdict.annotate(0, "risk", "low")),
        ]

    catalog = run("tools", Pager([Page([tool("a"), tool("b"), tool("c")])]), judge=Judge(decide))
    assert names(catalog) == ["a", "c"]
    assert catalog.notes == {"a": {"risk": "low"}}
    assert sum("rejected" in d for d in catalog.diagnostics) == 1


def test_raising_judge_rejects_the_whole_page_only():
    def decide(page):
        if page.number == 2:
            raise RuntimeError("judge broke")
        return []

    pager = Pager([Page([tool("a")], "2"), Page([tool("b"), tool("c")], "3"), Page([tool("d")])])
    catalog = run("tools", pager, judge=Judge(decide))
    assert names(catalog) == ["a", "d"]
    assert pager.calls == 3
    assert any("page 2 rejected whole" in d and "judge broke" in d for d in catalog.diagnostics)


def test_judge_is_not_asked_about_an_empty_page():
    judge = Judge(lambda page: [])
    run("tools", Pager([Page([], "2"), Page(["junk"])]), judge=judge)
    assert judge.pages == []


@_SETTINGS
@given(pages=_pages, data=st.data())
def test_property_rejected_items_never_kept(pages, data):
    rejected_names = data.draw(st.sets(st.sampled_from("abcdefgh")), label="rejected")

    def decide(page):
        return [("p", Verdict.reject(i, "no")) for i, item in enumerate(page.items) if item["name"] in rejected_names]

    catalog = run("tools", Pager(pages), judge=Judge(decide), max_pages=100, max_items=1000)
    assert not set(names(catalog)) & rejected_names


# --- the next page is fetched while the current one is judged --------------------------------


@pytest.fixture(params=["asyncio task", "task group"], autouse=False)
def ahead_path(request, monkeypatch):
    """Both ways the next page is fetched beside the judging: a bare asyncio task (inside an
    asyncio task) and a task group (trio, a guest run: forced here)."""
    if request.param == "task group":
        import kxen_core.protocol.catalog as catalog_module

        monkeypatch.setattr(catalog_module, "_asyncio_task", lambda: None)
    return request.param


def test_next_page_is_fetched_while_the_current_one_is_judged(ahead_path):
    pages = [Page([tool("a")], "2"), Page([tool("b")], "3"), Page([tool("c")])]
    pager = Pager(pages)
    seen: list[int] = []

    async def judge(page: CatalogPage):
        # the next page's request is out before this page's verdicts: wait (bounded) until it is
        if page.number < len(pages):
            with anyio.fail_after(5):
                while pager.calls <= page.number:
                    await anyio.sleep(0)
        seen.append(pager.calls)
        return []

    catalog = run("tools", pager, judge=judge)
    assert seen == [2, 3, 3]  # one page ahead at most, and nothing after the last
    assert names(catalog) == ["a", "b", "c"] and catalog.complete


def test_no_fetch_ahead_when_the_page_may_reach_the_item_limit_or_the_page_limit(ahead_path):
    def walk(pages: list[Page], **limits: int) -> tuple[list[int], Pager, Catalog]:
        pager = Pager(pages)
        seen: list[int] = []

        async def judge(page: CatalogPage):
            await anyio.sleep(0)
            seen.append(pager.calls)
            return []

        return seen, pager, run("tools", pager, judge=judge, **limits)

    # page 2 could fill the catalog (1 + 3 items, 3 allowed): the walk may end there, so no page 3 yet
    seen, pager, catalog = walk(
        [Page([tool("a")], "2"), Page([tool("b"), tool("c"), tool("d")], "3"), Page([])], max_items=3
    )
    assert seen == [2, 2] and pager.calls == 2
    assert names(catalog) == ["a", "b", "c"] and not catalog.complete
    # page 2 is the last allowed: nothing is fetched after it
    seen, pager, catalog = walk([Page([tool("a")], "2"), Page([tool("b")], "3"), Page([tool("c")])], max_pages=2)
    assert seen == [2, 2] and pager.calls == 2
    assert names(catalog) == ["a", "b"] and not catalog.complete


def test_a_bad_verdict_raises_as_itself_while_a_page_is_fetched_ahead(ahead_path):
    async def judge(page: CatalogPage):
        return [("p", object())]

    pager = Pager([Page([tool("a")], "2"), Page([tool("b")])])
    with pytest.raises(AttributeError):
        run("tools", pager, judge=judge)


def test_cancelling_the_walk_cancels_the_fetch_ahead(ahead_path):
    state: list[str] = []

    async def fetch(cursor: str | None) -> dict[str, Any]:
        if cursor is None:
            return {"tools": [tool("a")], "nextCursor": "2"}
        state.append("fetching 2")
        try:
            await anyio.sleep_forever()
        finally:
            state.append("fetch 2 ended")
        return {}  # pragma: no cover - cancelled above

    async def main() -> None:
        with anyio.fail_after(10):
            with anyio.CancelScope() as scope:

                async def judge(page: CatalogPage):
                    await anyio.sleep(0)
                    scope.cancel()
                    await anyio.sleep(0)
                    return []

                await fetch_catalog("tools", fetch, judge=judge)
            assert scope.cancelled_caught

    anyio.run(main)
    assert state == ["fetching 2", "fetch 2 ended"]


def test_a_failing_page_fetched_ahead_keeps_the_items_so_far(ahead_path):
    pager = Pager([Page([tool("a")], "2"), Page([tool("b")], "3"), Page([], fail=True), Page([tool("d")])])
    catalog = run("tools", pager, judge=Judge(lambda page: []))
    assert pager.calls == 3
    assert names(catalog) == ["a", "b"] and catalog.complete is False
    assert any("page 3 failed (RuntimeError: page 3 exploded); kept 2 items" in d for d in catalog.diagnostics)


# --- the page loop's shortcuts decide like the plain rules ------------------------------------


def reference_walk(kind: str, pages: Sequence[Page], decide, max_pages: int, max_items: int) -> Catalog:
    """The walk written plainly from the documented rules: every item through the core rules one
    call at a time, the verdicts, then the first of each key kept (no shortcut, no fetch ahead)."""
    from kxen_core.protocol.catalog import KINDS
    from kxen_core.protocol.catalog_rules import base_problem as _base_problem
    from kxen_core.protocol.catalog_rules import label as _label

    key_field = KINDS[kind][2]
    catalog = Catalog(kind=kind)
    index: dict[str, Any] = {}
    seen: set[str] = set()
    for n in range(max_pages):
        number = n + 1
        page = pages[n] if n < len(pages) else Page([])
        catalog.pages = number
        valid = []
        for i, item in enumerate(page.items):
            problem = _base_problem(kind, item, key_field)
            if problem:
                catalog.diag(f"{_label(item, key_field, number, i)} skipped: {problem}")
            else:
                valid.append(item)
        rejected: set[int] = set()
        notes: dict[int, dict[str, Any]] = {}
        if valid:
            for plugin, v in decide(CatalogPage(kind=kind, number=number, items=tuple(valid))):
                if v.action == "reject" and v.index not in rejected:
                    rejected.add(v.index)
                    catalog.diag(
                        f"{_label(valid[v.index], key_field, number, v.index)} rejected by {plugin}: {v.reason}"
                    )
                elif v.action == "annotate":
                    notes.setdefault(v.index, {})[v.key] = v.value
        for i, item in enumerate(valid):
            if i in rejected:
                continue
            key = item[key_field]
            if key in index:
                if index[key] != item:
                    catalog.diag(
                        f"page {number}: duplicate {key_field} {key[:80]!r} differs from the first; first kept"
                    )
                continue
            if len(index) >= max_items:
                catalog.complete = False
                catalog.diag(f"more than {max_items} {kind}; the rest is dropped")
                catalog.items = list(index.values())
                return catalog
            index[key] = item
            if i in notes:
                catalog.notes[key] = notes[i]
        if page.next is None:
            break
        if page.next in seen:
            catalog.complete = False
            catalog.diag(f"page {number}: cursor repeated; stopped with {len(index)} items")
            break
        seen.add(page.next)
    else:
        catalog.complete = False
        catalog.diag(f"more than {max_pages} pages; stopped with {len(index)} items")
    catalog.items = list(index.values())
    return catalog


_shared = tool("s", 7)  # one object listed more than once
_any_items = st.lists(
    st.one_of(
        st.builds(tool, st.sampled_from("abcdef"), st.integers(0, 1)),
        st.just(_shared),
        st.sampled_from(
            [
                "junk",
                None,
                {"name": ""},
                {"name": 5, "inputSchema": {"type": "object"}},
                {"name": "x" * 2049},
                {"name": "x" * 2048},
                {"name": "a", "inputSchema": []},
                {"name": "b", "inputSchema": None, "description": None},
                {"name": "c", "description": 3},
                {"name": "d", "description": "", "uri": "u"},
                {"uri": "file:///r", "name": "r"},
                {"name": "p", "arguments": [{"name": "x"}, {"name": "x"}]},
            ]
        ),
    ),
    max_size=8,
)
_any_pages = st.lists(st.builds(Page, _any_items, _cursors), min_size=1, max_size=8)


@_SETTINGS
@given(
    kind=st.sampled_from(["tools", "prompts", "resources"]),
    pages=_any_pages,
    rejected=st.sets(st.sampled_from("abcdefsx")),
    noted=st.sets(st.sampled_from("abcdefsx")),
    max_pages=st.integers(1, 8),
    max_items=st.integers(1, 12),
)
def test_property_the_page_shortcuts_decide_like_the_plain_rules(kind, pages, rejected, noted, max_pages, max_items):
    def decide(page: CatalogPage):
        out = []
        for i, item in enumerate(page.items):
            name = str(item.get("name", ""))[:1]
            if name in rejected:
                out.append(("guard", Verdict.reject(i, "no")))
            if name in noted:
                out.append(("guard", Verdict.annotate(i, "seen", page.number)))
        return out

    async def judge(page: CatalogPage):
        return decide(page)

    got = run(kind, Pager(pages, field=kind), judge=judge, max_pages=max_pages, max_items=max_items)
    want = reference_walk(kind, pages, decide, max_pages, max_items)
    assert got.items == want.items and [id(t) for t in got.items] == [id(t) for t in want.items]
    assert got.notes == want.notes
    assert got.diagnostics == want.diagnostics
    assert (got.complete, got.pages) == (want.complete, want.pages)

"""Paginated, bounded, deduplicated, validated catalogs (tools, resources, resource templates, prompts).

One paginator follows ``nextCursor`` with hard bounds: at most ``max_pages`` pages and ``max_items``
items; a repeated cursor stops the walk; a failing later page keeps every item validated so far. In
each of those cases the catalog is kept, marked incomplete, and a diagnostic says why. Items are
deduplicated by their key (tool name, resource URI, template ``uriTemplate``, prompt name): the first wins, and a
duplicate
that differs from it is a diagnostic. Each page passes through ``kxen_catalog_page`` so plugins can
reject items one by one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import attrs

from kxen_core.protocol.catalog_reuse import Reuse
from kxen_core.protocol.catalog_rules import label, valid_items

if TYPE_CHECKING:
    from kxen_core.config.models import Settings

MAX_PAGES = 100
MAX_ITEMS = 10_000
MAX_CURSOR_CHARS = 4096
MAX_DIAGNOSTICS = 200

#: the list method, result field and identity key of each catalog kind
KINDS: dict[str, tuple[str, str, str]] = {
    "tools": ("tools/list", "tools", "name"),
    "resources": ("resources/list", "resources", "uri"),
    "resourceTemplates": ("resources/templates/list", "resourceTemplates", "uriTemplate"),
    "prompts": ("prompts/list", "prompts", "name"),
}
#: the server capability that makes each kind available (templates come with ``resources``)
CAPABILITY = {"tools": "tools", "resources": "resources", "resourceTemplates": "resources", "prompts": "prompts"}
#: (capability, first page request) of every kind, in the order a server lists them on connecting
FIRST_PAGES = tuple((CAPABILITY[kind], KINDS[kind][0]) for kind in KINDS)


def kinds_of(capability: str) -> tuple[str, ...]:
    """The catalog kinds a capability (or its ``list_changed`` notification) covers."""
    return tuple(kind for kind, cap in CAPABILITY.items() if cap == capability)


@attrs.frozen(kw_only=True)
class CatalogPage:
    """One fetched page, as plugins see it (read-only)."""

    kind: str
    number: int  # 1-based
    items: tuple[dict[str, Any], ...]
    settings: Settings | None = None  # the user's settings (limits for validation plugins)
    era: str | None = None  # the server's protocol era: "legacy" (handshake) or "modern" (2026-07-28)
    #: the indices of items the server listed before exactly so, which every plugin passed then (no
    #: note), with the same entry, settings and era (:mod:`kxen_core.protocol.catalog_reuse`)
    known: frozenset[int] = frozenset()


@attrs.frozen(kw_only=True)
class Verdict:
    """A plugin's judgement on one item of a page; build it with :meth:`reject` or :meth:`annotate`."""

    index: int
    action: str
    reason: str = ""
    key: str = ""
    value: Any = None

    @classmethod
    def reject(cls, index: int, reason: str) -> Verdict:
        return cls(index=index, action="reject", reason=reason)

    @classmethod
    def annotate(cls, index: int, key: str, value: Any) -> Verdict:
        return cls(index=index, action="annotate", key=key, value=value)


@attrs.define(kw_only=True)
class Catalog:
    kind: str
    items: list[dict[str, Any]] = attrs.field(factory=list)
    notes: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    diagnostics: list[str] = attrs.field(factory=list)
    complete: bool = True
    pages: int = 0
    #: what the next listing may take from this one (:mod:`kxen_core.protocol.catalog_reuse`)
    seen: dict[bytes, dict[str, Any]] = attrs.field(factory=dict, repr=False, eq=False)
    seen_pages: dict[bytes, Any] = attrs.field(factory=dict, repr=False, eq=False)
    context: tuple[Any, ...] = attrs.field(default=(), repr=False, eq=False)
    #: the ids of the items that are the objects of the catalog before (unchanged since: what was
    #: worked out for them holds)
    reused: set[int] = attrs.field(factory=set, repr=False, eq=False)

    def diag(self, message: str) -> None:
        if len(self.diagnostics) < MAX_DIAGNOSTICS:
            self.diagnostics.append(message)
        elif len(self.diagnostics) == MAX_DIAGNOSTICS:
            self.diagnostics.append("(further diagnostics dropped)")


Fetch = Callable[[str | None], Awaitable[dict[str, Any]]]
Judge = Callable[[CatalogPage], Awaitable[Sequence[tuple[str, Verdict]]]]


async def fetch_catalog(
    kind: str,
    fetch: Fetch,
    *,
    judge: Judge | None = None,
    max_pages: int = MAX_PAGES,
    max_items: int = MAX_ITEMS,
    before: Catalog | None = None,
    context: tuple[Any, ...] = (),
) -> Catalog:
    """Walk every page of ``kind`` through ``fetch(cursor)``; never raises for a later page.

    While a page is validated and judged, the next one is already being fetched when the walk will
    surely ask for it (a valid new cursor, a page left under ``max_pages``, and too few items on
    this page to reach ``max_items``): the same requests in the same order, each sent only after
    the answer before it, so the server's time overlaps kxen's. At most one page is held ahead.

    ``before``: the server's last catalog of ``kind``; an item equal to one it kept is that object
    again (:mod:`kxen_core.protocol.catalog_reuse`). ``context``: the objects the judge's verdicts
    depend on besides the page (the server's entry, the settings, the era, the plugins).
    """
    _, field, key_field = KINDS[kind]
    catalog = Catalog(kind=kind, context=context)
    reuse = Reuse(before, context)
    index: dict[str, dict[str, Any]] = {}
    seen_cursors: set[str] = set()
    cursor: str | None = None
    ahead: _Ahead | None = None
    for number in range(1, max_pages + 1):
        try:
            result = await fetch(cursor) if ahead is None else ahead.result()
        except Exception as exc:
            if number == 1:
                raise
            catalog.complete = False
            catalog.diag(f"page {number} failed ({type(exc).__name__}: {str(exc)[:200]}); kept {len(index)} items")
            break
        ahead = None
        catalog.pages = number
        raw = result.get(field)
        if type(raw) is not list:
            catalog.complete = False
            catalog.diag(f"page {number}: '{field}' is missing or not a list; kept {len(index)} items")
            break
        # where the walk goes after this page depends on the page's answer alone: decided first
        nxt = result.get("nextCursor")
        if nxt is None:
            stop: str | None = ""
        elif type(nxt) is not str or len(nxt) > MAX_CURSOR_CHARS:
            stop = "invalid nextCursor"
        elif nxt in seen_cursors:
            stop = "cursor repeated"
        else:
            stop = None
            seen_cursors.add(nxt)
            cursor = nxt
        if stop is None and number < max_pages and len(index) + len(raw) <= max_items:
            ahead = _Ahead(fetch, cursor)
            full = await ahead.beside(_take_page(catalog, index, kind, key_field, number, raw, judge, max_items, reuse))
        else:
            full = await _take_page(catalog, index, kind, key_field, number, raw, judge, max_items, reuse)
        if full:
            catalog.seen, catalog.seen_pages, catalog.reused = reuse.kept, reuse.pages, reuse.taken
            return catalog
        if stop is not None:
            if stop:
                catalog.complete = False
                catalog.diag(f"page {number}: {stop}; stopped with {len(index)} items")
            break
    else:
        catalog.complete = False
        catalog.diag(f"more than {max_pages} pages; stopped with {len(index)} items")
    catalog.items = list(index.values())
    catalog.seen, catalog.seen_pages, catalog.reused = reuse.kept, reuse.pages, reuse.taken
    return catalog


def _asyncio_task() -> asyncio.Task[Any] | None:
    """The asyncio task running this, or None (trio, a guest run)."""
    try:
        return asyncio.current_task()
    except RuntimeError:  # no asyncio loop running in this thread
        return None


class _Ahead:
    """The next page's fetch, run beside the judging of the current one; its error is kept for the
    walk to handle as if it had fetched the page itself (nothing escapes into the task group)."""

    __slots__ = ("_cursor", "_error", "_fetch", "_result")

    def __init__(self, fetch: Fetch, cursor: str | None) -> None:
        self._fetch, self._cursor = fetch, cursor
        self._result: dict[str, Any] | None = None
        self._error: Exception | None = None

    async def run(self) -> None:
        try:
            self._result = await self._fetch(self._cursor)
        except Exception as exc:
            self._error = exc

    async def beside(self, work: Coroutine[Any, Any, bool]) -> bool:
        """Await ``work`` while the fetch runs in its own task (started first, so its request goes out
        before the judging); the task has ended when this returns or raises. In an asyncio task the
        fetch is a bare asyncio task (a task group costs some fifty microseconds a page), elsewhere
        (trio, a guest run) a task group's."""
        if _asyncio_task() is None:
            return await self._in_task_group(work)
        child = asyncio.get_running_loop().create_task(self.run())
        try:
            await asyncio.sleep(0)
            done = await work
            await child  # ended already, but for a slow fetch
        except BaseException:  # cancelled, or ``work`` failed: the fetch ends before this does
            work.close()  # cancelled before it started: never awaited, and no warning saying so
            if not child.done():
                child.cancel()
                with anyio.CancelScope(shield=True):
                    await asyncio.wait((child,))
            raise
        return done

    async def _in_task_group(self, work: Coroutine[Any, Any, bool]) -> bool:
        error: Exception | None = None
        done = False
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.run)
            try:
                await anyio.lowlevel.checkpoint()
                done = await work
            except Exception as exc:  # raised as itself below, not in the task group's ExceptionGroup
                error = exc
                tg.cancel_scope.cancel()
            finally:
                work.close()
        if error is not None:
            raise error
        return done

    def result(self) -> dict[str, Any]:
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


async def _take_page(
    catalog: Catalog,
    index: dict[str, dict[str, Any]],
    kind: str,
    key_field: str,
    number: int,
    raw: list[Any],
    judge: Judge | None,
    max_items: int,
    reuse: Reuse,
) -> bool:
    """Validate, judge and deduplicate one page into ``index``; True when ``max_items`` was passed
    (then ``catalog`` is final)."""
    # core rules first, then the plugins' verdicts on what survived; a page kept before, sent
    # again unchanged, passed the core rules then (protocol.catalog_reuse)
    hit = reuse.take_page(raw)
    if hit is not None:
        valid, keys, known = hit
    else:
        valid, keys, known = valid_items(catalog, kind, key_field, number, raw, reuse)
    rejected: set[int] = set()
    annotations: dict[int, dict[str, Any]] = {}
    if judge is not None and valid:
        page = CatalogPage(kind=kind, number=number, items=tuple(valid), known=known)
        try:
            verdicts = await judge(page)
        except Exception as exc:
            catalog.diag(f"page {number} rejected whole: {exc}")
            verdicts = [("", Verdict.reject(i, "page rejected")) for i in range(len(valid))]
        for plugin, v in verdicts:
            if not (0 <= v.index < len(valid)):
                continue
            if v.action == "reject":
                if v.index not in rejected:
                    rejected.add(v.index)
                    who = f" by {plugin}" if plugin else ""
                    catalog.diag(f"{label(valid[v.index], key_field, number, v.index)} rejected{who}: {v.reason}")
            elif v.action == "annotate":
                annotations.setdefault(v.index, {})[v.key] = v.value
    if not rejected and not annotations and len(index) + len(valid) <= max_items:
        # the common page: nothing rejected or annotated, no room to pass max_items; the first wins
        reuse.keep_page(valid, keys, whole=len(valid) == len(raw))
        setdefault = index.setdefault
        for item in valid:
            kept = setdefault(item[key_field], item)
            if kept is not item and kept != item:
                key = item[key_field]
                catalog.diag(f"page {number}: duplicate {key_field} {key[:80]!r} differs from the first; first kept")
        return False
    for i, item in enumerate(valid):
        if i in rejected:
            continue
        key = item[key_field]
        first = index.get(key)
        if first is not None:
            if first != item:
                catalog.diag(f"page {number}: duplicate {key_field} {key[:80]!r} differs from the first; first kept")
            continue
        if len(index) >= max_items:
            catalog.complete = False
            catalog.diag(f"more than {max_items} {kind}; the rest is dropped")
            catalog.items = list(index.values())
            return True
        index[key] = item
        if i in annotations:
            catalog.notes[key] = annotations[i]  # notes follow the item that is kept, not its duplicates
        else:
            reuse.keep(keys[i], item)
    return False

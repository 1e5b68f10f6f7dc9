"""What a listing takes from the listing before it: the same objects for the same items.

A server lists the same items again and again (every ``list_changed``, every refresh), and most of
them have not changed. Each item of a new page is keyed by its exact content; an item equal to one
the server listed before is replaced by that earlier object, so the catalog holds one object per
distinct item (the new copy is freed at once), comparisons of unchanged items are identity checks,
and what later steps worked out for an object (a pin digest, a schema's bounds) still holds for
it. The key is :mod:`marshal`'s encoding hashed with BLAKE2b: marshal writes every JSON value in
full with its type (``true`` and ``1``, ``1`` and ``1.0``, ``0.0`` and ``-0.0`` differ) and its keys
in order, so equal keys mean equal values -- a changed item always gets a new object. The converse
holds for what a transport hands over (two parses of the same text get the same key) but not for
every pair of equal values: marshal writes an object shared within the value as a back-reference,
depending on its reference count. Such a pair costs a reuse missed, never a change missed.

Items a plugin passed then are named to the plugins again (``CatalogPage.known``) only when the
judging context is equal to that of then (the server's entry, the settings, the era, the plugins): a plugin
may skip what it already judged. Every plugin is still called for every page.
"""

from __future__ import annotations

import hashlib
import marshal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kxen_core.protocol.catalog import Catalog


def content_key(item: Any) -> bytes | None:
    """An exact key of a JSON value (16 bytes), or None for one marshal cannot write (nested too deeply)."""
    try:
        return hashlib.blake2b(marshal.dumps(item), digest_size=16).digest()
    except (ValueError, RecursionError):
        return None


class Reuse:
    """One listing's use of the listing before it, and what it keeps for the next one: the items
    every plugin passed with no note, by content key, and the pages made only of such items (a page
    the server sends again unchanged is taken whole, with one key for the page)."""

    __slots__ = ("_items", "_pages", "_same", "kept", "page_key", "pages", "taken")

    def __init__(self, before: Catalog | None, context: tuple[Any, ...]) -> None:
        self._items = before.seen if before is not None else {}
        self._pages = before.seen_pages if before is not None else {}
        self._same = before is not None and before.context == context
        self.kept: dict[bytes, dict[str, Any]] = {}
        self.pages: dict[bytes, tuple[list[dict[str, Any]], list[bytes | None]]] = {}
        self.page_key: bytes | None = None  # the key of the page taken last (take_page)
        self.taken: set[int] = set()  # the ids of the earlier objects taken (alive: the catalog holds them)

    def take_page(self, raw: list[Any]) -> tuple[list[dict[str, Any]], list[bytes | None], frozenset[int]] | None:
        """The earlier page's items, their keys and the known indices, when ``raw`` (a page as the
        server sent it) is a page kept before, every item of it still equal; else None. Either way
        the page's key is kept for :meth:`keep_page`."""
        self.page_key = key = content_key(raw)
        earlier = self._pages.get(key) if key is not None else None
        if earlier is None or earlier[0] != raw:  # not equal: an earlier object was changed in place
            return None
        items, keys = earlier
        self.taken.update(map(id, items))
        return items, keys, frozenset(range(len(items))) if self._same else frozenset()

    def take(self, items: list[dict[str, Any]]) -> tuple[list[bytes | None], frozenset[int]]:
        """Replace (in ``items``) each item equal to one listed before by that one; returns each
        item's key and the indices of the items every plugin passed then, in this context. An
        earlier object is taken only while it is still equal to the new item (nobody changed it in
        place: a host must copy a schema before changing it)."""
        before, keys, known = self._items, [], []
        for i, item in enumerate(items):
            key = content_key(item)
            keys.append(key)
            if key is not None:
                earlier = before.get(key)
                if earlier is not None and earlier == item:
                    items[i] = earlier
                    self.taken.add(id(earlier))
                    known.append(i)
        return keys, (frozenset(known) if self._same else frozenset())

    def keep(self, key: bytes | None, item: dict[str, Any]) -> None:
        """``item`` passed every plugin with no note: the next listing may take it."""
        if key is not None:
            self.kept[key] = item

    def keep_page(self, items: list[dict[str, Any]], keys: list[bytes | None], whole: bool) -> None:
        """Every item of the page passed every plugin with no note; ``whole``: none of the page
        was skipped either (the next listing may take the page whole)."""
        kept = self.kept
        for key, item in zip(keys, items, strict=True):
            if key is not None:
                kept[key] = item
        if whole and self.page_key is not None:
            self.pages[self.page_key] = (items, keys)


__all__ = ["Reuse", "content_key"]

"""One server's catalogs: listing them, the model-facing tool names, and ``list_changed`` refetches.

:class:`CatalogLists` is the part of :class:`kxen_core.runtime.server.Server` that lists: each kind goes
through :func:`kxen_core.protocol.catalog.fetch_catalog` (bounded pages, the core's item rules, every
``kxen_catalog_page`` verdict), and the tools catalog also gets its model-facing names
(:mod:`kxen_core.agent.tool_names`): ``tool_names`` (tool -> model name) and ``model_tools`` (model name ->
tool), replaced together with the catalog so a call never sees one without the other.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from kxen_core.agent.tool_names import assign
from kxen_core.errors import ClosedError, RequestError
from kxen_core.hookcall import acall_all
from kxen_core.protocol.catalog import KINDS, Catalog, CatalogPage, Verdict, fetch_catalog
from kxen_core.protocol.era import era_of, ttl_seconds
from kxen_core.runtime.failures import failure_text

log = logging.getLogger("kxen.server")

if TYPE_CHECKING:
    from collections.abc import Container

    import anyio.abc

    from kxen_core.config import ServerConfig
    from kxen_core.protocol.session import Session

#: a burst of ``list_changed`` within this many seconds becomes one refetch
LIST_CHANGED_DEBOUNCE = 0.05
#: a catalog whose caching hint (``ttlMs``, stateless era) runs out is fetched again, at most this often
MIN_TTL_SECONDS = 5.0
#: and at least this often (a day), however long the hint
MAX_TTL_SECONDS = 86400.0


class CatalogLists:
    """Mixed into ``Server``: the attributes below are the server's own (attrs fields there)."""

    if TYPE_CHECKING:
        env: Any
        config: ServerConfig
        session: Session | None
        catalogs: dict[str, Catalog]
        tools_by_name: dict[str, dict[str, Any]]
        tool_names: dict[str, str]
        model_tools: dict[str, str]
        _tg: anyio.abc.TaskGroup | None
        _refreshing: set[str]
        _changed_early: set[str]
        _expiring: dict[str, float]
        _expiry_running: set[str]
        listener: Any

        @property
        def name(self) -> str: ...

        def changed(self) -> None: ...

        def refilter_tools(self) -> None: ...

        def diag(self, message: str) -> None: ...

        async def pin_tools(
            self, tools: dict[str, dict[str, Any]], unchanged: Container[int] = ()
        ) -> dict[str, dict[str, Any]]: ...

    async def refresh(self, kind: str) -> Catalog:
        """Fetch the ``kind`` catalog again (``tools``, ``resources``, ``resourceTemplates`` or
        ``prompts``) and return it.

        Raises ``KeyError`` for an unknown kind and what the listing raises (a request error, a
        closed connection); the catalog kept so far stays when the fetch fails.
        """
        if kind not in KINDS:
            raise KeyError(f"unknown catalog kind {kind!r} (one of {', '.join(KINDS)})")
        await self._list(kind, required=True)
        return self.catalogs[kind]

    async def refetch_tools(self) -> None:
        """Fetch the tools again, keeping what there is if that fails (after a stateless-era header
        mismatch: the tools' ``x-mcp-header`` annotations may have changed)."""
        await self._list("tools", required=False)

    def tool_for(self, model_name: str) -> str | None:
        """The server's own name of the tool the model knows as ``model_name``, if it has one."""
        return self.model_tools.get(model_name)

    async def _list(self, kind: str, *, required: bool) -> None:
        assert self.env is not None
        method = KINDS[kind][0]
        session = self.session
        if session is None:
            raise ClosedError(f"server {self.name!r} is not connected", server=self.name)
        pm, settings, server = self.env.pm, self.env.settings, self.config
        hints: list[float | None] = []  # the first page's caching hint

        async def fetch(cursor: str | None) -> dict[str, Any]:
            # the first page may be on its way already, sent with the handshake (kxen_core.protocol.handshake)
            begun = session.prefetched.pop(method, None) if cursor is None else None
            if begun is not None:
                result = await session.finish(begun)
            else:
                result = await session.request(method, {"cursor": cursor} if cursor is not None else None)
            if not hints:
                hints.append(ttl_seconds(result))
            return result

        era = era_of(session)

        async def judge(page: CatalogPage) -> list[tuple[str, Verdict]]:
            page = attrs.evolve(page, settings=settings, era=era)
            answers = await acall_all(pm, "kxen_catalog_page", server=server, kind=kind, page=page)
            return [(plugin, v) for plugin, verdicts in answers for v in verdicts]

        started = time.monotonic()
        try:  # what the last listing kept is taken again where it is unchanged (protocol.catalog_reuse)
            before, context = self.catalogs.get(kind), (server, settings, era, tuple(pm.list_name_plugin()))
            catalog = await fetch_catalog(kind, fetch, judge=judge, before=before, context=context)
        except (RequestError, ClosedError) as exc:
            if required:
                raise
            self.diag(f"{method} failed: {exc}")
            return
        if kind == "tools":
            names = [t["name"] for t in catalog.items]  # distinct: the catalog is deduplicated
            dropped: list[str] = []
            if names == list(self.tool_names):
                # the same tools in the same order (a refetch of an unchanged catalog): the maps
                # ``assign`` made of them stand, since it depends on the server's and tools' names only
                by_tool, by_model = self.tool_names, self.model_tools
            else:
                by_tool, by_model, dropped = assign(self.name, names)
            for reason in dropped:
                catalog.diag(reason)
            if dropped:
                catalog.items = [t for t in catalog.items if t["name"] in by_tool]
                names = [t["name"] for t in catalog.items]
        if log.isEnabledFor(logging.INFO):
            ms = (time.monotonic() - started) * 1000
            log.info("%s: listed %d %s in %.1f ms", self.name, len(catalog.items), kind, ms)
        for message in catalog.diagnostics:
            self.diag(f"{kind}: {message}")
        if kind == "tools":  # checked against their pins first: a held tool is never shown (server_pins)
            shown = await self.pin_tools(dict(zip(names, catalog.items, strict=True)), unchanged=catalog.reused)
        self.catalogs[kind] = catalog
        if kind == "tools":
            self.tools_by_name = shown
            self.tool_names, self.model_tools = by_tool, by_model
            self.refilter_tools()  # what the model is not shown of them, and why (server_filters)
        if session.modern is not None and hints and hints[0]:
            self._expire_after(kind, hints[0])
        self.changed()  # its counts may have changed

    def _expire_after(self, kind: str, seconds: float) -> None:
        """Fetch ``kind`` again once its caching hint runs out (the stateless era has no
        ``list_changed`` without a listen stream): one timer per kind, bounded in rate; none while
        an open listen stream carries that kind's changes (:mod:`kxen_core.protocol.listen`)."""
        self._expiring[kind] = min(max(seconds, MIN_TTL_SECONDS), MAX_TTL_SECONDS)
        if self._tg is not None and kind not in self._expiry_running and not self._listened(kind):
            self._expiry_running.add(kind)
            self._tg.start_soon(self._expire_later, kind)

    def start_expiry(self) -> None:
        """Once ready: start the timers of the catalogs listed with a caching hint (those of an
        earlier connection ended with it)."""
        self._expiry_running.clear()
        for kind in list(self._expiring):
            self._expire_after(kind, self._expiring[kind])

    def resume_expiry(self) -> None:
        """The listen stream was given up: the timers of the catalogs it covered run again."""
        for kind in list(self._expiring):
            self._expire_after(kind, self._expiring[kind])

    def _listened(self, kind: str) -> bool:
        """Whether ``kind``'s changes come on an open listen stream (no timer needed)."""
        listener = self.listener
        return listener is not None and listener.covers(kind)

    async def _expire_later(self, kind: str) -> None:
        await anyio.sleep(self._expiring.get(kind, MIN_TTL_SECONDS))
        self._expiry_running.discard(kind)
        if self._listened(kind):
            return  # its changes come on the listen stream (a timer started before it was acknowledged)
        self._expiring.pop(kind, None)
        try:
            await self._list(kind, required=False)
        except Exception as exc:  # a plugin bug in a refresh must not end the server
            self.diag(f"refreshing {kind} failed: {failure_text(exc)}")

    def _list_changed(self, kind: str) -> None:
        if kind not in KINDS:
            return
        if self._tg is None:
            self._changed_early.add(kind)  # still listing: refetch once ready
        elif kind not in self._refreshing:
            self._refreshing.add(kind)
            self._tg.start_soon(self._refresh_later, kind)

    async def _refresh_later(self, kind: str) -> None:
        await anyio.sleep(LIST_CHANGED_DEBOUNCE)  # a burst of list_changed becomes one refetch
        self._refreshing.discard(kind)
        try:
            await self._list(kind, required=False)
        except Exception as exc:  # a plugin bug in a refresh must not end the server
            self.diag(f"refreshing {kind} failed: {failure_text(exc)}")


__all__ = ["LIST_CHANGED_DEBOUNCE", "MIN_TTL_SECONDS", "CatalogLists"]

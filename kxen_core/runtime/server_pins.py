"""One server's pinned tools: each tools listing is checked against the pin store before the model
sees it (:mod:`kxen_core.policy.pins` says what the states mean).

:class:`PinnedTools` is the part of :class:`kxen_core.runtime.server.Server` that does it, once per
listing (its start, a ``list_changed`` refetch, a refresh, an acceptance): it digests the listed
tools, merges them into the store (a write only when something changed: the first listing of an
identity, a change, a new tool), and leaves ``held_tools`` (kept from the model, calls refused:
``pinning: hold``), ``unaccepted`` (shown, but a call the policy allows asks again: ``warn``),
``pin_digests`` and ``pin_states`` (what approvals are bound to). A call reads these dicts only
(:mod:`kxen_core.runtime.calls`); nothing on the call path reads the store.
"""

from __future__ import annotations

import operator
from collections.abc import Container
from typing import TYPE_CHECKING, Any

import attrs

from kxen_core.errors import ToolHeld
from kxen_core.policy import pins
from kxen_core.safe_text import safe_text

if TYPE_CHECKING:
    from kxen_core.config import ServerConfig
    from kxen_core.launch.resolve import Launch
    from kxen_core.protocol.session import Session


@attrs.frozen(kw_only=True)
class Held:
    """A tool a person has to look at: its state (``changed``, ``new``, ``unchecked``), the
    top-level keys of its definition that changed, and why, as a person reads it."""

    tool: str
    state: str
    fields: tuple[str, ...] = ()
    reason: str = ""

    def as_json(self, server: str) -> dict[str, Any]:
        return {"server": server, "tool": self.tool, "state": self.state, "fields": list(self.fields),
                "reason": self.reason, "next": next_step(server, self)}  # fmt: skip


def next_step(server: str, held: Held) -> str:
    if held.state == "unchecked":
        return "fix or move away the pin store named in the reason, then restart the server"
    return f"kxen mcp pins diff {server} {held.tool}, then kxen mcp pins accept {server} {held.tool}"


def _same_items(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether ``new`` holds the very objects of ``old``, under the same names in the same order."""
    if old is new or len(old) != len(new) or list(old) != list(new):
        return old is new
    return all(map(operator.is_, old.values(), new.values()))  # same names in the same order: C loops only


def _reason(state: str, fields: tuple[str, ...], problem: str | None) -> str:
    if state == "changed":
        return f"its definition changed since it was accepted ({', '.join(fields) or 'definition'})"
    if state == "new":
        return "it is new since the server's tools were pinned"
    return f"it could not be checked against its pin: {problem}"


def held_error(server: str, held: Held, model_name: str | None = None) -> ToolHeld:
    """The refusal of a call of a held tool: nothing was sent."""
    label = f"{server}__{held.tool}"
    what = "its definition changed" if held.state == "changed" else "it is new" if held.state == "new" else None
    agent = (
        f"{model_name or label} is held: {what} and the user has not accepted it yet"
        if what
        else f"{model_name or label} is held: its definition could not be checked"
    )
    return ToolHeld(
        f"{label} is held (pinning hold): {held.reason}; nothing was sent. Next: {next_step(server, held)}",
        server=server,
        tool=held.tool,
        for_agent=agent,
    )


class PinnedTools:
    """Mixed into ``Server``: the attributes below are the server's own (attrs fields there)."""

    if TYPE_CHECKING:
        env: Any
        config: ServerConfig
        launch: Launch | None
        session: Session | None
        tools_by_name: dict[str, dict[str, Any]]
        listed_tools: dict[str, dict[str, Any]]
        held_tools: dict[str, Held]
        unaccepted: dict[str, Held]
        pin_digests: dict[str, str]
        pin_states: dict[str, str]
        _pin_session: Any
        _pin_listing: dict[str, Any]
        _pin_dry: Any

        @property
        def name(self) -> str: ...

        def diag(self, message: str) -> None: ...

        def changed(self) -> None: ...

    @property
    def pinning(self) -> str:
        return pins.mode_of(self.config)

    async def pin_tools(
        self, tools: dict[str, dict[str, Any]], unchanged: Container[int] = ()
    ) -> dict[str, dict[str, Any]]:
        """The tools of this listing the model may see (the held ones left out), after checking
        every one against the pin store. ``unchanged``: the ids of the tools that are the objects
        of the last listing, unchanged (``Catalog.reused``): their digests are taken again."""
        if _same_items(self.listed_tools, tools):
            tools = self.listed_tools  # what was worked out for the last one (by identity) still holds
        await self._judge(tools, unchanged)
        self.listed_tools = tools  # with the verdicts on it: never one without the other
        held = self.held_tools
        return {n: t for n, t in tools.items() if n not in held} if held else tools

    async def repin(self) -> None:
        """Check the last listing again (after an acceptance or a reset): what the model sees
        changes at once, without asking the server."""
        if self.tools_by_name or self.listed_tools:
            self.tools_by_name = await self.pin_tools(self.listed_tools)
            self.changed()

    async def _judge(self, tools: dict[str, dict[str, Any]], unchanged: Container[int]) -> None:
        mode = self.pinning
        # a tool that is the same object as in the last listing (protocol.catalog_reuse) has its digest
        listing = pins.listing_of(tools, before=(self.listed_tools, self._pin_listing), unchanged=unchanged)
        same = listing is self._pin_listing
        self._pin_listing = listing
        problem = None
        merged = pins.Merged()
        if mode == "off":
            merged.states = dict.fromkeys(listing, "unpinned")
        else:
            merged, problem = await self._merge(listing, mode)
        held: dict[str, Held] = {}
        unaccepted: dict[str, Held] = {}
        for name, state in merged.states.items():
            if state in pins.UNACCEPTED:
                fields = merged.fields.get(name, ())
                entry = Held(tool=name, state=state, fields=fields, reason=_reason(state, fields, problem))
                (held if mode == "hold" else unaccepted)[name] = entry
        before = (set(self.held_tools), set(self.unaccepted))
        self.held_tools, self.unaccepted = held, unaccepted
        digests = self.pin_digests if same else {n: v[0] for n, v in listing.items()}
        if digests != self.pin_digests:  # equal ones stay the same object: its users cache by identity
            self.pin_digests = digests
        if merged.states != self.pin_states:
            self.pin_states = merged.states
        self._tell(merged, before)

    async def _merge(self, listing: dict[str, Any], mode: str) -> tuple[pins.Merged, str | None]:
        from kxen_core.policy.approvals import server_identity
        from kxen_core.policy.pin_store import PinStoreError, now, pin_store

        store = pin_store()
        identity = server_identity(self.config, self.launch)
        key = pins.identity_key(identity)
        session = self.session
        fresh = self._pin_session is not None and self._pin_session is session
        kwargs: dict[str, Any] = {"identity": identity, "server": self.name, "listing": listing, "mode": mode,
                                  "fresh_session": fresh, "stamp": now(), "where": str(store.path)}  # fmt: skip
        merged: pins.Merged | None = None
        try:
            doc, depends = store.document(), (key, mode, fresh, self.name, identity)
            last = self._pin_dry
            if (  # the same listing against the same cached document: the answer of last time
                last is not None
                and last[0] is doc
                and last[1] is listing
                and last[2] == depends
                and not last[3].changed
                and pins.seen_recently(doc, key, kwargs["stamp"])
            ):
                merged = last[3]
            else:
                merged = pins.dry_merge(doc, key, **kwargs)
                self._pin_dry = (doc, listing, depends, merged)
            if merged.changed:

                def change(doc: dict[str, Any]) -> tuple[bool, pins.Merged]:
                    done = pins.merge(doc, key, **kwargs)
                    return done.changed, done

                merged = await store.aupdate_if(change)
        except (PinStoreError, OSError) as exc:
            problem = safe_text(str(exc) if isinstance(exc, PinStoreError) else f"{store.path}: {exc}")
            # what is known to be pinned stays pinned; nothing else is (fail closed: held with hold)
            known = merged.states if merged is not None else {}
            out = pins.Merged(states={n: "pinned" if known.get(n) == "pinned" else "unchecked" for n in listing})
            return out, problem
        if merged.fresh:
            self._pin_session = session  # this connection's later listings pin what they add
        return merged, None

    def _tell(self, merged: pins.Merged, before: tuple[set[str], set[str]]) -> None:
        name = self.name
        for tool, entry in self.held_tools.items():
            if tool not in before[0]:
                self.diag(f"tools: {tool} held: {entry.reason}; next: {next_step(name, entry)}")
        for tool, entry in self.unaccepted.items():
            if tool not in before[1]:
                self.diag(
                    f"tools: {tool}: {entry.reason} (pinning warn: still shown; a call asks again); "
                    f"next: {next_step(name, entry)}"
                )
        for tool, state in merged.states.items():
            if state == "added":
                self.diag(f"tools: {tool} is new since the server's tools were pinned: pinned (pinning warn)")
        if (set(self.held_tools), set(self.unaccepted)) != before:
            env = self.env
            if env is not None and env.pins_changed is not None:
                env.pins_changed(self)

    def pin_view(self) -> dict[str, Any]:
        """The status entry's part: ``pinning`` (the mode), ``held`` (tools kept from the model) and
        ``unaccepted`` (shown, changed since accepted: ``warn``), names sorted."""
        return {"pinning": self.pinning, "held": sorted(self.held_tools), "unaccepted": sorted(self.unaccepted)}


__all__ = ["Held", "PinnedTools", "held_error", "next_step"]

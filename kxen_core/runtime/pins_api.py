"""The Runtime's pin API (mixed into :class:`kxen_core.Runtime`): each server's pinned tool
definitions and the ones waiting for a person, what changed, accepting and forgetting them.

These work on the pin store (:mod:`kxen_core.policy.pin_store`) whether or not the runtime was
entered: ``kxen mcp pins ...`` runs them on a runtime it never enters, beside a kxen that runs
(which sees an acceptance at its next listing of the server, or its restart). On an entered
runtime an acceptance or a reset applies to the running server at once (:meth:`Server.repin`),
and a ``pins`` event of :meth:`settings_events` tells a Settings page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kxen_core.errors import InvalidArguments, UnknownTool

if TYPE_CHECKING:
    from pathlib import Path

    from kxen_core.config import Config, ServerConfig
    from kxen_core.runtime.server import Server
    from kxen_core.runtime.settings_events import EventHub


class PinsHost:
    """Mixed into :class:`kxen_core.Runtime`. The attributes below are the runtime's."""

    if TYPE_CHECKING:
        config: Config | None
        servers: dict[str, Server]
        workspace: Path
        _events: EventHub

        def load(self) -> Config: ...

    def _pins_changed(self, server: Server) -> None:
        self._events.publish(
            "pins", server=server.name, held=sorted(server.held_tools), unaccepted=sorted(server.unaccepted)
        )

    def _identity(self, name: str) -> tuple[ServerConfig, dict[str, Any]]:
        """The config a server runs with and its identity: the running server's, else resolved
        from the config (a local server's launch resolved, nothing started). ``UnknownTool`` for a
        name not configured, ``ConnectError`` for a launch that cannot be resolved."""
        from kxen_core.launch.resolve import resolve_launch
        from kxen_core.policy.approvals import server_identity

        running = self.servers.get(name)
        if running is not None and (running.launch is not None or running.config.is_remote):
            return running.config, server_identity(running.config, running.launch)
        config = self.config or self.load()
        entry = config.servers.get(name)
        if entry is None:
            raise UnknownTool(f"no server named {name[:40]!r} is configured")
        if entry.unread:
            raise InvalidArguments(f"server {name!r} is a project server of an untrusted workspace (kxen trust)")
        if entry.is_remote:
            return entry, server_identity(entry)
        return entry, server_identity(entry, resolve_launch(entry, self.workspace, canonical=True))

    def pins(self, server: str | None = None) -> list[dict[str, Any]]:
        """Each configured server's pins (or only ``server``'s): ``server``, ``scope``,
        ``pinning`` (hold, warn, off), ``identity`` (what the pins are bound to), ``pinned`` (the
        accepted definitions: ``tool``, ``digest``, ``accepted``), ``waiting`` (definitions a
        person has to look at: ``tool``, ``state`` changed or new, ``digest``, ``since``,
        ``fields``), ``held`` (the waiting tools kept from the model: ``hold``), ``unaccepted``
        (shown all the same: ``warn``) and ``error`` (why a server's identity is not known). Raises
        ``PinStoreError`` for a store kxen cannot use."""
        from kxen_core.errors import ConnectError
        from kxen_core.policy.pin_store import pin_store
        from kxen_core.policy.pins import identity_key, mode_of

        config = self.config or self.load()
        names = [server] if server is not None else sorted(config.servers)
        doc = pin_store().document()
        rows = []
        for name in names:
            try:
                entry, identity = self._identity(name)
            except (ConnectError, InvalidArguments) as exc:
                if server is not None:
                    raise
                rows.append({"server": name, "error": str(exc)})
                continue
            record = doc["servers"].get(identity_key(identity))
            rows.append(_row(name, entry, mode_of(entry), identity, record if isinstance(record, dict) else {}))
        return rows

    def held_tools(self, server: str | None = None) -> list[dict[str, Any]]:
        """The tools of the running servers (or ``server``'s) a person has to look at: ``server``,
        ``tool``, ``state`` (changed, new, unchecked), ``fields`` (what changed), ``reason``,
        ``next`` and ``held`` (True: kept from the model, calls refused; False: shown, calls ask)."""
        out = []
        for s in self.servers.values():
            if server is not None and s.name != server:
                continue
            out += [{**h.as_json(s.name), "held": True} for h in s.held_tools.values()]
            out += [{**h.as_json(s.name), "held": False} for h in s.unaccepted.values()]
        return out

    def pin_diff(self, server: str, tool: str) -> dict[str, Any]:
        """What changed in ``tool`` of ``server``: ``server``, ``tool``, ``state`` (changed or
        new), ``fields``, ``pinned`` and ``listed`` (the two digests; ``pinned`` None for a new
        tool), ``since`` and ``diff`` (a unified diff of the two definitions as pretty JSON, every
        character a server chose escaped). ``InvalidArguments`` when nothing waits for it."""
        from kxen_core.policy.pin_store import pin_store
        from kxen_core.policy.pins import changed_fields, diff, identity_key

        _entry, identity = self._identity(server)
        record = pin_store().document()["servers"].get(identity_key(identity))
        tools = record.get("tools") if isinstance(record, dict) else None
        pending = record.get("pending") if isinstance(record, dict) else None
        waiting = pending.get(tool) if isinstance(pending, dict) else None
        if not isinstance(waiting, dict):
            pinned = isinstance(tools, dict) and tool in tools
            what = "it is pinned and unchanged" if pinned else "it is not a tool this server listed"
            raise InvalidArguments(f"{tool[:80]!r} of server {server!r} waits for no acceptance: {what}")
        old = tools.get(tool) if isinstance(tools, dict) else None
        old_shape = old.get("definition") if isinstance(old, dict) else None
        new_shape = waiting.get("definition")
        fields = (
            changed_fields(old_shape, new_shape) if isinstance(old_shape, dict) and isinstance(new_shape, dict) else []
        )
        return {
            "server": server,
            "tool": tool,
            "state": waiting.get("kind", "changed"),
            "fields": list(fields),
            "pinned": old.get("digest") if isinstance(old, dict) else None,
            "listed": waiting.get("digest"),
            "since": waiting.get("since"),
            "diff": diff(tool, old, waiting),
        }

    async def accept_pin(self, server: str, tool: str | None = None, *, digest: str | None = None) -> list[str]:
        """Accept the waiting definition of ``tool`` of ``server`` (every waiting one when None):
        it becomes the pin, the tool is shown and callable (a running server at once; another
        kxen at its next listing). With ``digest`` (at least 12 hex characters, as
        :meth:`pin_diff` showed it) only if that definition is still the one waiting. Returns the
        tools accepted; ``InvalidArguments`` when ``tool`` waits for nothing."""
        from kxen_core.policy import pins
        from kxen_core.policy.pin_store import now, pin_store

        _entry, identity = self._identity(server)
        key, stamp = pins.identity_key(identity), now()

        def change(doc: dict[str, Any]) -> tuple[bool, list[str] | str]:
            try:
                accepted = pins.accept(doc, key, None if tool is None else [tool], digest, stamp)
            except ValueError as exc:
                return False, str(exc)
            return bool(accepted), accepted

        result = await pin_store().aupdate_if(change)
        if isinstance(result, str):
            raise InvalidArguments(f"server {server!r}: {result}")
        await self._repin(server)
        return result

    async def reset_pins(self, server: str) -> int:
        """Forget every pin of ``server`` (its identity's): its next listing pins its tools as
        they are then, as the first did (a running server's at once). Returns how many pinned or
        waiting definitions were forgotten."""
        from kxen_core.policy.pin_store import pin_store
        from kxen_core.policy.pins import identity_key

        _entry, identity = self._identity(server)
        key = identity_key(identity)

        def change(doc: dict[str, Any]) -> tuple[bool, int]:
            record = doc["servers"].pop(key, None)
            if not isinstance(record, dict):
                return False, 0
            return True, sum(len(record.get(p) or ()) for p in ("tools", "pending"))

        forgotten = await pin_store().aupdate_if(change)
        await self._repin(server)
        return forgotten

    async def _repin(self, name: str) -> None:
        running = self.servers.get(name)
        if running is not None:
            await running.repin()
            self._pins_changed(running)


def _row(name: str, entry: ServerConfig, mode: str, identity: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    tools: dict[str, Any] = record["tools"] if isinstance(record.get("tools"), dict) else {}
    pending: dict[str, Any] = record["pending"] if isinstance(record.get("pending"), dict) else {}
    waiting = []
    for tool, w in sorted(pending.items()):
        if isinstance(w, dict):
            old = tools.get(tool)
            old_shape = old.get("definition") if isinstance(old, dict) else None
            fields: Any = ()
            if isinstance(old_shape, dict) and isinstance(w.get("definition"), dict):
                from kxen_core.policy.pins import changed_fields

                fields = changed_fields(old_shape, w["definition"])
            waiting.append({"tool": tool, "state": w.get("kind", "changed"), "digest": w.get("digest"),
                            "since": w.get("since"), "fields": list(fields)})  # fmt: skip
    names = [w["tool"] for w in waiting]
    return {
        "server": name,
        "scope": entry.scope,
        "pinning": mode,
        "identity": identity,
        "pinned": [
            {"tool": t, "digest": r.get("digest"), "accepted": r.get("accepted")}
            for t, r in sorted(tools.items())
            if isinstance(r, dict)
        ],
        "waiting": waiting,
        "held": names if mode == "hold" else [],
        "unaccepted": names if mode == "warn" else [],
        "error": None,
    }


__all__ = ["PinsHost"]

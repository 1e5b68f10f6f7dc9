"""Pinned tool definitions: what a server's tools were when a person (or the first listing) accepted
them, and what a later listing changed.

The first time kxen lists the tools of a server identity (:func:`kxen_core.policy.approvals.server_identity`:
scope, kind, and the launch fingerprint of a local server or the canonical URL of a remote one), it
records a digest of each tool's definition (:data:`DEFINITION_KEYS`, canonical: key order,
whitespace and ``1.0`` against ``1`` never matter) in the pin store (:mod:`.pin_store`). The first
connection to a new identity pins every tool it lists (the first use is trusted: a burst of
``list_changed`` right after the start is part of it). From then on, each listing is compared:

- a tool whose digest is the pinned one is ``pinned``;
- a tool whose definition changed is ``changed``: its new definition waits in the store
  (``pending``) until a person accepts it (``kxen mcp pins accept``);
- a tool the pinned server did not list before is ``new``: with ``hold`` it waits the same way;
  with ``warn`` it is pinned at once (``added``: nothing was allowed under an older definition).

What a server's ``pinning`` makes of it (:func:`mode_of`): ``hold`` (the default for project and
remote servers) keeps a ``changed`` or ``new`` tool from the model and refuses its calls; ``warn``
(the default for a user's local server) shows a ``changed`` tool with a diagnostic, and a call that
the policy would allow asks again until it is accepted; ``off`` records nothing. A store kxen
cannot use makes every tool not known to be pinned ``unchecked``: held with ``hold`` (fail
closed), shown and asked again with ``warn``.

This module is the pure part (digests, the merge of a listing into the store's document, accept,
the diff a person reads); the runtime applies it (:mod:`kxen_core.runtime.server_pins`, and the
Runtime's pin API in :mod:`kxen_core.runtime.pins_api`).
"""

from __future__ import annotations

from collections.abc import Container
from typing import TYPE_CHECKING, Any

import attrs

from kxen_core.launch.canonical import fingerprint

if TYPE_CHECKING:
    from kxen_core.config.models import ServerConfig

#: what a tool's definition is: a change to any of these holds the tool (``_meta`` is not part of it)
DEFINITION_KEYS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations", "execution")
MODES = ("hold", "warn", "off")
#: a definition whose canonical JSON is longer is pinned by its digest only (no diff can show it)
MAX_DEFINITION_CHARS = 64 * 1024
#: the characters of definitions one server identity keeps for diffs; beyond it, digests only
DEFINITIONS_BUDGET = 512 * 1024
#: the most pinned (and the most waiting) definitions one server identity keeps: a catalog's bound
MAX_TOOLS = 10_000
#: a server's ``seen`` time is written again at most this often when nothing else changed (seconds)
SEEN_EVERY = 86400
#: the states that wait for a person (``unchecked``: the store could not be used)
UNACCEPTED = frozenset({"changed", "new", "unchecked"})


def mode_of(server: ServerConfig) -> str:
    """``hold``, ``warn`` or ``off``: the server's ``pinning``, else ``hold`` for a project or
    remote server and ``warn`` for a user's local one."""
    if server.pinning is not None:
        return server.pinning
    return "hold" if server.scope == "project" or server.is_remote else "warn"


def _normal(value: Any) -> Any:
    """``value`` with every integral float as an int (``1.0`` and ``1`` are one JSON number)."""
    kind = type(value)
    if kind is dict:
        return {k: _normal(v) for k, v in value.items()}
    if kind is list:
        return [_normal(v) for v in value]
    if kind is float and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def definition(tool: dict[str, Any]) -> dict[str, Any]:
    """The part of a listed tool that is pinned."""
    return {k: tool[k] for k in DEFINITION_KEYS if k in tool}


def tool_digest(tool: dict[str, Any]) -> str:
    """The canonical digest of a tool's definition (:func:`kxen_core.launch.canonical.fingerprint`)."""
    return fingerprint(_normal(definition(tool)))


def identity_key(identity: dict[str, Any]) -> str:
    """The store's key of a server identity."""
    return fingerprint(identity)


def listing_of(
    tools: dict[str, dict[str, Any]],
    before: tuple[dict[str, dict[str, Any]], dict[str, tuple[str, dict[str, Any], int]]] | None = None,
    unchanged: Container[int] = (),
) -> dict[str, tuple[str, dict[str, Any], int]]:
    """``{tool: (digest, definition, size)}`` of a listing: the digest as :func:`tool_digest`
    gives it, and the length of the canonical JSON it was taken over (one encoding per tool).
    ``before``: the tools of an earlier listing and their ``listing_of``; a tool that is the very
    object it was then, and whose id is in ``unchanged`` (``Catalog.reused``: its content was
    checked equal since), has its entry again."""
    import hashlib
    import json
    import re

    dumps, sha = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode, hashlib.sha256
    # how Python writes an integral float (``1.0``, ``-0.0``, ``1e+16``, ``1.5e+16``); a string that
    # looks so only costs the walk below
    integral = re.compile(r"\d\.0[,\]}]|\de[+-]").search
    out = {}
    old_tools, old = before if before is not None else ({}, {})
    # (map over builtins: no Python frame per tool)
    if (
        old_tools is tools
        and old
        and len(old) == len(tools)
        and all(map(unchanged.__contains__, map(id, tools.values())))
    ):
        return old  # the very listing of last time (the runtime keeps the same dict for it)
    for name, tool in tools.items():
        if id(tool) in unchanged and old_tools.get(name) is tool and name in old:
            out[name] = old[name]
            continue
        shape = {k: tool[k] for k in DEFINITION_KEYS if k in tool}
        text = dumps(shape)
        if integral(text):
            text = dumps(_normal(shape))
        out[name] = (sha(text.encode("utf-8", "surrogatepass")).hexdigest(), shape, len(text))
    return out


def _kept_chars(entry: dict[str, Any]) -> int:
    """The characters of the definitions an identity's entry keeps for diffs."""
    total = 0
    for part in ("tools", "pending"):
        for record in (entry.get(part) or {}).values():
            size = record.get("size") if isinstance(record, dict) else None
            if isinstance(size, int) and record.get("definition") is not None:
                total += size
    return total


class _Records:
    """Makes the records of one merge: a definition is kept (for a diff) while it is at most
    :data:`MAX_DEFINITION_CHARS` and the identity's kept definitions stay within
    :data:`DEFINITIONS_BUDGET`; else only its digest and size."""

    def __init__(self, entry: dict[str, Any]) -> None:
        self.entry = entry
        self.left: int | None = None  # counted on the first record made (a merge that writes)

    def __call__(self, digest: str, shape: dict[str, Any], size: int, **extra: Any) -> dict[str, Any]:
        if self.left is None:
            self.left = DEFINITIONS_BUDGET - _kept_chars(self.entry)
        keep = size <= MAX_DEFINITION_CHARS and size <= self.left
        if keep:
            self.left -= size
        return {"digest": digest, "definition": shape if keep else None, "size": size, **extra}


def _bound(records: dict[str, Any], listed: dict[str, Any], stamp_key: str) -> bool:
    """At most :data:`MAX_TOOLS` records: those of tools not listed now go, oldest first (a
    server that keeps renaming its tools cannot grow the store). Returns whether any went."""
    if len(records) <= MAX_TOOLS:
        return False

    def age(name: str) -> int:
        when = records[name].get(stamp_key) if isinstance(records[name], dict) else None
        return when if isinstance(when, int) else 0

    for name in sorted((n for n in records if n not in listed), key=age)[: len(records) - MAX_TOOLS]:
        del records[name]
    return True


def _digest_of(record: Any) -> str | None:
    return record.get("digest") if isinstance(record, dict) and isinstance(record.get("digest"), str) else None


@attrs.define
class Merged:
    """What one listing made of a server's pins: each tool's state, the top-level keys of each
    changed tool's definition that differ, whether the document changed, whether the identity was
    new (its first listing)."""

    states: dict[str, str] = attrs.field(factory=dict)
    fields: dict[str, tuple[str, ...]] = attrs.field(factory=dict)
    changed: bool = False
    fresh: bool = False


def _maps(entry: dict[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    tools, pending = entry.setdefault("tools", {}), entry.setdefault("pending", {})
    if not isinstance(tools, dict) or not isinstance(pending, dict):
        from kxen_core.policy.pin_store import PinStoreError

        raise PinStoreError(f"{where}: a server's 'tools' and 'pending' must be objects")
    return tools, pending


def merge(
    doc: dict[str, Any],
    key: str,
    *,
    identity: dict[str, Any],
    server: str,
    listing: dict[str, tuple[str, dict[str, Any], int]],
    mode: str,
    fresh_session: bool,
    stamp: int,
    where: str = "the pin store",
) -> Merged:
    """Merge ``listing`` into ``doc`` (changed in place) for identity ``key``; see the module
    docstring for the states. ``fresh_session``: this connection began with no pins for the
    identity (what it lists is pinned, not held)."""
    servers = doc.setdefault("servers", {})
    entry = servers.get(key)
    out = Merged(fresh=fresh_session or entry is None)
    if entry is None:
        entry = servers[key] = {"server": server, "identity": identity, "seen": stamp, "tools": {}, "pending": {}}
        out.changed = True
    tools, pending = _maps(entry, where)
    _record = _Records(entry)
    get_pin, states = tools.get, out.states
    for name, (digest, shape, size) in listing.items():
        record = get_pin(name)  # _digest_of, inline: this loop runs for every tool of every listing
        pinned = record.get("digest") if type(record) is dict else None
        if type(pinned) is not str:
            pinned = _digest_of(record)
        if pinned == digest:
            states[name] = "pinned"
            if pending and name in pending:
                del pending[name]  # back to what was accepted
                out.changed = True
        elif pinned is not None:
            out.states[name] = "changed"
            old = tools[name].get("definition")
            out.fields[name] = changed_fields(old, shape) if isinstance(old, dict) else ()
            if _digest_of(pending.get(name)) != digest:
                pending[name] = _record(digest, shape, size, since=stamp, kind="changed")
                out.changed = True
        elif out.fresh or mode == "warn":
            out.states[name] = "first" if out.fresh else "added"
            tools[name] = _record(digest, shape, size, accepted=stamp)
            pending.pop(name, None)
            out.changed = True
        else:
            out.states[name] = "new"
            if _digest_of(pending.get(name)) != digest:
                pending[name] = _record(digest, shape, size, since=stamp, kind="new")
                out.changed = True
    if _bound(tools, listing, "accepted") | _bound(pending, listing, "since"):
        out.changed = True
    if entry.get("server") != server:
        # the name last seen, for people reading the file: written with the next change, not for
        # itself (entries of one launch under several names would rewrite the file in turn)
        entry["server"] = server
    seen = entry.get("seen")
    if out.changed or not isinstance(seen, int) or stamp - seen > SEEN_EVERY:
        entry["seen"] = stamp
        out.changed = True
    return out


def dry_merge(doc: dict[str, Any], key: str, **kwargs: Any) -> Merged:
    """:func:`merge` on a copy of the identity's entry: what it would do, ``doc`` unchanged."""
    entry = doc.get("servers", {}).get(key)
    servers: dict[str, Any] = {}
    if isinstance(entry, dict):
        copy = dict(entry)
        for part in ("tools", "pending"):
            if isinstance(copy.get(part), dict):
                copy[part] = dict(copy[part])
        servers[key] = copy
    return merge({"servers": servers}, key, **kwargs)


def seen_recently(doc: dict[str, Any], key: str, stamp: int) -> bool:
    """Whether a merge at ``stamp`` that changes nothing else leaves the identity's ``seen`` time
    as it is (then a dry merge of the same listing into the same document answers as before)."""
    servers = doc.get("servers")
    entry = servers.get(key) if isinstance(servers, dict) else None
    seen = entry.get("seen") if isinstance(entry, dict) else None
    return isinstance(seen, int) and stamp - seen <= SEEN_EVERY


def changed_fields(old: dict[str, Any], new: dict[str, Any]) -> tuple[str, ...]:
    """The top-level keys of a definition whose values differ (canonically)."""
    return tuple(k for k in DEFINITION_KEYS if fingerprint(_normal(old.get(k))) != fingerprint(_normal(new.get(k))))


def accept(doc: dict[str, Any], key: str, tools: list[str] | None, digest: str | None, stamp: int) -> list[str]:
    """Move the pending definitions of ``tools`` (every pending one when None) to the pins; with
    ``digest`` (a prefix of at least 12 characters) only a pending definition of that digest.
    Returns the tools accepted. ``ValueError`` names a tool that waits for nothing."""
    entry = doc.get("servers", {}).get(key)
    if not isinstance(entry, dict):
        raise ValueError("nothing is pinned for this server yet: its next listing pins its tools")
    pinned, pending = _maps(entry, "the pin store")
    names = sorted(pending) if tools is None else list(tools)
    accepted = []
    for name in names:
        record = pending.get(name)
        if not isinstance(record, dict) or _digest_of(record) is None:
            state = "is pinned and unchanged" if name in pinned else "is not a tool this server listed"
            raise ValueError(f"{name!r} waits for no acceptance: it {state}")
        if digest is not None and not (len(digest) >= 12 and record["digest"].startswith(digest)):
            raise ValueError(
                f"{name!r} now waits with definition {record['digest'][:16]}, not {digest[:16]}: "
                "it changed again; see it with kxen mcp pins diff"
            )
        pinned[name] = {k: v for k, v in record.items() if k not in ("since", "kind")} | {"accepted": stamp}
        del pending[name]
        accepted.append(name)
    return accepted


def diff(tool: str, pinned: Any, pending: Any) -> str:
    """A unified diff of the pinned and the pending definition of ``tool`` as pretty JSON, safe on
    a terminal (every character a server chose is escaped)."""
    import difflib

    from kxen_core.safe_text import json_text

    def lines(record: Any) -> list[str]:
        if not isinstance(record, dict):
            return []
        shape = record.get("definition")
        if not isinstance(shape, dict):
            return [f"(a definition of {record.get('size')} characters: pinned by its digest {record.get('digest')})"]
        return json_text(shape, indent=2).splitlines()

    old, new = lines(pinned), lines(pending)
    head = (
        f"pinned {_digest_of(pinned) or '(none)'}"[:80],
        f"listed {_digest_of(pending) or '(none)'}"[:80],
    )
    out = difflib.unified_diff(old, new, fromfile=head[0], tofile=head[1], lineterm="", n=3)
    return "\n".join(out) or f"{tool}: no difference"


__all__ = [
    "DEFINITION_KEYS",
    "MODES",
    "UNACCEPTED",
    "Merged",
    "accept",
    "changed_fields",
    "definition",
    "diff",
    "dry_merge",
    "identity_key",
    "listing_of",
    "seen_recently",
    "merge",
    "mode_of",
    "tool_digest",
]

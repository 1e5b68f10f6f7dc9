"""The audit trail: a record of every decided call, never of its argument values.

What is recorded: every tool call the policy votes decided (and kxen's ``resources/read`` and
``prompts/get``, as the votes see them), once when it is decided (``"event": "decided"``: sent, or
why not) and, when it was sent, once when it ended (``"event": "ended"``, the same ``id``); a call
that ended before the writer made its decided line is one line (``"event": "call"``, both in it). A call
refused before the votes (an unknown tool, a server not ready, arguments the tool's
``inputSchema`` refuses) was not decided and is not recorded. The fields (docs/cli.md, ``kxen mcp
audit``):

* ``time`` (ISO 8601 UTC), ``pid``, ``id`` (unique per call), ``server`` and ``identity`` (what
  approvals bind to: scope, kind, the launch fingerprint of a local server or the canonical URL of
  a remote one -- a digest of it when it took ``${VAR}`` values or has a query, with the URL as
  ``shown`` with query values hidden), ``tool`` (or the method), ``method``, ``role``;
* ``pin``: the SHA-256 of the tool's definition as listed (:func:`.audit_shape.pin_digest`; null
  for a method);
* ``verdict``: ``allow``, ``deny``, ``asked-approved``, ``asked-denied`` or ``asked-timeout``;
  ``by``: the votes that made it (``plugin``, ``vote``, and the ``reason`` for the core's own
  votes only -- a plugin's reason may quote an argument); ``approval``: the channel that answered
  and how a yes is remembered (``once``, ``call``, ``tool``, ``always``; ``earlier``: approved
  before in this process or with ``--approve``);
* ``args``: the arguments' shape (:func:`.audit_shape.shape`), never a value; ``argsCut`` when it
  was bounded;
* ``voteMs``, ``askMs`` (a person's answer), ``serverMs``; ``result`` (``chars``: the characters
  of every string in the result, ``items``: its content items); ``error`` (``isError``, or the
  exception's ``type`` and its ``kxen`` class, and a JSON-RPC ``code``).

What the call path pays: with the trail off, one attribute test; on, a :class:`Note` told a few
times and monotonic clocks, the shape of the arguments (key names and types: text made from the
keys' kept JSON), the result's size (a bounded walk: the writer keeps no result alive) and two
records put on a queue. What stays the same between calls of one tool -- the server, its identity,
the tool, its pin, the role -- is JSON text made once per catalog entry (:meth:`Trail.prefix`);
the rest of each line (the verdict, the votes, the times) is made by the writer thread
(:mod:`.audit_file`), which also writes it: no file I/O on the event loop.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets as _random
import time
from typing import TYPE_CHECKING, Any

from kxen_core.policy import audit_file
from kxen_core.policy.audit_shape import CACHE_MOST, Keys, error_class, identity, pin_digest, result_size, shape

if TYPE_CHECKING:
    from pathlib import Path

    from kxen_core.config.models import ServerConfig
    from kxen_core.config.settings import AuditSettings
    from kxen_core.policy import ApprovalDecision, Vote

#: the core's own votes: their reasons name config keys and kinds, never a value
CORE_VOTES = frozenset({"kxen.config-policy", "kxen.roles", "kxen.safety", "kxen.argument-guard", "config", "pins"})
_V = audit_file.VERSION


class Trail:
    """One runtime's audit trail: the sink it writes to and what it keeps to make records cheap."""

    def __init__(self, directory: Path, settings: AuditSettings) -> None:
        self.directory = directory
        self.sink = audit_file.sink(directory, settings.max_file_bytes, settings.max_files)
        self.settings = settings
        self.keys = Keys()
        self.ids = itertools.count(1)
        self.run = _random.token_hex(4)  # with the count, a call's id: unique across processes and runs
        self.pid = os.getpid()
        # on the event loop: (config, launch, catalog entry, role, the JSON text) per (server, tool, method)
        self._prefixes: dict[tuple[str, str, str], tuple[Any, Any, Any, Any, str]] = {}
        # in the writer thread: the JSON text of each list of votes seen
        self._votes: dict[tuple[Vote, ...], str] = {}

    @property
    def path(self) -> Path:
        return self.sink.path

    def note(self) -> Note:
        return Note(self)

    def prefix(
        self, server: ServerConfig, launch: Any, tool: str, info: dict[str, Any] | None, role: Any, method: str
    ) -> str:
        """``"server":…,"identity":…,"tool":…,"method":…,"pin":…,"role":…`` for a call, made once per
        server config, launch, catalog entry and role."""
        key = (server.name, tool, method)
        known = self._prefixes.get(key)
        if (
            known is None
            or known[0] is not server
            or known[1] is not launch
            or known[2] is not info
            or known[3] != role
        ):
            if len(self._prefixes) >= CACHE_MOST:
                self._prefixes.clear()
            fields = {
                "server": server.name,
                "identity": identity(server, launch),
                "tool": tool,
                "method": method,
                "pin": pin_digest(info) if info else None,
                "role": role,
            }
            known = self._prefixes[key] = (server, launch, info, role, json.dumps(fields, separators=(",", ":"))[1:-1])
        return known[4]

    def votes_json(self, why: list[Vote]) -> str:
        """The ``by`` of a record (in the writer thread): each vote's plugin and decision, and the
        reason of the core's own votes."""
        key = tuple(why)
        known = self._votes.get(key)
        if known is None:
            if len(self._votes) >= CACHE_MOST:
                self._votes.clear()
            shown = [
                {"plugin": v.plugin, "vote": v.decision, **({"reason": v.reason} if v.plugin in CORE_VOTES else {})}
                for v in why
            ]
            known = self._votes[key] = json.dumps(shown, separators=(",", ":"))
        return known


class Note:
    """One call on its way: what the call path tells it (:meth:`begin`, :meth:`voted`,
    :meth:`asked`, :meth:`sending`, :meth:`replied`), and the records it queues (when sent or
    refused, and :meth:`ended` or :meth:`failed`)."""

    __slots__ = tuple(
        "trail prefix shape cut decision why answer n end merged started voted_at asked_at sent_at replied_at".split()
    )

    def __init__(self, trail: Trail) -> None:
        self.trail = trail
        self.prefix: str | None = None
        self.decision: str | None = None
        self.answer: ApprovalDecision | None = None
        self.sent_at = self.replied_at = 0.0
        #: how it ended, for the writer thread: (time, monotonic end, the result's size as JSON or
        #: None, its error class or None) -- made here: the writer keeps no result nor exception alive
        self.end: tuple[float, float, str | None, dict[str, Any] | None] | None = None
        self.merged = False  # the writer wrote the end in the decided line ("event": "call")

    def begin(
        self,
        server: ServerConfig,
        launch: Any,
        tool: str,
        info: dict[str, Any] | None,
        arguments: Any,
        role: str | None,
        secrets: Any,
        method: str = "tools/call",
    ) -> None:
        """The call is about to be voted on: its shape is taken now (the host may change the
        arguments once the call returned)."""
        trail = self.trail
        self.prefix = trail.prefix(server, launch, tool, info, role, method)
        self.shape, self.cut = shape(trail.keys, arguments, secrets)
        self.started = time.monotonic()

    def voted(self, decision: str, why: list[Vote]) -> None:
        self.decision, self.why = decision, why
        self.voted_at = time.monotonic()

    def asked(self, answer: ApprovalDecision) -> None:
        self.answer = answer
        self.asked_at = time.monotonic()

    def sending(self) -> None:
        """Allowed: the request goes out now; the decision is recorded."""
        self.sent_at = time.monotonic()
        self._decided(True, None)

    def replied(self) -> None:
        """The server's answer is in (what follows -- an ``outputSchema`` check -- is not server time)."""
        self.replied_at = time.monotonic()

    def ended(self, result: Any) -> None:
        if self.sent_at:
            error = {"isError": True} if isinstance(result, dict) and result.get("isError") else None
            self.end = (time.time(), self.replied_at or time.monotonic(), result_size(result), error)
            audit_file.submit(self.trail.sink, self, _ended_line)

    def failed(self, exc: BaseException) -> None:
        from kxen_core.errors import ApprovalDenied, PolicyDenied

        if self.decision is None or self.prefix is None:
            return  # not decided: refused before the votes
        if self.sent_at:
            self.end = (time.time(), time.monotonic(), None, error_class(exc))
            audit_file.submit(self.trail.sink, self, _ended_line)
        elif isinstance(exc, (PolicyDenied, ApprovalDenied)) and self.decision != "allow":
            self._decided(False, None)
        else:  # allowed (or asked) but not sent: the server stopped meanwhile, the call was cancelled
            self._decided(False, error_class(exc))

    def _decided(self, sent: bool, error: dict[str, Any] | None) -> None:
        if self.prefix is None or self.decision is None:
            return
        self.n = next(self.trail.ids)
        audit_file.submit(self.trail.sink, (self, time.time(), sent, error), _decided_line)

    def verdict(self) -> str:
        if self.decision != "ask":
            return self.decision or "deny"
        answer = self.answer
        if answer is not None and answer.approved:
            return "asked-approved"
        if answer is not None and answer.timed_out:
            return "asked-timeout"
        return "asked-denied"


# -- in the writer thread: a record's line ----------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def _decided_line(payload: tuple[Note, float, bool, dict[str, Any] | None]) -> str:
    """The ``decided`` line; ``call`` with the end in it when the call ended before this was made
    (most calls: their ``ended`` item is then skipped)."""
    note, when, sent, error = payload
    trail = note.trail
    end = note.end if sent else None
    if end is not None:
        note.merged = True
    parts = [
        f'{{"v":{_V},"event":"{"decided" if end is None else "call"}","id":"{trail.run}-{note.n}",'
        f'"time":"{audit_file.iso(when)}","pid":{trail.pid},',
        note.prefix or "",
        ',"args":',
        note.shape,
        ',"argsCut":true' if note.cut else "",
        f',"verdict":"{note.verdict()}","by":',
        trail.votes_json(note.why),
    ]
    answer = note.answer
    if answer is not None:
        if answer.channel == "process":
            remember: str | None = "earlier"  # approved before in this process, or --approve
        else:
            remember = answer.remember if answer.approved else None
        approval = {"channel": answer.channel or None, "remember": remember}
        parts.append(f',"approval":{json.dumps(approval)},"askMs":{_ms(note.asked_at - note.voted_at)}')
    parts.append(f',"sent":{"true" if sent else "false"},"voteMs":{_ms(note.voted_at - note.started)}')
    if error is not None:
        parts.append(f',"error":{json.dumps(error)}')
    if end is not None:
        parts.append(f',"ended":"{audit_file.iso(end[0])}"')
        _end(parts, note, end)
    parts.append("}")
    return "".join(parts)


def _ended_line(note: Note) -> str | None:
    """The ``ended`` line of a call whose decided line was written before it ended."""
    end = note.end
    if note.merged or end is None:
        return None
    parts = [f'{{"v":{_V},"event":"ended","id":"{note.trail.run}-{note.n}","time":"{audit_file.iso(end[0])}"']
    _end(parts, note, end)
    parts.append("}")
    return "".join(parts)


def _end(parts: list[str], note: Note, end: tuple[float, float, str | None, dict[str, Any] | None]) -> None:
    _, at, size, error = end
    parts.append(f',"serverMs":{_ms(at - note.sent_at)}')
    if size is not None:
        parts.append(f',"result":{size}')
    if error is not None:
        parts.append(f',"error":{json.dumps(error)}')


__all__ = ["CORE_VOTES", "Note", "Trail"]

"""The audit trail: a record of every decided call, never of its argument values.

What is recorded: every tool call the policy votes decided (and kxen's ``resources/read`` and
``prompts/get``, as the votes see them), once when it is decided (``"event": "decided"``: sent, or
why not) and, when it was sent, once when it ended (``"event": "ended"``, the same ``id``). A call
refused before the votes (an unknown tool, a server not ready, arguments the tool's
``inputSchema`` refuses) was not decided and is not recorded. The fields (docs/cli.md, ``kxen mcp
audit``):

* ``time`` (ISO 8601 UTC), ``pid``, ``id`` (unique per call), ``server`` and ``identity`` (what
  approvals bind to: scope, kind, the launch fingerprint of a local server or the canonical URL of
  a remote one -- a digest of it when it took ``${VAR}`` values or has a query, with the URL as
  ``shown`` with query values hidden), ``tool`` (or the method), ``method``, ``role``;
* ``pin``: the SHA-256 of the tool's definition as listed (:func:`pin_digest`; null for a method);
* ``verdict``: ``allow``, ``deny``, ``asked-approved``, ``asked-denied`` or ``asked-timeout``;
  ``by``: the votes that made it (``plugin``, ``vote``, and the ``reason`` for the core's own
  votes only -- a plugin's reason may quote an argument); ``approval``: the channel that answered
  and how a yes is remembered (``once``, ``call``, ``tool``, ``always``; ``earlier``: approved
  before in this process or with ``--approve``);
* ``args``: the arguments' shape (:func:`shape`), never a value; ``argsCut`` when it was bounded;
* ``voteMs``, ``askMs`` (a person's answer), ``serverMs``; ``result`` (``chars``: the characters
  of every string in the result, ``items``: its content items); ``error`` (``isError``, or the
  exception's ``type`` and its ``kxen`` class, and a JSON-RPC ``code``).

The call path pays little: with the trail off, one attribute test; on, a few dicts per call and
the shape walk (bounded), and a record put on a queue -- encoding and file I/O are the writer
thread's (:mod:`.audit_file`). A tool's pin and a server's identity are computed once per catalog
entry and per server, not per call.
"""

from __future__ import annotations

import itertools
import os
import secrets as _random
import time
from typing import TYPE_CHECKING, Any

from kxen_core.policy import audit_file

if TYPE_CHECKING:
    from pathlib import Path

    from kxen_core.config.models import ServerConfig
    from kxen_core.config.settings import AuditSettings
    from kxen_core.policy import ApprovalDecision, Vote

#: the shape's bounds: nesting shown, keys and items shown in all, characters of a key shown
MAX_DEPTH = 4
MAX_NODES = 32
MAX_KEY_CHARS = 40
#: what a key holding a secret (or a credential's shape) is written as
SECRET_KEY = "<secret>"
#: the core's own votes: their reasons name config keys and kinds, never a value
CORE_VOTES = frozenset({"kxen.config-policy", "kxen.roles", "kxen.safety", "kxen.argument-guard", "config"})
#: what a tool's definition is, for its pin (the fields of a ``tools/list`` item that describe it)
DEFINITION = ("name", "title", "description", "inputSchema", "outputSchema", "annotations", "execution")
_CACHE_MOST = 4096
#: a key shorter than this holds no secret kxen looks for (argument_guard.MIN_SECRET_CHARS) nor a
#: credential's shape (the shortest is longer)
_SHORT_KEY = 8


def pin_digest(tool_info: dict[str, Any]) -> str:
    """The SHA-256 of a tool's definition as listed: its :data:`DEFINITION` fields, as canonical
    JSON (:func:`kxen_core.launch.canonical.fingerprint`: key order and spacing do not matter)."""
    from kxen_core.launch.canonical import fingerprint

    return fingerprint({k: tool_info[k] for k in DEFINITION if k in tool_info})


def identity(server: ServerConfig, launch: Any) -> dict[str, Any]:
    """:func:`kxen_core.policy.approvals.server_identity` as the trail writes it: a remote URL that
    took variables or has a query as a digest (with the URL ``shown``, query values hidden)."""
    import hashlib
    from urllib.parse import urlsplit

    from kxen_core.policy.approvals import server_identity
    from kxen_core.safe_text import shown_url

    found = server_identity(server, launch)
    url = found.get("url")
    if url is not None:
        try:
            query = urlsplit(url).query
        except ValueError:
            query = url
        if query or any(e.path == "url" for e in getattr(server, "expanded", ())):
            found["url"] = "sha256:" + hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()
            found["shown"] = shown_url(server)
    return found


class Trail:
    """One runtime's audit trail: the sink it writes to and what it keeps to make records cheap."""

    def __init__(self, directory: Path, settings: AuditSettings) -> None:
        self.directory = directory
        self.sink = audit_file.sink(directory, settings.max_file_bytes, settings.max_files)
        self.settings = settings
        self._ids = itertools.count(1)
        self._prefix = _random.token_hex(4)
        self._pid = os.getpid()
        self._pins: dict[int, tuple[dict[str, Any], str]] = {}
        self._servers: dict[str, tuple[Any, Any, dict[str, Any]]] = {}
        self._keys: dict[Any, str] = {}
        self._keys_for: Any = None

    @property
    def path(self) -> Path:
        return self.sink.path

    def note(self) -> Note:
        return Note(self)

    def pin(self, info: dict[str, Any] | None) -> str | None:
        if not info:
            return None
        cached = self._pins.get(id(info))
        if cached is None or cached[0] is not info:
            if len(self._pins) >= _CACHE_MOST:
                self._pins.clear()
            cached = self._pins[id(info)] = (info, pin_digest(info))
        return cached[1]

    def identity(self, server: ServerConfig, launch: Any) -> dict[str, Any]:
        cached = self._servers.get(server.name)
        if cached is None or cached[0] is not server or cached[1] is not launch:
            cached = self._servers[server.name] = (server, launch, identity(server, launch))
        return cached[2]

    def key(self, key: Any, secrets: Any) -> str:
        """How a key of the arguments is written: itself (cut to :data:`MAX_KEY_CHARS`), or
        :data:`SECRET_KEY` when it holds a secret kxen holds or a credential's shape."""
        if type(key) is not str:
            return f"<{type(key).__name__}>"
        if len(key) < _SHORT_KEY:
            return key
        if secrets is not self._keys_for or len(self._keys) >= _CACHE_MOST:
            self._keys, self._keys_for = {}, secrets
        shown = self._keys.get(key)
        if shown is None:
            from kxen_core.policy.argument_guard import found

            if found(key, secrets) is not None:
                shown = SECRET_KEY
            else:
                shown = key if len(key) <= MAX_KEY_CHARS else key[:MAX_KEY_CHARS] + "…"
            self._keys[key] = shown
        return shown

    def submit(self, record: dict[str, Any]) -> None:
        audit_file.submit(self.sink, record)


def shape(trail: Trail, arguments: Any, secrets: Any) -> tuple[Any, bool]:
    """The shape of ``arguments`` and whether it was cut: an object's keys (:meth:`Trail.key`) with
    the shape of each value, an array as ``["array:N", <its first item's shape>]``, a string as
    ``"str:N"`` (N characters), ``int``, ``float``, ``bool``, ``null``; below :data:`MAX_DEPTH`, or
    past :data:`MAX_NODES` keys and items in all, an object is ``"object:N"`` (N keys) and an array
    ``"array:N"``. Never a value."""
    budget = [MAX_NODES]
    cut = [False]

    def walk(value: Any, depth: int) -> Any:
        kind = type(value)
        if kind is str:
            return f"str:{len(value)}"
        if kind is int:
            return "int"
        if kind is float:
            return "float"
        if kind is bool:
            return "bool"
        if value is None:
            return "null"
        if isinstance(value, dict):
            if depth >= MAX_DEPTH or budget[0] <= 0:
                cut[0] = cut[0] or bool(value)
                return f"object:{len(value)}"
            out: dict[str, Any] = {}
            for key, item in value.items():
                if budget[0] <= 0:
                    cut[0] = True
                    break
                budget[0] -= 1
                name = trail.key(key, secrets)
                if name in out:  # two keys cut (or masked) alike
                    name = f"{name}#{len(out)}"
                out[name] = walk(item, depth + 1)
            return out
        if isinstance(value, (list, tuple)):
            if not value:
                return "array:0"
            if depth >= MAX_DEPTH or budget[0] <= 0:
                cut[0] = True
                return f"array:{len(value)}"
            budget[0] -= 1
            return [f"array:{len(value)}", walk(value[0], depth + 1)]
        return kind.__name__

    return walk(arguments, 0), cut[0]


def result_size(result: Any) -> dict[str, Any]:
    """``{"chars": N, "items": K}``: the characters of every string value of a result (keys not
    counted; at most 2000 nodes looked at, then ``"cut": true``), and the items of its ``content``
    (``contents`` of a read, ``messages`` of a prompt)."""
    chars, looked = 0, 0
    stack = [result]
    while stack:
        looked += 1
        if looked > 2000:
            return {"chars": chars, "items": _items(result), "cut": True}
        node = stack.pop()
        if type(node) is str:
            chars += len(node)
        elif isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return {"chars": chars, "items": _items(result)}


def _items(result: Any) -> int | None:
    if isinstance(result, dict):
        for field in ("content", "contents", "messages"):
            if isinstance(result.get(field), list):
                return len(result[field])
    return None


def error_class(exc: BaseException) -> dict[str, Any]:
    """``{"type": <the exception's class>, "kxen": <its class under KxenError>, "code": N}`` (the
    kxen class for kxen's errors, the code for a JSON-RPC error); never the message."""
    from kxen_core.errors import KxenError

    out: dict[str, Any] = {"type": type(exc).__name__}
    if isinstance(exc, KxenError):
        mro = type(exc).__mro__
        top = mro[mro.index(KxenError) - 1] if mro.index(KxenError) > 0 else KxenError
        out["kxen"] = top.__name__
        code = getattr(exc, "code", None)
        if type(code) is int:
            out["code"] = code
    return out


def vote_json(vote: Vote) -> dict[str, Any]:
    out = {"plugin": vote.plugin, "vote": vote.decision}
    if vote.plugin in CORE_VOTES and vote.reason:
        out["reason"] = vote.reason
    return out


class Note:
    """One call on its way: what the call path tells it (:meth:`begin`, :meth:`voted`,
    :meth:`asked`, :meth:`sending`, :meth:`replied`), and the records it writes (:meth:`ended`,
    :meth:`failed`)."""

    __slots__ = tuple("trail record decision why answer started voted_at asked_at sent_at replied_at".split())

    def __init__(self, trail: Trail) -> None:
        self.trail = trail
        self.record: dict[str, Any] | None = None
        self.decision: str | None = None
        self.why: list[Vote] = []
        self.answer: ApprovalDecision | None = None
        self.started = self.voted_at = self.asked_at = self.sent_at = self.replied_at = 0.0

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
        """The call is about to be voted on (the shape is taken now: the host may change the
        arguments once the call returned)."""
        trail = self.trail
        args, cut = shape(trail, arguments, secrets)
        self.record = {
            "v": audit_file.VERSION,
            "event": "decided",
            "id": "",
            "time": 0.0,
            "pid": trail._pid,
            "server": server.name,
            "identity": trail.identity(server, launch),
            "tool": tool,
            "method": method,
            "pin": trail.pin(info),
            "role": role,
            "args": args,
        }
        if cut:
            self.record["argsCut"] = True
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
        self._decided(sent=True)

    def ended(self, result: Any) -> None:
        if self.sent_at:
            end: dict[str, Any] = {"result": result_size(result)}
            if isinstance(result, dict) and result.get("isError"):
                end["error"] = {"isError": True}
            self._ended(end)

    def failed(self, exc: BaseException) -> None:
        from kxen_core.errors import ApprovalDenied, PolicyDenied

        if self.decision is None or self.record is None:
            return  # not decided: refused before the votes
        if self.sent_at:
            self._ended({"error": error_class(exc)})
        elif isinstance(exc, (PolicyDenied, ApprovalDenied)) and self.decision != "allow":
            self._decided(sent=False)
        else:  # allowed (or asked) but not sent: the server stopped meanwhile, the call was cancelled
            self._decided(sent=False, error=error_class(exc))

    def _decided(self, *, sent: bool, error: dict[str, Any] | None = None) -> None:
        record = self.record
        if record is None or self.decision is None:
            return
        trail = self.trail
        record["id"] = f"{trail._prefix}-{next(trail._ids)}"
        record["time"] = time.time()
        record["verdict"] = self._verdict()
        record["by"] = [vote_json(v) for v in self.why]
        answer = self.answer
        if answer is not None:
            remember = "earlier" if answer.channel == "process" else answer.remember if answer.approved else None
            record["approval"] = {"channel": answer.channel or None, "remember": remember}
            record["askMs"] = round((self.asked_at - self.voted_at) * 1000, 3)
        record["sent"] = sent
        record["voteMs"] = round((self.voted_at - self.started) * 1000, 3)
        if error is not None:
            record["error"] = error
        trail.submit(record)

    def _verdict(self) -> str:
        if self.decision != "ask":
            return self.decision or "deny"
        answer = self.answer
        if answer is not None and answer.approved:
            return "asked-approved"
        if answer is not None and answer.timed_out:
            return "asked-timeout"
        return "asked-denied"

    def replied(self) -> None:
        """The server's answer is in (what follows -- an ``outputSchema`` check -- is not server time)."""
        self.replied_at = time.monotonic()

    def _ended(self, fields: dict[str, Any]) -> None:
        record = self.record
        assert record is not None
        end = self.replied_at or time.monotonic()
        self.trail.submit(
            {
                "v": audit_file.VERSION,
                "event": "ended",
                "id": record["id"],
                "time": time.time(),
                "serverMs": round((end - self.sent_at) * 1000, 3),
                **fields,
            }
        )


__all__ = ["Note", "Trail", "error_class", "identity", "pin_digest", "result_size", "shape"]

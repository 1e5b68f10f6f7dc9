"""What a server tells the host on its own: log messages and resource updates.

* ``notifications/message`` goes to :class:`ServerLog`: the server's last :data:`MAX_LOG_ENTRIES`
  messages (``level``, ``logger``, ``text`` of at most :data:`MAX_LOG_TEXT` characters), shown in
  its status (escaped: one safe line each), and Python's ``logging`` (logger ``kxen.server.log``,
  escaped too) at the matching level; what kxen holds as secret is scrubbed first. A flood
  costs O(1) memory: old entries make room for new ones, and only the count grows.
* ``notifications/resources/updated`` goes to the :class:`Subscription` objects of that URI (or of a
  URI it is below), made by ``Runtime.subscribe`` for servers that declare ``resources.subscribe``
  (the handshake era sends ``resources/subscribe``; the stateless era reopens its listen stream with
  the URIs, :mod:`kxen_core.protocol.listen`).
  Each subscription keeps at most :data:`MAX_PENDING_URIS` updated URIs not yet delivered (a set: one
  URI updated a thousand times is delivered once) and hands them to its callback from one task.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from kxen_core.safe_text import Secrets, safe_text

log = logging.getLogger("kxen.server.log")

MAX_LOG_ENTRIES = 100
MAX_LOG_TEXT = 2000
MAX_LOGGER_CHARS = 100
MAX_PENDING_URIS = 64
MAX_URI_CHARS = 4096
#: the syslog levels of MCP logging, and the Python levels they map to
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


def brief_json(value: Any, limit: int) -> str:
    """``value`` as text of at most ``limit`` characters (+ a cut marker), without ever serialising
    more than that: a string as it is, anything else as JSON encoded chunk by chunk."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"... [cut, {len(value)} characters]"
    parts: list[str] = []
    size = 0
    try:
        for chunk in json.JSONEncoder(ensure_ascii=False, check_circular=False).iterencode(value):
            parts.append(chunk)
            size += len(chunk)
            if size > limit:
                return "".join(parts)[:limit] + "... [cut]"
    except RecursionError:
        return "(a JSON value nested too deeply to show)"
    except (TypeError, ValueError) as exc:
        return f"(a value that is not JSON: {type(exc).__name__})"
    return "".join(parts)


class ServerLog:
    """The log messages one server sent (``notifications/message``), bounded. ``secrets`` returns
    what to scrub from them (``Runtime.secrets``): a server that echoes a secret back in a log
    message never has it shown, stored or logged."""

    def __init__(self, server: str, secrets: Callable[[], Secrets | None] = lambda: None) -> None:
        self.server = server
        self.secrets = secrets
        self.entries: deque[dict[str, str]] = deque(maxlen=MAX_LOG_ENTRIES)
        self.received = 0

    def notify(self, params: Any) -> None:
        self.received += 1
        params = params if type(params) is dict else {}
        level = params.get("level")
        if not isinstance(level, str) or level not in LEVELS:
            level = "info"
        logger = params.get("logger")
        long_logger = isinstance(logger, str) and len(logger) > MAX_LOGGER_CHARS
        logger = logger[:MAX_LOGGER_CHARS] if isinstance(logger, str) else ""
        text = brief_json(params.get("data"), MAX_LOG_TEXT)
        secrets = self.secrets()
        if secrets:  # a cut text or name: no secret's first characters before the cut either
            text = secrets.cut_text(text, MAX_LOG_TEXT) if len(text) > MAX_LOG_TEXT else secrets.text(text)
            logger = secrets.cut_text(logger, len(logger)) if long_logger else secrets.text(logger)
        self.entries.append({"level": level, "logger": logger, "text": text})
        if log.isEnabledFor(LEVELS[level]):
            # escaped here, whoever handles the record: a log line never acts on a terminal
            shown = f" [{safe_text(logger)}]" if logger else ""
            log.log(LEVELS[level], "%s%s: %s", self.server, shown, safe_text(text))

    def snapshot(self, last: int = 20) -> list[dict[str, str]]:
        """The last ``last`` entries for a status: ``logger`` and ``text`` escaped to one safe line."""
        return [
            {"level": e["level"], "logger": safe_text(e["logger"]), "text": safe_text(e["text"])}
            for e in list(self.entries)[-last:]
        ]


UpdateCallback = Callable[[str], None | Awaitable[None]]


class Subscription:
    """One host subscription to a resource URI of a server; close it with :meth:`aclose` (or use
    it as an async context manager). ``updates`` counts the notifications it got, ``dropped`` the
    updated URIs that found its pending set full."""

    def __init__(self, owner: Subscriptions, uri: str, callback: UpdateCallback) -> None:
        self.uri = uri
        self._owner = owner
        self._callback = callback
        self._pending: dict[str, None] = {}  # insertion-ordered set
        self._running = False
        self.closed = False
        self.updates = 0
        self.dropped = 0

    def matches(self, uri: str) -> bool:
        """``uri`` is this subscription's URI or one below it (a sub-resource)."""
        return uri == self.uri or uri.startswith(self.uri.rstrip("/") + "/")

    def offer(self, uri: str, start: Callable[..., Any]) -> None:
        self.updates += 1
        if uri not in self._pending:
            if len(self._pending) >= MAX_PENDING_URIS:
                self.dropped += 1
                return
            self._pending[uri] = None
        if not self._running:
            self._running = True
            start(self._deliver)

    async def _deliver(self) -> None:
        try:
            while self._pending and not self.closed:
                uri = next(iter(self._pending))
                del self._pending[uri]
                try:
                    answer = self._callback(uri)
                    if inspect.isawaitable(answer):
                        await answer
                except Exception as exc:  # the host's callback must not end the server
                    self._owner.diag(f"a resource update callback failed: {type(exc).__name__}: {exc}")
        finally:
            self._running = False

    async def aclose(self) -> None:
        """Stop the updates; the last subscription of a URI unsubscribes on the server (best effort)."""
        if not self.closed:
            self.closed = True
            await self._owner.remove(self)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class Subscriptions:
    """The subscriptions of one server's session; ``request`` sends a request on it."""

    def __init__(self, diag: Callable[[str], None]) -> None:
        self.diag = diag
        self._by_uri: dict[str, list[Subscription]] = {}
        self.request: Callable[[str, dict[str, Any]], Awaitable[Any]] | None = None
        self.start: Callable[..., Any] | None = None  # the server's task group's start_soon
        #: the stateless era: no ``resources/subscribe``; a changed set of URIs reopens the listen stream
        self.via_listen: Callable[[], None] | None = None

    def uris(self) -> list[str]:
        """The URIs subscribed to (the listen stream's ``resourceSubscriptions``)."""
        return list(self._by_uri)

    def reset(self) -> None:
        """The session ended: every subscription is over."""
        for subs in self._by_uri.values():
            for sub in subs:
                sub.closed = True
        self._by_uri.clear()
        self.request = self.start = self.via_listen = None

    async def add(self, uri: str, callback: UpdateCallback) -> Subscription:
        if self.request is None:
            raise RuntimeError("the server is not connected")
        sub = Subscription(self, uri, callback)
        first = uri not in self._by_uri
        self._by_uri.setdefault(uri, []).append(sub)
        if first and self.via_listen is not None:
            self.via_listen()
        elif first:
            try:
                await self.request("resources/subscribe", {"uri": uri})
            except BaseException:
                self._discard(sub)
                raise
        return sub

    def _discard(self, sub: Subscription) -> bool:
        """Forget ``sub``; True when it was the last of its URI."""
        subs = self._by_uri.get(sub.uri, [])
        if sub in subs:
            subs.remove(sub)
        if not subs and sub.uri in self._by_uri:
            del self._by_uri[sub.uri]
            return True
        return False

    async def remove(self, sub: Subscription) -> None:
        if not self._discard(sub):
            return
        if self.via_listen is not None:
            self.via_listen()
        elif self.request is not None:
            try:
                await self.request("resources/unsubscribe", {"uri": sub.uri})
            except Exception as exc:
                self.diag(f"resources/unsubscribe failed: {type(exc).__name__}: {exc}")

    def notify(self, params: Any) -> None:
        uri = params.get("uri") if type(params) is dict else None
        if not isinstance(uri, str) or len(uri) > MAX_URI_CHARS or self.start is None:
            return
        for subs in list(self._by_uri.values()):
            for sub in subs:
                if sub.matches(uri):
                    sub.offer(uri, self.start)


__all__ = ["LEVELS", "ServerLog", "Subscription", "Subscriptions", "brief_json"]

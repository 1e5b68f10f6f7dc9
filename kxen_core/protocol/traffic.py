"""JSON-RPC traffic in the log (``kxen -vv``, logger ``kxen.traffic`` at debug level).

:func:`logged` wraps a transport's stream only when that logger is enabled for debug when the
session starts, so a session without traffic logging sends and receives through the transport's
own methods, with nothing added on the way. Each message is logged as
``SERVER -> {json}`` (sent) or ``SERVER <- {json}`` (received), with every value ``scrub`` knows as
secret replaced (the server's configured credentials, before the body is cut), and cut to
:data:`MAX_BODY_CHARS` characters with the length it had. A message that cannot be shown
(nested too deeply) is named by its size class only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from kxen_core.transport import Message, MessageStream

log = logging.getLogger("kxen.traffic")

#: the most characters of one message's JSON the log shows
MAX_BODY_CHARS = 2000


def body(message: Any, scrub: Callable[[str], str] | None = None) -> str:
    """One message as the log shows it: compact JSON, secrets scrubbed, at most
    :data:`MAX_BODY_CHARS` characters (a cut says how long it was)."""
    try:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=_other)
    except (RecursionError, ValueError, TypeError):
        return f"({type(message).__name__} not shown: it cannot be written as JSON)"
    if scrub is not None:
        text = scrub(text)
    if len(text) > MAX_BODY_CHARS:
        return f"{text[:MAX_BODY_CHARS]}... (cut: {len(text)} characters)"
    return text


def _other(value: Any) -> str:
    return f"<{type(value).__name__}>"  # a RequestFailed, bytes: named, never expanded


def logged(stream: MessageStream, server: str, scrub: Callable[[str], str] | None = None) -> MessageStream:
    """``stream``, or a :class:`TrafficLog` over it when ``kxen.traffic`` logs at debug level."""
    if not log.isEnabledFor(logging.DEBUG):
        return stream
    return TrafficLog(stream, server, scrub)


class TrafficLog:
    """A :class:`~kxen_core.transport.MessageStream` that logs what passes through it; everything
    else (``describe``, what a transport offers beyond the protocol) is the stream's own."""

    def __init__(self, stream: MessageStream, server: str, scrub: Callable[[str], str] | None) -> None:
        self._stream = stream
        self._server = server
        self._scrub = scrub

    def _show(self, arrow: str, message: Any) -> None:
        try:
            log.debug("%s %s %s", self._server, arrow, body(message, self._scrub))
        except Exception:  # a log handler's failure is not the connection's
            pass

    async def send(self, message: Message) -> None:
        self._show("->", message)
        await self._stream.send(message)

    def send_nowait(self, message: Message) -> bool:
        sent = self._stream.send_nowait(message)
        if sent:
            self._show("->", message)
        return sent

    async def receive(self) -> Any:
        message = await self._stream.receive()
        self._show("<-", message)
        return message

    def set_receiver(self, callback: Callable[[Any], Any] | None) -> bool:
        push = getattr(self._stream, "set_receiver", None)
        if push is None:
            return False
        if callback is None:
            return bool(push(None))

        def relay(message: Any) -> Any:
            self._show("<-", message)
            return callback(message)

        return bool(push(relay))

    def describe(self) -> dict[str, Any]:
        return self._stream.describe()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


__all__ = ["MAX_BODY_CHARS", "TrafficLog", "body", "logged"]

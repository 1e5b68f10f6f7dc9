"""What a session receives: each message from the server, taken by the session's reader task or pushed
by the stream as it arrives (mixed into :class:`kxen_core.protocol.session.Session`).

A response completes its pending request (a dict lookup and completing its waiter, nothing more on
the hot path); a server request goes to :class:`kxen_core.protocol.serving.ServerRequests`; a
notification goes to the session's handler. One message's problem is a diagnostic, never the
session's; the stream's end fails every pending request at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kxen_core.errors import ClosedError, ProtocolError
from kxen_core.protocol.replies import Pending as _Pending
from kxen_core.protocol.replies import brief as _brief
from kxen_core.transport import Message, RequestFailed

if TYPE_CHECKING:
    import anyio

    from kxen_core.protocol.serving import ServerRequests
    from kxen_core.protocol.waiters import Waiters
    from kxen_core.transport import MessageStream

NotificationHandler = Callable[[str, Any], None]


class Incoming:
    """Mixed into :class:`kxen_core.protocol.session.Session`. The attributes below are the session's."""

    if TYPE_CHECKING:
        server: str
        closed_event: anyio.Event
        _stream: MessageStream
        _closed: BaseException | None
        _pending: dict[int, _Pending]
        _answering: dict[int, _Pending]
        _push: Callable[[Any], bool] | None
        _waiters: Waiters
        _serving: ServerRequests | None
        _on_notification: NotificationHandler | None
        _diag: Callable[[str], None]

    def _fail_all(self, error: BaseException, *, announce: bool = True) -> None:
        if self._closed is None:
            self._closed = error
            if announce:
                self.closed_event.set()
        pending, self._pending = self._pending, {}
        resolve = self._waiters.resolve
        for p in pending.values():
            resolve(p.waiter, error)
        self._waiters.close()

    def _stop_push(self) -> None:
        push, self._push = self._push, None
        if push is not None:
            push(None)

    def _take(self, message: Any) -> None:
        """One message from the server: from the reader task, or pushed by the stream as it arrives."""
        try:
            # hot path: a response to one of our requests
            if not isinstance(message, dict):
                self._dispatch_other(message)  # a RequestFailed (or garbage) from the transport
                return
            rid = message.get("id")
            if rid is not None and "method" not in message:
                p = self._answering.get(rid) if type(rid) is int else None
                if p is None:
                    # a late reply to a cancelled or timed-out request is expected; anything else is noise
                    self._diag(f"reply for unknown request id {_brief(rid)} ignored")
                elif "result" not in message and "error" not in message:
                    self._waiters.resolve(
                        p.waiter, ProtocolError(f"{p.method}: reply has neither result nor error", server=self.server)
                    )
                else:
                    if p.on_reply is not None:
                        self._answered(p, message)
                    self._waiters.resolve(p.waiter, message)
                return
            self._dispatch_other(message)
        except Exception as exc:  # (free when nothing raises) one message's problem, never the session's
            self._message_failed(message, exc)

    def _answered(self, p: _Pending, message: Message) -> None:
        hook, p.on_reply = p.on_reply, None
        try:
            hook(message)  # type: ignore[misc]
        except Exception as exc:  # what it would have sent is sent later by its caller, or not at all
            self._diag(f"{p.method}: the reply hook failed: {type(exc).__name__}: {exc}")

    async def _reader(self) -> None:
        """Take every message the stream does not push; learn of its end (a pushing stream's
        ``receive`` returns only what arrived before it pushed, then raises ``ClosedError``)."""
        stream, take = self._stream, self._take
        try:
            while True:
                take(await stream.receive())
        except ClosedError as exc:
            self._fail_all(exc)
        except Exception as exc:  # a transport that raises anything else is closed too
            self._fail_all(ClosedError(f"transport failed: {type(exc).__name__}: {exc}", server=self.server))
        finally:
            self._stop_push()
            if self._closed is None:
                self._fail_all(ClosedError("session closed", server=self.server))

    def _message_failed(self, message: Any, exc: Exception) -> None:
        """Handling one message raised (e.g. ``RecursionError``: nested too deeply to print). The
        request it answers fails with ``ProtocolError``; any other message is a diagnostic."""
        p = None
        try:
            if type(message) is dict and "method" not in message:
                rid = message.get("id")
                p = self._pending.get(rid) if type(rid) is int else None
        except Exception:
            p = None
        what = type(exc).__name__  # only its type: its text may be as unprintable as the message
        if p is not None:
            self._waiters.resolve(
                p.waiter, ProtocolError(f"{p.method}: the reply could not be handled ({what})", server=self.server)
            )
        else:
            self._diag(f"ignored a message that could not be handled ({what})")

    def _dispatch_other(self, message: Any) -> None:
        if type(message) is RequestFailed:
            p = self._pending.get(message.id)
            if p is not None:
                self._waiters.resolve(p.waiter, message.error)
            return
        if type(message) is not dict:
            self._diag(f"ignored a {type(message).__name__} message (batches are not used)")
            return
        method = message.get("method")
        if not isinstance(method, str):
            self._diag("ignored a message with neither a known id nor a method")
            return
        if "id" in message:
            rid = message["id"]
            if rid is None or isinstance(rid, bool) or not isinstance(rid, (int, str)):
                self._diag(f"ignored server request {method[:60]!r} with an invalid id")
                return
            assert self._serving is not None  # made on entry, before the reader runs
            self._serving.accept(rid, method, message.get("params"))
            return
        if self._on_notification is not None:
            try:
                self._on_notification(method, message.get("params"))
            except Exception as exc:
                self._diag(f"notification handler failed on {method[:60]!r}: {exc}")


__all__ = ["Incoming", "NotificationHandler"]

"""JSON-RPC over a :class:`~kxen_core.transport.MessageStream`, transport-agnostic.

One reader task per session dispatches every incoming message (:mod:`kxen_core.protocol.incoming`) (or the stream
pushes each one as it
arrives, when it offers ``set_receiver``; the reader task then only learns of the end): responses
complete their pending request (a dict lookup and completing its waiter, nothing more on the hot
path), server requests are answered
in their own task (``ping`` -> ``{}``, registered handlers, else ``-32601``), notifications go to the
handler. Past ``MAX_SERVER_REQUESTS_IN_FLIGHT`` a server request costs O(1): it is answered "busy"
inline with ``send_nowait``, or by one of at most ``MAX_REFUSALS_IN_FLIGHT`` short tasks, or dropped
and counted (``refused_requests``, ``dropped_requests``; a diagnostic at each power of two), so a
flood neither grows memory nor delays closing. Every request has a timeout; on timeout, on the
caller's cancellation and on ``aclose`` the request is dropped from the pending map and
``notifications/cancelled`` is sent best-effort (never for ``initialize``). When the stream ends, every pending
request fails at once with ``ClosedError``.

Speed (see docs/performance.md): a request goes out with the stream's ``send_nowait`` (no cancel
scope when nothing waits); only under backpressure does it await ``send``, and that wait counts
against the timeout. How the caller then waits for the answer is the session's one backend-specific
piece, chosen once per session in :mod:`kxen_core.protocol.waiters` (a bare future and a shared deadline
timer on asyncio, an Event with a cancel scope elsewhere).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from kxen_core.errors import ClosedError, RequestTimeout
from kxen_core.protocol.clock import RequestClock
from kxen_core.protocol.era_requests import CLIENT_INFO, Modern
from kxen_core.protocol.handshake import (
    LATEST_PROTOCOL_VERSION,
    SUPPORTED_PROTOCOL_VERSIONS,
    Handshake,
    InitializeResult,
)
from kxen_core.protocol.incoming import Incoming, NotificationHandler
from kxen_core.protocol.replies import Begun, result_of
from kxen_core.protocol.replies import Pending as _Pending
from kxen_core.protocol.serving import (
    MAX_REFUSALS_IN_FLIGHT,
    MAX_SERVER_REQUESTS_IN_FLIGHT,
    RequestHandler,
    ServerRequests,
)
from kxen_core.protocol.waiters import AnyioWaiters, Waiters, for_current_backend
from kxen_core.transport import Message, MessageStream

log = logging.getLogger("kxen.session")

#: requests never cancelled on the wire: the handshake, and the era probe (it may reach a server before its handshake)
_NO_CANCEL = ("initialize", "server/discover")

#: a best-effort cancellation notification gets this long to go out
CANCEL_SEND_SECONDS = 1.0


class Session(Incoming):
    """A JSON-RPC client session. Use as ``async with Session(stream, ...) as s``."""

    def __init__(
        self,
        stream: MessageStream,
        *,
        server: str = "",
        request_timeout: float = 30.0,
        initialize_timeout: float = 60.0,
        capabilities: Mapping[str, Any] | None = None,
        on_notification: NotificationHandler | None = None,
        on_diagnostic: Callable[[str], None] | None = None,
        request_handlers: Mapping[str, RequestHandler] | None = None,
    ) -> None:
        self._stream = stream
        self.server = server
        self.request_timeout = request_timeout
        self.initialize_timeout = initialize_timeout
        self.capabilities = dict(capabilities or {})  # declared at initialize (the stateless era: in every request)
        self._on_notification = on_notification
        self._diag = on_diagnostic or (lambda m: None)
        self.handlers = dict(request_handlers or {})
        #: every request waiting for its answer, by id
        self._pending: dict[int, _Pending] = {}
        self._answering = self._pending  # what the reader answers: the map as it was at the close
        self._push: Callable[[Any], bool] | None = None  # the stream's set_receiver, when it pushes
        self._waiters: Waiters = AnyioWaiters()  # replaced for the running backend on entry
        self._next_id = 0
        #: requests sent ahead of their caller by method (the handshake's first ``tools/list``:
        #: :mod:`kxen_core.protocol.handshake`); the caller takes its entry and :meth:`finish`\ es it
        self.prefetched: dict[str, Begun] = {}
        self._closed: BaseException | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._serving: ServerRequests | None = None  # made on entry, with the session's task group
        self.initialized: InitializeResult | None = None
        self.modern: Modern | None = None  # set when the server speaks the stateless era (kxen_core.protocol.era)
        self.era_note: str | None = None  # why the era probe concluded "handshake era", if it did
        #: set once the session can no longer be used (stream ended, server died, aclose)
        self.closed_event = anyio.Event()

    # --- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> Session:
        self._waiters = for_current_backend(self.request_timeout)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._serving = ServerRequests(self._stream, self._tg, self.handlers, self.request_timeout, self._diag)
        push = getattr(self._stream, "set_receiver", None)  # optional (kxen_core.transport.MessageStream)
        if push is not None and push(self._take):
            self._push = push
        self._tg.start_soon(self._reader, name=f"kxen-reader-{self.server}")
        return self

    @property
    def refused_requests(self) -> int:
        """Server requests past the in-flight bound that were answered "busy"."""
        return self._serving.refused if self._serving is not None else 0

    @property
    def dropped_requests(self) -> int:
        """Server requests past the in-flight bound dropped unanswered (no room to refuse them)."""
        return self._serving.dropped if self._serving is not None else 0

    @property
    def _server_requests(self) -> int:
        return self._serving.in_flight if self._serving is not None else 0

    async def __aexit__(self, *exc: Any) -> bool | None:
        with anyio.CancelScope(shield=True):
            await self.aclose("session closed")
        assert self._tg is not None
        self._stop_push()
        self._tg.cancel_scope.cancel()
        # child tasks never raise, so the body's own exception propagates unwrapped
        await self._tg.__aexit__(None, None, None)
        return None

    async def aclose(self, reason: str = "session stopped") -> None:
        """Stop: cancel every pending request on the wire and fail it with ``ClosedError``."""
        if self._closed is None:
            ids = [rid for rid, p in self._pending.items() if p.method not in _NO_CANCEL]
            # wake every caller first: an answer to the cancellation must not reach them instead;
            # announce the close (closed_event) only after the cancellations went out, so whoever
            # owns the transport does not close it under them
            self._fail_all(ClosedError(f"{reason}", server=self.server), announce=False)
            try:
                with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_SEND_SECONDS):
                    for rid in ids:
                        await self._send_cancelled(rid, reason)
            finally:
                self.closed_event.set()

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def close_reason(self) -> str | None:
        return None if self._closed is None else str(self._closed)

    @property
    def close_error(self) -> BaseException | None:
        """What closed the session (a :class:`ClosedError`, or what the transport raised)."""
        return self._closed

    # --- outgoing -----------------------------------------------------------------------------

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        if self._closed is not None:
            raise ClosedError(f"cannot send {method}: {self._closed}", server=self.server)
        message: Message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._stream.send(message)

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        clock: RequestClock | None = None,
    ) -> dict[str, Any]:
        """Send a request and return its ``result``; raise on error, timeout or close. In the stateless
        era it goes through :class:`kxen_core.protocol.era_requests.Modern` (envelope, input-required rounds).
        ``clock``: the request asked for progress, and each progress notification gives it its
        timeout again (:mod:`kxen_core.protocol.clock`; ``timeout`` is then the clock's)."""
        if self.modern is None:
            return await self.request_once(method, params, timeout, clock)
        return await self.modern.request(
            self.request_once, method, params, self.request_timeout if timeout is None else timeout, clock
        )

    async def request_once(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        timeout: float | None,
        clock: RequestClock | None = None,
    ) -> dict[str, Any]:
        """One request, sent as it is (no era handling)."""
        if self._closed is not None:
            raise ClosedError(f"cannot send {method}: {self._closed}", server=self.server)
        if timeout is None:
            timeout = self.initialize_timeout if method == "initialize" else self.request_timeout
        # begin(), inline: every request of every host passes here
        self._next_id += 1
        rid = self._next_id
        p = self._pending[rid] = _Pending(method, self._waiters.create())
        message: Message = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        if self._stream.send_nowait(message):  # queued without waiting: the common case
            return await self.finish((rid, p), timeout, clock=clock)
        # backpressure (nothing queued): the send counts against the timeout too, so a server that
        # stops reading cannot block us forever
        start = anyio.current_time()
        await self._send_waiting(rid, message, timeout)
        return await self.finish((rid, p), timeout - (anyio.current_time() - start), whole=timeout, clock=clock)

    async def _send_waiting(self, rid: int, message: Message, timeout: float) -> None:
        """Send request ``rid`` when the stream cannot take it at once, within ``timeout``; raises
        ``RequestTimeout`` (its pending entry dropped) when it could not go out whole."""
        sent = False
        try:
            with anyio.move_on_after(timeout):
                await self._stream.send(message)
                sent = True
        finally:
            if not sent:  # timed out, cancelled or failed: nothing (whole) was sent, nothing to cancel
                self._pending.pop(rid, None)
        if not sent:
            raise RequestTimeout(str(message["method"]), timeout, server=self.server)

    def begin(
        self, method: str, params: Mapping[str, Any] | None = None, *, on_reply: Callable[[Message], None] | None = None
    ) -> Begun | None:
        """Send a request now without waiting and return it for :meth:`finish`; None (nothing sent)
        when the session is closed or the stream cannot take it without waiting.

        ``on_reply`` sees the raw reply (a result or an error) in the reader, before whoever
        awaits it wakes: what must go out the moment it arrives goes out then (it must not block;
        what it raises is a diagnostic, and the reply is delivered all the same)."""
        if self._closed is not None:
            return None
        self._next_id += 1
        rid = self._next_id
        p = self._pending[rid] = _Pending(method, self._waiters.create(), on_reply)
        message: Message = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        if self._stream.send_nowait(message):
            return rid, p
        del self._pending[rid]
        self._next_id = rid - 1  # nothing went out: the id is the next request's (ids follow send order)
        return None

    async def begin_async(
        self, method: str, params: Mapping[str, Any] | None, timeout: float, on_id: Callable[[int], None]
    ) -> Begun:
        """:meth:`begin`, waiting (at most ``timeout`` s) when the stream cannot take it at once; for a
        request whose id its caller must know before any answer can arrive (``subscriptions/listen``):
        ``on_id`` hears it before the request goes out."""
        on_id(self._next_id + 1)
        begun = self.begin(method, params)
        if begun is not None:
            return begun
        if self._closed is not None:
            raise ClosedError(f"cannot send {method}: {self._closed}", server=self.server)
        self._next_id += 1
        rid = self._next_id
        on_id(rid)
        p = self._pending[rid] = _Pending(method, self._waiters.create())
        message: Message = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        await self._send_waiting(rid, message, timeout)
        return rid, p

    def abandon(self, rid: int, error: BaseException) -> None:
        """End request ``rid`` with ``error`` now, sending nothing (the server ended it itself)."""
        p = self._pending.get(rid)
        if p is not None:
            self._waiters.resolve(p.waiter, error)

    async def finish(
        self,
        begun: Begun,
        timeout: float | None = None,
        *,
        whole: float | None = None,
        clock: RequestClock | None = None,
    ) -> dict[str, Any]:
        """The ``result`` of a request :meth:`begin` sent (its timeout counting from now); raises as
        :meth:`request_once` does. A cancelled or timed-out request is cancelled on the wire.
        ``whole``: the timeout a ``RequestTimeout`` names, when part of it went to sending;
        ``clock``: progress extends the wait (:meth:`request`)."""
        rid, p = begun
        method = p.method
        if timeout is None:
            timeout = self.initialize_timeout if method == "initialize" else self.request_timeout
        try:
            response = await self._waiters.wait(p.waiter, timeout, clock)
        except BaseException:  # the caller was cancelled
            self._pending.pop(rid, None)
            if method not in _NO_CANCEL and self._closed is None:
                await self._send_cancelled(rid, "cancelled by caller")
            raise
        self._pending.pop(rid, None)
        if response is None:
            if method not in _NO_CANCEL and self._closed is None:
                await self._send_cancelled(rid, "request timed out")
            why = clock.why() if clock is not None else ""
            raise RequestTimeout(method, timeout if whole is None else whole, server=self.server, why=why)
        if isinstance(response, BaseException):
            raise response
        return result_of(method, response, self.server)

    def notify_nowait(self, method: str, params: Mapping[str, Any] | None = None) -> bool:
        """Send a notification without waiting; False (nothing sent) when it would have to wait."""
        if self._closed is not None:
            return False
        message: Message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        return self._stream.send_nowait(message)

    async def initialize(self) -> InitializeResult:
        """Negotiate the protocol version, then send ``notifications/initialized``
        (:class:`kxen_core.protocol.handshake.Handshake`)."""
        return await Handshake(self).run()

    async def _send_cancelled(self, rid: int, reason: str) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_SEND_SECONDS):
            try:
                await self._stream.send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": rid, "reason": reason},
                    }
                )
            except Exception as exc:  # best effort: the connection may already be gone
                log.debug("could not send notifications/cancelled to %s: %s", self.server, exc)


__all__ = [
    "CLIENT_INFO",
    "MAX_REFUSALS_IN_FLIGHT",  # the bounds of serving the server's requests (kxen_core.protocol.serving)
    "MAX_SERVER_REQUESTS_IN_FLIGHT",
    "InitializeResult",
    "LATEST_PROTOCOL_VERSION",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "Session",
]

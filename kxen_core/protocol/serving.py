"""Requests from the server to the client (``ping``, ``roots/list``...), served with bounds.

At most :data:`MAX_SERVER_REQUESTS_IN_FLIGHT` are served at once, each bounded by the request
timeout. Past that a request costs O(1): it is answered "busy" inline with ``send_nowait``, or by one
of at most :data:`MAX_REFUSALS_IN_FLIGHT` short tasks, or dropped and counted (a diagnostic at each
power of two), so a flood neither grows memory nor delays closing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import anyio.abc

from kxen_core.errors import ClosedError
from kxen_core.transport import Message, MessageStream

#: at most this many server->client requests are served at once; past that, a request is answered
#: "busy" inline when the stream takes it without waiting, else by one of at most
#: MAX_REFUSALS_IN_FLIGHT tasks (each bounded by REFUSAL_SEND_SECONDS), else it is dropped (counted)
MAX_SERVER_REQUESTS_IN_FLIGHT = 32
MAX_REFUSALS_IN_FLIGHT = 32
REFUSAL_SEND_SECONDS = 1.0

RequestHandler = Callable[[Mapping[str, Any]], Awaitable[Any]]


class ReplyError(Exception):
    """Raised by a handler to answer with this JSON-RPC error (``code``, ``message``)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ServerRequests:
    """Serves the server's requests of one session, in that session's task group."""

    def __init__(
        self,
        stream: MessageStream,
        tg: anyio.abc.TaskGroup,
        handlers: Mapping[str, RequestHandler],
        timeout: float,
        diag: Callable[[str], None],
    ) -> None:
        self._stream = stream
        self._tg = tg
        self._handlers = handlers
        self._timeout = timeout
        self._diag = diag
        self.in_flight = 0
        self._refusing = 0
        #: requests past the in-flight bound: answered "busy", or dropped unanswered
        self.refused = 0
        self.dropped = 0

    def accept(self, rid: Any, method: str, params: Any) -> None:
        """Serve a request in its own task, or refuse it in O(1) past the bound."""
        if self.in_flight >= MAX_SERVER_REQUESTS_IN_FLIGHT:
            self._refuse(rid, method)
            return
        self.in_flight += 1
        self._tg.start_soon(self._serve, rid, method, params)

    def _refuse(self, rid: Any, method: str) -> None:
        """A server request past the in-flight bound, in O(1): never a wait, never an unbounded task."""
        busy: Message = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": "client busy"}}
        try:
            sent = self._stream.send_nowait(busy)
        except Exception:  # a stream that is closing: nothing was sent
            sent = False
        if sent:
            self.refused += 1
            return
        if self._refusing < MAX_REFUSALS_IN_FLIGHT:
            self.refused += 1
            self._refusing += 1
            self._tg.start_soon(self._send_refusal, busy)
            return
        self.dropped += 1
        n = self.dropped
        if n & (n - 1) == 0:  # 1, 2, 4, 8...: the count stays visible, the diagnostics few
            self._diag(
                f"{n} server request(s) dropped unanswered: {MAX_SERVER_REQUESTS_IN_FLIGHT} in flight already "
                f"and no room to refuse them (the last: {method[:60]!r})"
            )

    async def _send_refusal(self, busy: Message) -> None:
        try:
            with anyio.move_on_after(REFUSAL_SEND_SECONDS):
                await self._stream.send(busy)
        except Exception:  # best effort, like any reply
            pass
        finally:
            self._refusing -= 1

    async def _serve(self, rid: Any, method: str, params: Any) -> None:
        try:
            if method == "ping":
                await self._reply(rid, {})
                return
            handler = self._handlers.get(method)
            if handler is None:
                await self._reply_error(rid, -32601, f"Method not found: {method[:100]}")
                return
            try:
                with anyio.fail_after(self._timeout):
                    result = await handler(params if isinstance(params, dict) else {})
            except ReplyError as exc:
                await self._reply_error(rid, exc.code, exc.message)
                return
            except Exception as exc:
                await self._reply_error(rid, -32603, f"client error: {type(exc).__name__}")
                self._diag(f"handler for {method!r} failed: {exc}")
                return
            await self._reply(rid, result)
        finally:
            self.in_flight -= 1

    async def _reply(self, rid: Any, result: Any) -> None:
        await self._send_reply({"jsonrpc": "2.0", "id": rid, "result": result})

    async def _reply_error(self, rid: Any, code: int, message: str) -> None:
        await self._send_reply({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})

    async def _send_reply(self, message: Message) -> None:
        # a reply that cannot go out is a diagnostic; it must never take the session down
        try:
            with anyio.fail_after(self._timeout):
                await self._stream.send(message)
        except ClosedError:
            pass
        except Exception as exc:
            self._diag(f"could not reply to server request: {type(exc).__name__}: {exc}")


__all__ = ["MAX_REFUSALS_IN_FLIGHT", "MAX_SERVER_REQUESTS_IN_FLIGHT", "ReplyError", "RequestHandler", "ServerRequests"]

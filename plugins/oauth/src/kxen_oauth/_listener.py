"""The loopback redirect listener of a sign-in: 127.0.0.1 only, one path, a bounded life.

The socket is bound when the flow starts (so the authorization URL can name its port) and the
kernel queues the browser's connection until :meth:`Listener.wait` accepts it: no background task
outlives the caller. A request that is not this sign-in's answer (another path, another or no
``state``, not HTTP at all) is answered and ignored: it never ends the sign-in, however many come.
Each request costs bounded work (at most :data:`MAX_REQUEST_BYTES` read within
:data:`READ_SECONDS`), at most :data:`MAX_OPEN` are read at once (one more is answered 503 at
once), and the caller's own time bound (the flow's lifetime) is what ends a wait.

Connections are taken with a plain non-blocking ``accept()`` once the socket is readable, never
with the event loop's ``sock_accept``: a browser opens spare connections (Chromium preconnects),
and on CPython 3.11 an ``sock_accept`` cancelled in the very loop turn its connection came (the
answer found, the wait ending) sets a result on the cancelled future -- ``InvalidStateError`` in
the loop, and the accepted socket left open. Waiting for readability is cancelled cleanly.
"""

from __future__ import annotations

import contextlib
import socket
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc

CALLBACK_PATH = "/callback"
MAX_REQUEST_BYTES = 16 * 1024
READ_SECONDS = 5.0
#: the most requests read at the same time; one more is answered 503 and closed at once, so slow
#: or idle connections cannot keep the browser's answer from being read
MAX_OPEN = 16

_PAGE = (
    "<!doctype html><meta charset=utf-8><title>kxen</title>"
    "<p>{text}</p><p>You can close this window and return to kxen.</p>"
)


class Listener:
    """A bound 127.0.0.1 listener; :attr:`redirect_uri` is the URL it answers."""

    def __init__(self, listener: anyio.abc.SocketListener) -> None:
        self._listener = listener
        self._socket: socket.socket = listener.extra(anyio.abc.SocketAttribute.raw_socket)
        self.port: int = listener.extra(anyio.abc.SocketAttribute.local_port)
        self.redirect_uri = f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"
        self.closed = False

    @classmethod
    async def bind(cls, port: int = 0) -> Listener:
        """Bind 127.0.0.1:``port`` (0: any free port). Raises OSError when it is taken."""
        multi = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port, reuse_port=False)
        return cls(multi.listeners[0])  # type: ignore[arg-type]

    async def aclose(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(Exception):
                await self._listener.aclose()

    async def wait(self, state: str) -> dict[str, str]:
        """The query of the first request to the callback path that carries ``state`` (or an
        ``error`` with it). Other requests get 400, 404 or 503 and are otherwise ignored, however
        many come. Bounded by the caller's cancel scope (the flow's lifetime); an error accepting
        a connection (the socket closed) raises ``OSError``."""
        found: list[dict[str, str]] = []
        limiter = anyio.CapacityLimiter(MAX_OPEN)
        async with anyio.create_task_group() as tg:

            async def handle(stream: anyio.abc.SocketStream) -> None:
                try:
                    async with stream:
                        params = await self._one(stream, state)
                finally:
                    limiter.release_on_behalf_of(stream)
                if params is not None and not found:
                    found.append(params)
                    tg.cancel_scope.cancel()

            while not found:
                stream = await self._accept()
                if stream is None:
                    continue
                try:
                    limiter.acquire_on_behalf_of_nowait(stream)
                except anyio.WouldBlock:
                    async with stream:
                        await _answer(stream, 503, "Too many requests at once; try again.")
                    continue
                tg.start_soon(handle, stream)
        return found[0]

    async def _accept(self) -> anyio.abc.SocketStream | None:
        """The next connection, or None when another took it first (see the module text). Raises
        ``OSError`` when the socket is closed or broken."""
        await anyio.wait_readable(self._socket)
        try:
            conn, _ = self._socket.accept()
        except (BlockingIOError, InterruptedError):
            return None
        conn.setblocking(False)
        with anyio.CancelScope(shield=True):  # made into a stream (one loop turn) or closed, never lost
            try:
                stream = await anyio.abc.SocketStream.from_socket(conn)
            except BaseException:
                conn.close()
                raise
        return stream

    async def _one(self, stream: anyio.abc.SocketStream, state: str) -> dict[str, str] | None:
        data = b""
        with anyio.move_on_after(READ_SECONDS):
            while b"\r\n\r\n" not in data and len(data) < MAX_REQUEST_BYTES:
                try:
                    chunk = await stream.receive(4096)
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    break
                data += chunk
        line = data.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] not in ("GET", "POST"):
            await _answer(stream, 400, "This is kxen's sign-in listener; that request was not understood.")
            return None
        target = urlsplit(parts[1])
        if target.path != CALLBACK_PATH:
            await _answer(stream, 404, "Not found.")
            return None
        query = {k: v[0] for k, v in parse_qs(target.query, keep_blank_values=True).items() if v}
        if query.get("state") != state:
            # not this sign-in's answer (or forged): never used
            await _answer(stream, 400, "This sign-in answer does not belong to the sign-in kxen is waiting for.")
            return None
        if "error" in query:
            await _answer(stream, 200, "Sign-in was not completed.")
        else:
            await _answer(stream, 200, "Signed in.")
        return query


async def _answer(stream: anyio.abc.SocketStream, status: int, text: str) -> None:
    body = _PAGE.format(text=text).encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n"
    ).encode()
    with anyio.move_on_after(READ_SECONDS), contextlib.suppress(Exception):
        await stream.send(head + body)

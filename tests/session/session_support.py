"""The scripted server end of the session tests (helpers; the fixtures are in conftest.py).

The server side is driven by the test itself through :class:`Peer`, a pair of in-memory object
streams; the client sees it as a :class:`kxen_core.transport.MessageStream`. The fixtures (``peer``,
and ``anyio_backend`` over asyncio and trio) are in this folder's conftest.py.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest

from kxen_core.errors import ClosedError
from kxen_core.protocol.session import LATEST_PROTOCOL_VERSION


class ClientSide:
    """What the session talks to: maps the end of the memory streams to ``ClosedError``.

    ``nowait=False``: ``send_nowait`` never queues, so every send waits for the peer (backpressure
    shows). ``nowait=True``: it queues whenever the buffer has room, as the real transports do, so
    the session takes its hot path.
    """

    def __init__(self, send: Any, receive: Any, *, nowait: bool = False) -> None:
        self._send, self._receive, self._nowait = send, receive, nowait

    async def send(self, message: dict[str, Any]) -> None:
        try:
            await self._send.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise ClosedError("peer gone") from exc

    def send_nowait(self, message: dict[str, Any]) -> bool:
        if not self._nowait:
            return False
        try:
            self._send.send_nowait(message)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False  # nothing queued: the session awaits send
        return True

    async def receive(self) -> dict[str, Any]:
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise ClosedError("peer closed the connection") from exc

    def describe(self) -> dict[str, Any]:
        return {}


class Peer:
    """The server end, scripted by the test."""

    def __init__(self, *, nowait: bool = False) -> None:
        self.c2s_send, self.c2s_recv = anyio.create_memory_object_stream[dict](math.inf)
        self.s2c_send, self.s2c_recv = anyio.create_memory_object_stream[dict](math.inf)
        self.stream = ClientSide(self.c2s_send, self.s2c_recv, nowait=nowait)

    def close_all(self) -> None:
        for s in (self.c2s_send, self.c2s_recv, self.s2c_send, self.s2c_recv):
            s.close()

    async def next(self, timeout: float = 5) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            return await self.c2s_recv.receive()

    async def expect(self, method: str) -> dict[str, Any]:
        message = await self.next()
        assert message.get("method") == method, message
        return message

    async def nothing_sent(self) -> None:
        """Assert the client has sent nothing more (after every task has had its turn)."""
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(anyio.WouldBlock):
            extra = self.c2s_recv.receive_nowait()
            pytest.fail(f"unexpected message {extra!r}")

    async def send(self, message: Any) -> None:
        await self.s2c_send.send(message)

    async def reply(self, request: dict[str, Any], result: Any) -> None:
        await self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    async def error(self, request: dict[str, Any], code: int, message: str, data: Any = None) -> None:
        err: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        await self.send({"jsonrpc": "2.0", "id": request["id"], "error": err})

    def hang_up(self) -> None:
        """The server goes away: the client's receive ends."""
        self.s2c_send.close()


def init_result(version: str = LATEST_PROTOCOL_VERSION, **extra: Any) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "t", "version": "1"},
        **extra,
    }


class Outcome:
    """Runs a coroutine in a task group and keeps its result or exception."""

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.value: Any = None
        self.error: BaseException | None = None

    async def run(self, fn, *args: Any, **kwargs: Any) -> None:
        try:
            self.value = await fn(*args, **kwargs)
        except Exception as exc:
            self.error = exc
        finally:
            self.done.set()

    async def wait(self, timeout: float = 5) -> Outcome:
        with anyio.fail_after(timeout):
            await self.done.wait()
        return self


def start(tg: anyio.abc.TaskGroup, fn, *args: Any, **kwargs: Any) -> Outcome:
    out = Outcome()
    tg.start_soon(lambda: out.run(fn, *args, **kwargs))
    return out

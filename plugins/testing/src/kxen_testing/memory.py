"""The in-memory transport: crossed zero-buffer object streams to a fake server task.

Zero-size buffers make every send wait for its receiver, so backpressure bugs show in tests.
"""

from __future__ import annotations

from typing import Any

import anyio

from kxen_core.errors import ClosedError, ConnectError

from .fake import FakeServer

_FAKES: dict[str, FakeServer] = {}


def register_fake(name: str, server: FakeServer) -> FakeServer:
    _FAKES[name] = server
    return server


def get_fake(name: str) -> FakeServer:
    return _FAKES[name]


def clear_fakes() -> None:
    _FAKES.clear()


class _Stream:
    def __init__(self, send: Any, receive: Any, name: str) -> None:
        self._send, self._receive, self._name = send, receive, name

    async def send(self, message: dict[str, Any]) -> None:
        try:
            await self._send.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise ClosedError("fake server is gone", server=self._name) from exc

    def send_nowait(self, message: dict[str, Any]) -> bool:
        return False  # every send waits for the fake (zero buffer), so backpressure bugs show

    async def receive(self) -> Any:
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise ClosedError("fake server closed the connection", server=self._name) from exc

    def describe(self) -> dict[str, Any]:
        return {"fake": True}


class MemoryTransport:
    def __init__(self, server: Any, context: Any) -> None:
        self.server = server
        self.name = server.name
        key = (server.options or {}).get("server", server.name)
        self.fake = _FAKES.get(key)
        self._tg: anyio.abc.TaskGroup | None = None
        self._streams: list[Any] = []

    async def __aenter__(self) -> _Stream:
        if self.fake is None:
            raise ConnectError(f"no fake server registered for {self.name!r}", server=self.name)
        c2s_send, c2s_recv = anyio.create_memory_object_stream[Any](0)
        s2c_send, s2c_recv = anyio.create_memory_object_stream[Any](0)
        self._streams = [c2s_send, c2s_recv, s2c_send, s2c_recv]
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self.fake.serve, c2s_recv, s2c_send)
        return _Stream(c2s_send, s2c_recv, self.name)

    async def __aexit__(self, *exc: Any) -> bool | None:
        # stop the fake first, then close the streams: closing first would make the fake raise
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        try:
            await self._tg.__aexit__(None, None, None)
        finally:
            for stream in self._streams:
                stream.close()
        return None

"""The stdout reader on a real pipe, without a child: messages in order, the end, pushing on asyncio
(and only there), and the bound on what is read ahead of the session."""

from __future__ import annotations

import os

import anyio
import pytest
from kxen_transport_stdio.reader import READ_CHUNK, PipeReader

pytestmark = pytest.mark.anyio


class Pipe:
    """A pipe whose read end is a PipeReader and whose write end the test writes (blocking)."""

    def __init__(self) -> None:
        read_fd, self.write_fd = os.pipe()
        self.diagnostics: list[str] = []
        self.reader = PipeReader(read_fd, 1 << 20, self.diagnostics.append)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.write_fd, view) :]

    def close_write_end(self) -> None:
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1


@pytest.fixture
async def pipe():
    p = Pipe()
    p.reader.start()
    try:
        yield p
    finally:
        p.reader.close()
        p.close_write_end()


async def test_messages_in_order_then_the_end(pipe):
    pipe.write(b'{"id":1}\n{"id":2}\nnot json\n{"id":3}')
    pipe.close_write_end()
    got = []
    with anyio.fail_after(5):
        with pytest.raises(EOFError):
            while True:
                got.append(await pipe.reader.receive())
    assert got == [{"id": 1}, {"id": 2}, {"id": 3}]  # the last line counts without its newline
    assert any("non-JSON" in d for d in pipe.diagnostics)


async def test_close_ends_a_waiting_receive(pipe):
    async def close_soon() -> None:
        await anyio.sleep(0.05)
        pipe.reader.close()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(close_soon)
            with pytest.raises(EOFError):
                await pipe.reader.receive()


async def test_pushing_is_offered_on_asyncio_only(pipe, anyio_backend):
    pushed: list = []
    assert pipe.reader.set_receiver(pushed.append) is (anyio_backend == "asyncio")


async def test_pushed_messages_arrive_in_order_and_the_end_still_reaches_receive(pipe, anyio_backend):
    if anyio_backend != "asyncio":
        pytest.skip("pushing is the asyncio fast path")
    pushed: list = []
    assert pipe.reader.set_receiver(pushed.append)
    pipe.write(b"".join(b'{"id":%d}\n' % i for i in range(100)))
    pipe.close_write_end()
    with anyio.fail_after(5):
        with pytest.raises(EOFError):
            await pipe.reader.receive()  # nothing is left for it: every message was pushed
    assert pushed == [{"id": i} for i in range(100)]


async def test_stopping_the_push_leaves_messages_for_receive(pipe, anyio_backend):
    if anyio_backend != "asyncio":
        pytest.skip("pushing is the asyncio fast path")
    pushed: list = []
    pipe.reader.set_receiver(pushed.append)
    pipe.write(b'{"id":1}\n')
    with anyio.fail_after(5):
        while not pushed:
            await anyio.sleep(0.01)
    assert pipe.reader.set_receiver(None)
    pipe.write(b'{"id":2}\n')
    with anyio.fail_after(5):
        assert await pipe.reader.receive() == {"id": 2}
    assert pushed == [{"id": 1}]


async def test_what_is_read_ahead_of_receive_stays_bounded(pipe):
    """A writer that floods while nobody receives: the reader holds at most one chunk's messages;
    the rest stays in the pipe (whose writer then blocks), and every message arrives in order."""
    line = b'{"id":0,"pad":"' + b"x" * 1000 + b'"}\n'
    sent = 0
    wrote_all = anyio.Event()

    def flood() -> None:
        nonlocal sent
        for _ in range(2000):  # about 2 MB: far more than a chunk plus the pipe's buffer
            pipe.write(line)
            sent += 1
        pipe.close_write_end()

    async def writer() -> None:
        await anyio.to_thread.run_sync(flood)
        wrote_all.set()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            await anyio.sleep(0.3)  # nobody receives: the writer must block on the full pipe
            held = len(pipe.reader._ready)
            assert held <= READ_CHUNK // len(line) + 1
            assert not wrote_all.is_set()
            got = 0
            with pytest.raises(EOFError):
                while True:
                    message = await pipe.reader.receive()
                    assert message["id"] == 0
                    got += 1
                    assert len(pipe.reader._ready) <= READ_CHUNK // len(line) + 1
    assert got == sent == 2000

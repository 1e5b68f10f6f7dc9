"""The stdin writer on a real pipe, without a child: order, whole frames, backpressure, EOF, EPIPE."""

from __future__ import annotations

import os

import anyio
import pytest
from kxen_transport_stdio.writer import HIGH_WATER, PipeWriter

pytestmark = pytest.mark.anyio


class Pipe:
    """A pipe whose write end is a PipeWriter (with its writer task) and whose read end the test reads."""

    def __init__(self) -> None:
        self.read_fd, write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self.writer = PipeWriter(write_fd)
        self.data = bytearray()
        self.eof = False

    def read_available(self) -> int:
        """Read whatever the pipe holds now, without waiting; the number of bytes read."""
        got = 0
        while True:
            try:
                chunk = os.read(self.read_fd, 1 << 16)
            except BlockingIOError:
                return got
            if not chunk:
                self.eof = True
                return got
            self.data += chunk
            got += len(chunk)

    async def read_until(self, size: int, seconds: float = 5.0) -> None:
        with anyio.fail_after(seconds):
            while len(self.data) < size and not self.eof:
                if not self.read_available():
                    await anyio.wait_readable(self.read_fd)

    async def read_to_eof(self, seconds: float = 5.0) -> None:
        with anyio.fail_after(seconds):
            while not self.eof:
                if not self.read_available() and not self.eof:
                    await anyio.wait_readable(self.read_fd)

    def close_read_end(self) -> None:
        os.close(self.read_fd)
        self.read_fd = -1


@pytest.fixture
async def pipe():
    p = Pipe()
    async with anyio.create_task_group() as tg:
        tg.start_soon(p.writer.run)
        try:
            yield p
        finally:
            p.writer.close()
            if p.read_fd >= 0:
                os.close(p.read_fd)
    assert p.writer.queued == 0


def frame(i: int, size: int) -> bytes:
    return b"%d:" % i + bytes([97 + i % 26]) * size + b"\n"


def frames_of(data: bytes) -> list[bytes]:
    return [line + b"\n" for line in bytes(data).split(b"\n")[:-1]]


async def test_small_frames_go_straight_into_the_pipe(pipe):
    assert pipe.writer.write_nowait(b"one\n")
    await pipe.writer.write(b"two\n")
    assert pipe.writer.queued == 0  # nothing queued: both went into the pipe at once
    await pipe.read_until(8)
    assert bytes(pipe.data) == b"one\ntwo\n"


async def test_frames_from_many_writers_arrive_whole_and_in_order_per_writer(pipe):
    """The pipe fills up (nobody reads for a while), so most frames go through the backlog."""
    sizes = [10, 3000, 70_000, 1, 200_000, 5000]
    sent: list[bytes] = []

    async def writer(w: int) -> None:
        for k, size in enumerate(sizes):
            data = frame(w * 100 + k, size)
            if not pipe.writer.write_nowait(data):
                await pipe.writer.write(data)
            sent.append(data)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for w in range(8):
                tg.start_soon(writer, w)
            await anyio.wait_all_tasks_blocked()
            assert pipe.writer.queued > HIGH_WATER  # the backlog took the overflow; writers wait
            total = sum(len(f) for f in frame_sizes(sizes, 8))
            await pipe.read_until(total)
    got = frames_of(pipe.data)
    assert sorted(got) == sorted(sent)  # every frame whole: none split by another
    for w in range(8):  # each writer's frames in its own order
        mine = [f for f in got if int(f.split(b":")[0]) // 100 == w]
        assert [int(f.split(b":")[0]) % 100 for f in mine] == list(range(len(sizes)))


def frame_sizes(sizes: list[int], writers: int) -> list[bytes]:
    return [frame(w * 100 + k, size) for w in range(writers) for k, size in enumerate(sizes)]


async def test_write_nowait_refuses_above_the_mark_and_queues_nothing(pipe):
    big = b"x" * (HIGH_WATER * 3) + b"\n"
    assert pipe.writer.write_nowait(big)  # taken: the pipe holds part, the backlog the rest
    queued = pipe.writer.queued
    assert queued > HIGH_WATER
    assert not pipe.writer.write_nowait(b"small\n")
    assert pipe.writer.queued == queued
    await pipe.read_until(len(big))
    assert bytes(pipe.data) == big


async def test_write_waits_for_a_reader_and_is_cancellable(pipe):
    big = b"y" * (HIGH_WATER * 4) + b"\n"
    with anyio.fail_after(5):
        with anyio.move_on_after(0.1) as scope:
            await pipe.writer.write(big)  # nobody reads: it waits for the backlog to drain
    assert scope.cancelled_caught
    assert pipe.writer.queued > 0  # the frame was queued whole; it still goes out whole
    async with anyio.create_task_group() as tg:
        done = anyio.Event()

        async def second() -> None:
            await pipe.writer.write(b"after\n")
            done.set()

        tg.start_soon(second)
        await pipe.read_until(len(big) + 6)
        with anyio.fail_after(5):
            await done.wait()
    assert bytes(pipe.data) == big + b"after\n"


async def test_flush_waits_until_the_backlog_is_empty(pipe):
    big = b"z" * (HIGH_WATER * 2) + b"\n"
    assert pipe.writer.write_nowait(big)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(pipe.read_until, len(big))
            await pipe.writer.flush()
            assert pipe.writer.queued == 0


async def test_close_is_eof_and_wakes_blocked_writers(pipe):
    assert pipe.writer.write_nowait(b"last\n")
    failures: list[BaseException] = []

    async def blocked() -> None:
        try:
            await pipe.writer.write(b"w" * (HIGH_WATER * 4) + b"\n")
        except anyio.ClosedResourceError as exc:
            failures.append(exc)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(blocked)
            await anyio.wait_all_tasks_blocked()
            pipe.writer.close()
        assert len(failures) == 1
        assert not pipe.writer.write_nowait(b"more\n")
        with pytest.raises(anyio.ClosedResourceError):
            await pipe.writer.write(b"more\n")
        await pipe.read_to_eof()
    assert bytes(pipe.data).startswith(b"last\n")  # what the pipe had taken is still read, then EOF


async def test_a_closed_read_end_breaks_the_pipe(pipe):
    pipe.close_read_end()  # the child closed its stdin (or died)
    assert not pipe.writer.write_nowait(b"lost\n")
    with pytest.raises(anyio.BrokenResourceError) as info:
        await pipe.writer.write(b"lost\n")
    assert isinstance(info.value.__cause__, BrokenPipeError)


async def test_a_reader_that_goes_away_fails_the_waiting_writer(pipe):
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            failures: list[BaseException] = []

            async def blocked() -> None:
                try:
                    await pipe.writer.write(b"v" * (HIGH_WATER * 4) + b"\n")
                except anyio.BrokenResourceError as exc:
                    failures.append(exc)

            tg.start_soon(blocked)
            await anyio.wait_all_tasks_blocked()
            pipe.close_read_end()  # the writer task's next write gets EPIPE
    assert len(failures) == 1 and pipe.writer.queued == 0

"""The child process layer (``child.py``) on real processes: pipes, exit, waiters, fds, no thread."""

from __future__ import annotations

import os
import signal
import sys
import threading

import anyio
import pytest
from kxen_transport_stdio.child import ByteReader, spawn

pytestmark = pytest.mark.anyio

PY = [sys.executable, "-I", "-S", "-c"]


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


class Started:
    """A child from ``spawn`` with its stdout as a :class:`ByteReader` (the transport reads it otherwise)."""

    def __init__(self, code: str) -> None:
        stdin_read, stdin_write = os.pipe()
        out_read, out_write = os.pipe()
        try:
            self.child = spawn(
                [*PY, code], stdin=stdin_read, stdout=out_write, cwd=os.getcwd(), env={"PATH": os.defpath}
            )
        except BaseException:
            os.close(out_read)
            raise
        finally:
            for fd in (stdin_read, stdin_write, out_write):  # the child sees EOF on stdin at once
                os.close(fd)
        self.stdout = ByteReader(out_read)
        self.stderr, self.pid = self.child.stderr, self.child.pid
        self.wait = self.child.wait

    @property
    def returncode(self) -> int | None:
        return self.child.returncode

    @property
    def _pidfd(self) -> int | None:
        return self.child._pidfd

    async def aclose(self) -> None:
        self.stdout.close()
        await self.child.aclose()


def _start(code: str) -> Started:
    return Started(code)


async def _read_all(reader: ByteReader) -> bytes:
    out = bytearray()
    with anyio.fail_after(10):
        async for chunk in reader:
            out += chunk
    return bytes(out)


async def test_output_exit_code_and_eof() -> None:
    proc = _start("import sys; sys.stdout.write('out'); sys.stderr.write('err'); sys.exit(3)")
    try:
        assert await _read_all(proc.stdout) == b"out"
        assert await _read_all(proc.stderr) == b"err"
        with anyio.fail_after(10):
            assert await proc.wait() == 3
        assert proc.returncode == 3
        with pytest.raises(anyio.EndOfStream):
            await proc.stdout.receive()
    finally:
        await proc.aclose()


async def test_killed_by_a_signal_is_a_negative_code() -> None:
    proc = _start("import time; time.sleep(60)")
    try:
        assert proc.returncode is None
        os.kill(proc.pid, signal.SIGKILL)
        with anyio.fail_after(10):
            assert await proc.wait() == -signal.SIGKILL
    finally:
        await proc.aclose()


async def test_many_waiters_and_a_cancelled_one_hands_over() -> None:
    proc = _start("import sys; sys.stdin.read(); import time; time.sleep(0.3)")
    codes: list[int] = []
    try:
        async with anyio.create_task_group() as tg:

            async def waiter() -> None:
                codes.append(await proc.wait())

            with anyio.move_on_after(0.05):  # the first watcher is cancelled while the others wait
                tg.start_soon(waiter)
                await proc.wait()
            for _ in range(3):
                tg.start_soon(waiter)
            with anyio.fail_after(10):
                await proc.wait()
        assert codes == [0, 0, 0, 0]
    finally:
        await proc.aclose()


async def test_without_a_pidfd_the_exit_is_polled(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(pid: int) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", refused)
    proc = _start("import time; time.sleep(0.05)")
    try:
        assert proc._pidfd is None
        with anyio.fail_after(10):
            assert await proc.wait() == 0
    finally:
        await proc.aclose()


async def test_the_child_gets_only_its_three_fds_and_the_parent_keeps_none() -> None:
    before = _fds()
    proc = _start("import os, sys; sys.stdout.write(' '.join(sorted(os.listdir('/proc/self/fd'))))")
    try:
        # the child's own listing opens one more fd (the directory) while it reads
        assert set((await _read_all(proc.stdout)).split()) - {b"3"} == {b"0", b"1", b"2"}
        with anyio.fail_after(10):
            await proc.wait()
    finally:
        await proc.aclose()
    assert _fds() == before


async def test_a_failed_start_leaks_no_fd() -> None:
    before = _fds()
    stdin_read, stdin_write = os.pipe()
    try:
        with pytest.raises(FileNotFoundError):
            spawn(["/nonexistent/kxen-no-such-command"], stdin=stdin_read, stdout=stdin_write, cwd=os.getcwd(), env={})
        with pytest.raises(ValueError):
            spawn([sys.executable, "a\0b"], stdin=stdin_read, stdout=stdin_write, cwd=os.getcwd(), env={})
    finally:
        os.close(stdin_read)
        os.close(stdin_write)
    assert _fds() == before


async def test_no_thread_is_started_per_child() -> None:
    threads = threading.active_count()
    procs = [_start("pass") for _ in range(5)]
    try:
        assert threading.active_count() == threads
        with anyio.fail_after(10):
            for proc in procs:
                assert await proc.wait() == 0
    finally:
        for proc in procs:
            await proc.aclose()


async def test_closing_wakes_a_waiting_reader() -> None:
    read_fd, write_fd = os.pipe()
    reader = ByteReader(read_fd)
    failed: list[BaseException] = []
    try:
        async with anyio.create_task_group() as tg:

            async def read() -> None:
                try:
                    await reader.receive()
                except BaseException as exc:
                    failed.append(exc)

            tg.start_soon(read)
            await anyio.wait_all_tasks_blocked()
            reader.close()
        assert len(failed) == 1 and isinstance(failed[0], anyio.ClosedResourceError)
        with pytest.raises(anyio.ClosedResourceError):
            await reader.receive()
    finally:
        os.close(write_fd)


async def test_a_flooding_child_leaves_the_loop_its_turns() -> None:
    """A child that writes without pause: another task keeps running while it is read."""
    proc = _start("import os\nwhile True:\n    os.write(1, b'x' * 65536)")
    ticks = 0
    try:
        async with anyio.create_task_group() as tg:

            async def tick() -> None:
                nonlocal ticks
                while ticks < 50:
                    ticks += 1
                    await anyio.lowlevel.checkpoint()

            tg.start_soon(tick)
            got = 0
            with anyio.fail_after(20):
                while ticks < 50 and got < 1 << 28:  # bounded: 50 turns of the other task, or 256 MiB
                    got += len(await proc.stdout.receive(1 << 16))
        assert ticks == 50
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        with anyio.fail_after(10):
            await proc.wait()
        await proc.aclose()


async def test_reads_without_a_wait_give_the_loop_a_turn_each() -> None:
    """Bytes always there (a full pipe): every read after one that did not wait lets another task run."""
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"x" * 4096)
    reader = ByteReader(read_fd)
    ticks = 0
    try:
        async with anyio.create_task_group() as tg:

            async def tick() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await anyio.lowlevel.checkpoint()

            tg.start_soon(tick)
            await anyio.lowlevel.checkpoint()  # the ticker is running
            before = ticks
            for _ in range(1000):
                assert await reader.receive(1) == b"x"
            # about one turn per read after the first (none at all without them)
            assert ticks - before >= 500
            tg.cancel_scope.cancel()
    finally:
        reader.close()
        os.close(write_fd)


async def test_servers_started_together_all_spawn_before_any_bookkeeping(kxen_home, workspace, monkeypatch):
    """Three servers of one Runtime: every child is spawned before the first one's /proc read."""
    from kxen_testing import running
    from kxen_transport_stdio import transport
    from stdio_support import STDIO, helper

    events: list[str] = []
    real_spawn, real_stat = transport.spawn, transport.stat

    def spawn(*args, **kwargs):
        events.append("spawn")
        return real_spawn(*args, **kwargs)

    def stat(pid):
        events.append("stat")
        return real_stat(pid)

    monkeypatch.setattr(transport, "spawn", spawn)
    monkeypatch.setattr(transport, "stat", stat)
    async with running(kxen_home, workspace, servers={f"s{i}": helper() for i in range(3)}, allow=STDIO) as rt:
        assert [s["state"] for s in rt.status()] == ["ready"] * 3
    assert events[:4] == ["spawn", "spawn", "spawn", "stat"], events

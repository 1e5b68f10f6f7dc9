"""The child process: started by ``subprocess.Popen``, read with ``os.read``, its exit seen on a pidfd.

Not ``anyio.open_process``: on Python 3.11 asyncio watches every child with a thread of its own,
and starting that thread holds the event loop until the thread first runs -- milliseconds per
server on a busy two-core machine, and twenty times that when twenty servers start at once -- and
every read goes through asyncio's pipe transport, a ``StreamReader`` and anyio's wrapper of it.
Here the process is started by the same ``Popen`` (fork and exec, its own session, the given fds
only), its stdout and stderr are our own non-blocking pipes, read with ``os.read`` when
``anyio.wait_readable`` says they hold something, and its exit is a pidfd (Linux 5.3 and later)
that becomes readable when the process ends; where there is none, the exit is polled
(:data:`POLL_SECONDS` doubling up to :data:`POLL_MAX_SECONDS`). One code path on every anyio backend.

A reader that got bytes without waiting gives the event loop one turn before it reads again, so a
child that writes without pause cannot keep the loop to itself.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence

import anyio
import anyio.lowlevel

#: the first pause between looks at a child's exit where there is no pidfd; it doubles each time
POLL_SECONDS = 0.001
POLL_MAX_SECONDS = 0.05


class PipeReader:
    """The read end of one of the child's output pipes, as an anyio byte stream: ``receive``
    (``EndOfStream`` at the end), ``aclose``, and ``async for``."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd: int | None = fd
        self._waited = True  # the last receive waited for its bytes (or there was none yet)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._waited:
            await anyio.lowlevel.checkpoint()  # bytes came without a wait last time: the loop's turn
        self._waited = False
        while True:
            fd = self._fd
            if fd is None:
                raise anyio.ClosedResourceError
            try:
                data = os.read(fd, max_bytes)
            except BlockingIOError:
                self._waited = True
                await anyio.wait_readable(fd)  # ClosedResourceError once aclose() announced the close
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError(f"pipe: {exc.strerror or exc}") from exc
            if not data:
                raise anyio.EndOfStream
            return data

    def __aiter__(self) -> PipeReader:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        """Close the pipe (idempotent); a task waiting to read gets ``ClosedResourceError``."""
        fd, self._fd = self._fd, None
        if fd is not None:
            _close(fd)


class Child:
    """A started child: ``pid``, ``returncode`` (None while it runs), ``wait()``, ``stdout`` and
    ``stderr`` (:class:`PipeReader`), ``aclose()`` once it is reaped (or given up)."""

    def __init__(self, popen: subprocess.Popen[bytes], stdout: int, stderr: int) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdout = PipeReader(stdout)
        self.stderr = PipeReader(stderr)
        try:
            self._pidfd: int | None = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # not Linux, a kernel before 5.3, or a sandbox that refuses it
            self._pidfd = None
        self._watching: anyio.Event | None = None  # set when the task watching the exit stops watching

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    async def wait(self) -> int:
        """The exit status, once the child has exited (and is reaped). Any number of tasks may wait;
        one watches the exit at a time, the others wait for it (and take over if it is cancelled)."""
        popen = self._popen
        while popen.poll() is None:
            watching = self._watching
            if watching is not None:
                await watching.wait()
                continue
            self._watching = watching = anyio.Event()
            try:
                await self._watch()
            finally:
                self._watching = None
                watching.set()
        return popen.returncode

    async def _watch(self) -> None:
        popen, pidfd = self._popen, self._pidfd
        if pidfd is not None:
            await anyio.wait_readable(pidfd)  # readable once the process has exited
            return
        pause = POLL_SECONDS
        while popen.poll() is None:
            await anyio.sleep(pause)
            pause = min(pause * 2, POLL_MAX_SECONDS)

    async def aclose(self) -> None:
        """Close both pipes and the pidfd (idempotent). The process is not waited for here."""
        self.stdout.close()
        self.stderr.close()
        pidfd, self._pidfd = self._pidfd, None
        if pidfd is not None:
            _close(pidfd)


def _close(fd: int) -> None:
    try:
        anyio.notify_closing(fd)  # a wait_readable on it ends at once, before the number is reused
    except RuntimeError:  # no event loop running (closed from a finalizer): nobody can be waiting
        pass
    os.close(fd)


def spawn(argv: Sequence[str], *, stdin: int, cwd: str, env: Mapping[str, str]) -> Child:
    """Start ``argv`` in its own session (so its group can be stopped whole) with ``stdin`` as its
    fd 0, new pipes as its stdout and stderr, ``cwd`` and exactly ``env``; no other fd is passed.
    Raises ``OSError`` (and ``ValueError`` for a NUL byte) as ``Popen`` does."""
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        popen = subprocess.Popen(
            list(argv), stdin=stdin, stdout=out_write, stderr=err_write, cwd=cwd, env=dict(env), start_new_session=True
        )
    except BaseException:
        for fd in (out_read, err_read):
            os.close(fd)
        raise
    finally:
        for fd in (out_write, err_write):  # the child has its copies: EOF follows the child alone
            os.close(fd)
    return Child(popen, out_read, err_read)


__all__ = ["Child", "POLL_MAX_SECONDS", "POLL_SECONDS", "PipeReader", "spawn"]

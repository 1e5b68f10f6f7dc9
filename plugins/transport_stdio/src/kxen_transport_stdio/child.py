"""The child process: started by ``subprocess.Popen``, its exit seen on a pidfd, stderr read with ``os.read``.

Not ``anyio.open_process``: on Python 3.11 asyncio watches every child with a thread of its own,
and starting that thread holds the event loop until the thread first runs -- milliseconds per
server on a busy two-core machine, and twenty times that when twenty servers start at once -- and
every read goes through asyncio's pipe transport, a ``StreamReader`` and anyio's wrapper of it.
Here the process is started by the same ``Popen`` (fork and exec, its own session, the given fds
only); its exit is a pidfd (Linux 5.3 and later) that becomes readable when the process ends, and
where there is none, the exit is polled (:data:`POLL_SECONDS` doubling up to
:data:`POLL_MAX_SECONDS`). The transport makes the stdin and stdout pipes itself (:mod:`.writer`,
:mod:`.reader`); stderr is a non-blocking pipe made here, read with ``os.read`` when
``anyio.wait_readable`` says it holds something (:class:`ByteReader`). One code path on every anyio
backend.

A :class:`ByteReader` that got bytes without waiting gives the event loop one turn before it reads
again, so a child that writes without pause cannot keep the loop to itself.
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


class ByteReader:
    """The read end of a pipe (the child's stderr), as an anyio byte stream: ``receive``
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

    def __aiter__(self) -> ByteReader:
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
    """A started child: ``pid``, ``returncode`` (None while it runs), ``wait()``, ``stderr``
    (:class:`ByteReader`), ``aclose()`` once it is reaped (or given up)."""

    def __init__(self, popen: subprocess.Popen[bytes], stderr: int) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stderr = ByteReader(stderr)
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
        """Close stderr and the pidfd (idempotent). The process is not waited for here."""
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


def spawn(argv: Sequence[str], *, stdin: int, stdout: int, cwd: str, env: Mapping[str, str]) -> Child:
    """Start ``argv`` in its own session (so its group can be stopped whole) with ``stdin`` and
    ``stdout`` as its fds 0 and 1 (the caller's pipe ends, which the caller closes), a new pipe as
    its stderr, ``cwd`` and exactly ``env``; no other fd is passed. Raises ``OSError`` (and
    ``ValueError`` for a NUL byte) as ``Popen`` does."""
    err_read, err_write = os.pipe()
    try:
        popen = subprocess.Popen(
            list(argv), stdin=stdin, stdout=stdout, stderr=err_write, cwd=cwd, env=dict(env), start_new_session=True
        )
    except BaseException:
        os.close(err_read)
        raise
    finally:
        os.close(err_write)  # the child has its copy: EOF follows the child alone
    return Child(popen, err_read)


__all__ = ["ByteReader", "Child", "POLL_MAX_SECONDS", "POLL_SECONDS", "spawn"]

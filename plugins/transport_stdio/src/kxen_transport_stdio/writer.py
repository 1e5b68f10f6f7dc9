"""Writing to the child's stdin: a non-blocking pipe, one code path on every anyio backend.

The transport creates the pipe itself (``os.pipe``), hands the read end to the child as its stdin
and keeps the write end here, non-blocking. A frame (one encoded message and its newline) goes
straight into the pipe with ``os.write`` when nothing is queued before it: no task switch, no
cancel scope. What the pipe does not take at once (it is full: the child reads slower than we
write) is queued, in order, in a backlog that the writer task (:meth:`PipeWriter.run`) drains
whenever ``anyio.wait_writable`` says the pipe has room.

Frames never interleave: a frame is written directly only when the backlog is empty, and the rest
of a short write is queued before anything else can run (nothing here awaits in between).

Backpressure: ``write_nowait`` queues nothing and returns False while the backlog is above
:data:`HIGH_WATER`. ``write`` waits until it is not, queues the frame, then waits until the backlog
is back under the mark (as ``StreamWriter.write`` + ``drain`` do), so a child that stops reading
blocks the writer, never memory: the backlog stays under the mark plus about one frame.

EOF is closing the write end (:meth:`PipeWriter.close`); :meth:`PipeWriter.flush` first gives the
backlog a chance to go out whole. Every waiting writer then fails with ``ClosedResourceError``, or
with ``BrokenResourceError`` once the child has closed its end of the pipe.
"""

from __future__ import annotations

import os
from collections import deque

import anyio

#: the backlog (bytes the pipe has not taken yet) above which writers wait
HIGH_WATER = 64 * 1024


class PipeWriter:
    """The write end of the child's stdin pipe, with its backlog and its writer task."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._backlog: deque[bytes | memoryview] = deque()
        #: bytes in the backlog
        self.queued = 0
        self._closed = False
        self._broken: OSError | None = None  # the child closed its end (EPIPE), or another write error
        self._wake = anyio.Event()  # set when the writer task has a backlog to drain
        self._room: anyio.Event | None = None  # set (and dropped) when the backlog shrinks

    # --- writing ----------------------------------------------------------------------------------

    def write_nowait(self, data: bytes) -> bool:
        """Write or queue ``data`` without waiting; False, with nothing queued, under backpressure,
        once closed, or when the pipe is broken."""
        if self.queued > HIGH_WATER or self._closed or self._broken is not None:
            return False
        return self._put(data)

    async def write(self, data: bytes) -> None:
        """Queue ``data`` once the backlog is under the mark, then wait until it is again."""
        await self._drained(HIGH_WATER)
        if not self._put(data):
            raise self._failure()
        await self._drained(HIGH_WATER)

    async def flush(self) -> None:
        """Wait until the backlog is empty (the pipe took every byte)."""
        await self._drained(0)

    def _put(self, data: bytes) -> bool:
        if self.queued:  # keep the order: behind what is queued already
            self._backlog.append(data)
            self.queued += len(data)
            return True
        try:
            written = os.write(self._fd, data)
        except BlockingIOError:
            written = 0
        except OSError as exc:  # EPIPE: the child closed its stdin or is gone
            self._fail(exc)
            return False
        if written < len(data):
            rest = memoryview(data)[written:]
            self._backlog.append(rest)
            self.queued = len(rest)
            self._wake.set()
        return True

    async def _drained(self, limit: int) -> None:
        while self.queued > limit and not self._closed and self._broken is None:
            if self._room is None:
                self._room = anyio.Event()
            await self._room.wait()
        if self._closed or self._broken is not None:
            raise self._failure()

    def _failure(self) -> Exception:
        if self._closed:
            return anyio.ClosedResourceError()
        error = anyio.BrokenResourceError(f"stdin pipe: {self._broken}")
        error.__cause__ = self._broken
        return error

    # --- the writer task ----------------------------------------------------------------------

    async def run(self) -> None:
        """Drain the backlog whenever the pipe has room, until the pipe is closed or broken."""
        while not self._closed and self._broken is None:
            if not self.queued:
                await self._wake.wait()
                self._wake = anyio.Event()
                continue  # look again: the event may be stale, or the pipe closed meanwhile
            try:
                await anyio.wait_writable(self._fd)
            except anyio.ClosedResourceError:  # close() announced the fd is going away
                return
            self._drain()

    def _drain(self) -> None:
        backlog = self._backlog
        before = self.queued
        while backlog:
            head = backlog[0]
            try:
                written = os.write(self._fd, head)
            except BlockingIOError:
                break
            except OSError as exc:
                self._fail(exc)
                return
            self.queued -= written
            if written < len(head):
                backlog[0] = head[written:]
                break
            backlog.popleft()
        if self.queued < before:
            self._signal_room()

    def _signal_room(self) -> None:
        room, self._room = self._room, None
        if room is not None:
            room.set()

    # --- the end ------------------------------------------------------------------------------

    def _fail(self, exc: OSError) -> None:
        self._broken = exc
        self._drop()

    def _drop(self) -> None:
        self._backlog.clear()
        self.queued = 0
        self._signal_room()
        self._wake.set()

    def close(self) -> None:
        """EOF for the child: drop the backlog, close the write end; waiting writers fail. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._drop()
        anyio.notify_closing(self._fd)  # a wait_writable on it ends at once, before the number is reused
        os.close(self._fd)


__all__ = ["HIGH_WATER", "PipeWriter"]

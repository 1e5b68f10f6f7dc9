"""Reading the child's stdout: a non-blocking pipe the transport makes itself, split into messages.

The transport creates the pipe (``os.pipe``), hands the write end to the child as its stdout and
keeps the read end here, non-blocking. Chunks of at most :data:`READ_CHUNK` bytes go through a
:class:`~kxen_transport_stdio.framing.LineReader`; :meth:`PipeReader.receive` returns its messages
one by one and raises :class:`EOFError` once the pipe is at its end and every message was taken.

How the pipe is watched depends on the event loop, chosen once on :meth:`PipeReader.start`:

* asyncio (the fast path, see docs/performance.md): one reader callback stays registered with the
  loop (``loop.add_reader``). When the pipe is readable, the callback reads and splits the chunk
  at once and wakes the waiting ``receive``: the answer reaches the session in the same loop
  iteration that saw it arrive, with no task switch in between and no watch set up per read.
* every other backend: ``receive`` itself waits with ``anyio.wait_readable`` and reads.

Memory stays bounded the same way on both: a chunk is read only when every message of the last one
was taken. On asyncio a callback that finds messages still waiting stops watching the pipe until
``receive`` has taken them all (a child that floods faster than the session reads stays paused in
the pipe, never in memory).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from .framing import LineReader

if TYPE_CHECKING:
    import asyncio

#: the most read from the pipe at once
READ_CHUNK = 256 * 1024


def _running_asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The asyncio loop running this task, if the task runs on asyncio (never under trio)."""
    asyncio = sys.modules.get("asyncio")  # no asyncio loop runs without it loaded
    if asyncio is None:
        return None
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no asyncio loop in this thread
        return None
    return None if task is None else asyncio.get_running_loop()


class PipeReader:
    """The read end of the child's stdout pipe and the messages read from it."""

    def __init__(self, fd: int, max_line_bytes: int, diag: Callable[[str], None]) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._lines = LineReader(max_line_bytes, diag)
        self._ready = self._lines.ready
        self.eof = False  # the pipe is at its end (or was closed here)
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watching = False  # asyncio: the reader callback is registered
        self._waiter: asyncio.Future | None = None  # asyncio: the receive waiting for the callback
        self._receiver: Callable[[Any], None] | None = None  # asyncio: takes each message as it is read
        #: called once after the first read from the pipe (bytes or its end); on asyncio in a callback
        #: of its own, after whatever that read woke (the session's step comes first)
        self.after_first_read: Callable[[], None] | None = None
        self._first_read_due: Callable[[], None] | None = None

    def start(self) -> None:
        """Choose how to watch the pipe; call from a task of the loop that will receive."""
        self._loop = _running_asyncio_loop()
        if self._loop is not None:
            self._watch()

    # --- reading ----------------------------------------------------------------------------------

    def _read(self) -> bool:
        """Read one chunk into the line reader; False when the pipe had nothing yet."""
        try:
            chunk = os.read(self._fd, READ_CHUNK)
        except BlockingIOError:
            return False
        except OSError:  # the pipe is broken: its end
            chunk = b""
        if self.after_first_read is not None:
            self._first_read_due, self.after_first_read = self.after_first_read, None
        if chunk:
            self._lines.feed(chunk)
        else:
            self._at_end()
        return True

    def _at_end(self) -> None:
        if not self.eof:
            self.eof = True
            self._unwatch()
            self._lines.finish()  # a last line without its newline still counts

    async def receive(self) -> Any:
        """The next message; :class:`EOFError` at the end of the pipe once every message was taken."""
        ready = self._ready
        loop = self._loop
        while not ready:
            if self.eof:
                raise EOFError
            if loop is not None:
                if not self._watching:
                    self._watch()  # the callback paused: everything it read is taken now
                waiter = self._waiter = loop.create_future()
                try:
                    await waiter
                finally:
                    self._waiter = None
            else:
                try:
                    await anyio.wait_readable(self._fd)
                except (anyio.ClosedResourceError, OSError):  # closed here meanwhile
                    self._at_end()
                    continue
                if not self._closed:
                    self._read()
                    self._first_read_done()
        return ready.popleft()

    def _first_read_done(self) -> None:
        hook, self._first_read_due = self._first_read_due, None
        if hook is None:
            return
        if self._loop is not None:
            self._loop.call_soon(hook)
        else:
            hook()

    # --- asyncio: the reader callback ---------------------------------------------------------

    def set_receiver(self, receiver: Callable[[Any], None] | None) -> bool:
        """On asyncio, hand every message read from now on to ``receiver`` in the reader callback
        (``None``: stop; messages wait for ``receive`` again) and return True; elsewhere False."""
        if self._loop is None:
            return False
        self._receiver = receiver
        if receiver is None and self._ready:
            self._unwatch()  # what was read waits for receive, which watches again once it took it all
        return True

    def _on_readable(self) -> None:
        receiver = self._receiver
        if self._ready and receiver is None:  # the last chunk's messages are not all taken: pause until they are
            self._unwatch()
        elif not self._read():
            return
        if receiver is not None:
            ready = self._ready
            while ready and self._receiver is receiver:
                receiver(ready.popleft())
        waiter = self._waiter
        if waiter is not None and (self._ready or self.eof) and not waiter.done():
            waiter.set_result(None)
        if self._first_read_due is not None:
            self._first_read_done()

    def _watch(self) -> None:
        if not self._closed and not self.eof:
            assert self._loop is not None
            self._loop.add_reader(self._fd, self._on_readable)
            self._watching = True

    def _unwatch(self) -> None:
        if self._watching:
            assert self._loop is not None
            self._watching = False
            self._loop.remove_reader(self._fd)

    # --- the end ------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop reading and close the read end (a waiting ``receive`` ends with EOFError). Idempotent."""
        if self._closed:
            return
        self._unwatch()
        self._closed = True
        self.eof = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if self._loop is None:
            anyio.notify_closing(self._fd)  # a wait_readable on it ends at once, before the number is reused
        os.close(self._fd)


__all__ = ["READ_CHUNK", "PipeReader"]

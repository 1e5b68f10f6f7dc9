"""The stdio transport: one child process per server, in its own process group.

Launch: no shell; the command is made absolute against the child's PATH (relative entries and a
command with a slash count from the cwd; symlinks are kept, as exec would run them); cwd is the
server's ``cwd`` (relative to the workspace) or the workspace; the environment is cleared and gets
only :data:`ENV_PASSTHROUGH` from the host, then the server's configured ``env`` on top.

Framing: one JSON message per line on stdout. A line that is not JSON, or longer than the line
bound, is a diagnostic and is skipped (memory stays bounded: an oversized line is discarded as it
streams in). stderr is drained into a bounded tail, shown by ``describe()`` and in the close reason
together with the exit code or signal.

Close: close stdin, give the child a moment to exit on EOF, SIGTERM the whole process group (unless the
child is reaped and its group is empty), SIGKILL the group if anything in it is still alive after
:data:`TERM_GRACE_SECONDS`, then reap the child. The close is shielded from cancellation and bounded in
time, so no grandchild survives a stop.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

from kxen_core.errors import ClosedError, ConnectError

from .options import StdioOptions

#: host variables a child may inherit; everything else is cleared
ENV_PASSTHROUGH = ("HOME", "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "PATH", "SHELL", "TMPDIR", "USER")
STDERR_TAIL_BYTES = 16 * 1024
READ_CHUNK = 256 * 1024
EOF_GRACE_SECONDS = 0.1
#: after stdout ends, how long to wait for the exit code and the rest of stderr
EXIT_SETTLE_SECONDS = 0.5
STDERR_SETTLE_SECONDS = 0.1
TERM_GRACE_SECONDS = 0.8
KILL_WAIT_SECONDS = 2.0


def child_env(configured: dict[str, str], host: dict[str, str] | None = None) -> dict[str, str]:
    host = os.environ if host is None else host
    env = {k: host[k] for k in ENV_PASSTHROUGH if k in host}
    env.update(configured)
    return env


class _Stream:
    """The MessageStream of one running child."""

    def __init__(self, transport: StdioTransport, proc: Process) -> None:
        self._t = transport
        self._proc = proc
        self._stdin = proc.stdin
        # On anyio's asyncio backend stdin wraps an asyncio.StreamWriter. Writing to it directly saves
        # two checkpoints (a cancel scope and a task switch) per message, which the benchmark showed
        # to be the largest per-call cost; write + drain keep the same backpressure. Any other
        # backend, or a wrapper without that writer, takes the generic anyio path.
        writer = getattr(proc.stdin, "_stream", None)
        self._writer = writer if isinstance(writer, asyncio.StreamWriter) else None
        self._high = self._writer.transport.get_write_buffer_limits()[1] if self._writer else 0
        self._stdout = proc.stdout
        self._ready: deque[Any] = deque()
        self._parts: list[bytes] = []  # the pieces of the line being received (no newline yet)
        self._held = 0  # their total size, never above the line bound
        self._skipping = False  # inside an oversized line, discarding until its newline
        self._eof = False
        self._dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
        self._loads = json.loads

    def _encode(self, message: dict[str, Any]) -> bytes:
        try:
            return (self._dumps(message) + "\n").encode()
        except UnicodeEncodeError:  # a lone surrogate: JSON carries it as an escape
            return (json.dumps(message, separators=(",", ":")) + "\n").encode()

    def send_nowait(self, message: dict[str, Any]) -> bool:
        """Queue ``message`` for the child without waiting; False (nothing queued) under backpressure."""
        w = self._writer
        if w is None or w.is_closing() or w.transport.get_write_buffer_size() > self._high:
            return False
        data = self._encode(message)
        w.write(data)
        return True

    async def send(self, message: dict[str, Any]) -> None:
        data = self._encode(message)
        w = self._writer
        try:
            if w is None:
                await self._stdin.send(data)
            else:
                if w.is_closing():
                    raise anyio.ClosedResourceError
                w.write(data)
                await w.drain()  # returns at once unless the pipe is over its high-water mark
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError, RuntimeError) as exc:
            await self._t.settle()
            raise ClosedError(f"cannot write to server: {self._t.exit_reason()}", server=self._t.name) from exc

    async def receive(self) -> Any:
        ready = self._ready
        while not ready:
            if self._eof:
                await self._t.settle()  # so the reason has the exit code and the last of stderr
                raise ClosedError(self._t.exit_reason(), server=self._t.name)
            try:
                chunk = await self._stdout.receive(READ_CHUNK)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._eof = True
                if self._parts and not self._skipping:
                    self._parse(b"".join(self._parts))
                self._parts = []
                continue
            self._feed(chunk)
        return ready.popleft()

    def _feed(self, chunk: bytes) -> None:
        # linear in the data: only the new chunk is searched, a long line is joined once
        nl = chunk.find(b"\n")
        if nl < 0:
            self._hold(chunk)
            return
        if self._skipping:
            self._skipping = False
        elif self._parts:
            self._parts.append(chunk[:nl])
            line = b"".join(self._parts)
            self._parts = []
            self._held = 0
            self._parse(line)
        elif nl:
            self._parse(chunk[:nl])
        start = nl + 1
        find = chunk.find
        while True:
            nl = find(b"\n", start)
            if nl < 0:
                break
            if nl > start:
                self._parse(chunk[start:nl])
            start = nl + 1
        if start < len(chunk):
            self._hold(chunk[start:])

    def _hold(self, piece: bytes) -> None:
        if self._skipping:
            return
        self._held += len(piece)
        if self._held > self._t.max_line_bytes:
            self._t.diag(f"stdout line longer than {self._t.max_line_bytes} bytes skipped")
            self._skipping = True
            self._parts = []
            self._held = 0
        else:
            self._parts.append(piece)

    def _parse(self, line: bytes) -> None:
        if len(line) > self._t.max_line_bytes:
            self._t.diag(f"stdout line longer than {self._t.max_line_bytes} bytes skipped")
            return
        try:
            self._ready.append(self._loads(line))
        except (ValueError, RecursionError):  # RecursionError: nested too deeply to decode
            text = line.strip()
            if text:
                shown = text[:200].decode("utf-8", "replace")
                self._t.diag(f"non-JSON stdout line skipped ({len(line)} bytes): {shown!r}")

    def describe(self) -> dict[str, Any]:
        return self._t.describe()


class StdioTransport:
    """Async context manager: start the server process, yield its stream, stop its whole group."""

    def __init__(self, server: Any, context: Any) -> None:
        self.server = server
        self.name = server.name
        self.context = context
        options = context.options if isinstance(context.options, StdioOptions) else StdioOptions()
        self.max_line_bytes = options.maxLineBytes
        self._proc: Process | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._stderr_done: anyio.Event | None = None
        self._settled: anyio.Event | None = None
        self.pid: int | None = None

    def diag(self, message: str) -> None:
        self.context.diagnostic(message)

    def stderr_tail(self, limit: int = 2000) -> str:
        text = b"".join(self._stderr)[-limit:].decode("utf-8", "replace")
        return text

    def exit_reason(self) -> str:
        proc = self._proc
        code = proc.returncode if proc is not None else None
        if code is None:
            reason = "server closed its stdout"
        elif code < 0:
            reason = f"server was killed by signal {_signal_name(-code)}"
        else:
            reason = f"server exited with code {code}"
        tail = self.stderr_tail(500).strip()
        return f"{reason}; stderr: {tail}" if tail else reason

    def describe(self) -> dict[str, Any]:
        return {"pid": self.pid, "stderr": self.stderr_tail()}

    async def settle(self) -> None:
        """stdout ended: give the child a moment to exit and its stderr to drain (bounded, done once)."""
        proc, done = self._proc, self._stderr_done
        if proc is None or done is None:
            return
        if self._settled is not None:  # another task is settling (or did): wait for it
            await self._settled.wait()
            return
        self._settled = anyio.Event()
        try:
            with anyio.move_on_after(EXIT_SETTLE_SECONDS):
                await proc.wait()
            with anyio.move_on_after(STDERR_SETTLE_SECONDS):
                await done.wait()
        finally:
            self._settled.set()

    async def __aenter__(self) -> _Stream:
        launch = self.context.launch
        if launch is None or launch.command is None:
            raise ConnectError("no resolved launch was given to the stdio transport", server=self.name)
        # exactly what the core resolved (and, for a project server, had approved): no second lookup
        command, args, cwd, env = launch.command, list(launch.args), Path(launch.cwd), child_env(launch.env)
        if not cwd.is_dir():
            raise ConnectError(f"working directory does not exist: {cwd}", server=self.name)
        try:
            self._proc = await anyio.open_process(
                [command, *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=str(cwd),
                env=env,
                start_new_session=True,  # its own session and process group: we stop the whole group
            )
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in an argument or env value
            raise ConnectError(f"cannot start {command!r}: {getattr(exc, 'strerror', None) or exc}", server=self.name) from exc
        self.pid = self._proc.pid
        self._stderr_done = anyio.Event()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._drain_stderr)
        return _Stream(self, self._proc)

    async def _drain_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None and self._stderr_done is not None
        tail = self._stderr
        try:
            async for chunk in self._proc.stderr:
                if len(chunk) > STDERR_TAIL_BYTES:
                    chunk = chunk[-STDERR_TAIL_BYTES:]
                tail.append(chunk)
                self._stderr_size += len(chunk)
                while self._stderr_size > STDERR_TAIL_BYTES and len(tail) > 1:
                    self._stderr_size -= len(tail.popleft())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            self._stderr_done.set()

    async def __aexit__(self, *exc: Any) -> bool | None:
        with anyio.CancelScope(shield=True):
            await self._stop()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
        return None

    async def _stop(self) -> None:
        proc = self._proc
        if proc is None:
            return
        pgid = proc.pid  # start_new_session: the child leads its own group
        try:
            await proc.stdin.aclose()  # type: ignore[union-attr]
        except Exception:
            pass
        with anyio.move_on_after(EOF_GRACE_SECONDS):
            await proc.wait()
        # the group may hold grandchildren even when the child itself has exited; once the child is
        # reaped and its group is empty, the id is not ours any more: signal nothing
        if proc.returncode is None or _group_alive(pgid):
            _killpg(pgid, signal.SIGTERM)
            with anyio.move_on_after(TERM_GRACE_SECONDS):
                while proc.returncode is None or _group_alive(pgid):
                    if proc.returncode is None:
                        with anyio.move_on_after(0.02):
                            await proc.wait()
                    else:
                        await anyio.sleep(0.01)
            if proc.returncode is None or _group_alive(pgid):
                _killpg(pgid, signal.SIGKILL)
                with anyio.move_on_after(KILL_WAIT_SECONDS):
                    await proc.wait()
                    while _group_alive(pgid):  # SIGKILL is not instant: return once the group is gone
                        await anyio.sleep(0.01)
        for stream in (proc.stdout, proc.stderr):
            try:
                await stream.aclose()  # type: ignore[union-attr]
            except Exception:
                pass


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    """Is any process of the group alive (zombies do not count)?"""
    try:
        os.killpg(pgid, 0)  # cheap: ESRCH means no process at all, zombies included
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if sys.platform.startswith("linux"):
        try:
            entries = os.listdir("/proc")
        except OSError:
            entries = []
        for entry in entries:
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            # pid (comm) state ppid pgrp ... ; comm may contain spaces and parens
            fields = stat[stat.rfind(b")") + 2 :].split()
            if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
                return True
        return False
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False

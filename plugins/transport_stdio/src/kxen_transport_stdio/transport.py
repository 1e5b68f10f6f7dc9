"""The stdio transport: one child process per server, in its own process group.

Launch: no shell; the command is made absolute against the child's PATH (relative entries and a
command with a slash count from the cwd; symlinks are kept, as exec would run them); cwd is the
server's ``cwd`` (relative to the workspace) or the workspace; the environment is cleared and gets
exactly :data:`ENV_PASSTHROUGH` from the host (those that are set) and the server's configured
``env`` on top, nothing else: no interpreter switch is added, so ``python /path/server.py`` imports
its sibling modules as it does anywhere. A launch that would import from the workspace instead
(``python -m``/``-c`` with importable code in the cwd) is held by the core's launcher rules for
trust and approval before it gets here. The child's PATH keeps only its absolute entries, so
nothing the child runs is looked up in the workspace either.

The child is started by ``subprocess.Popen`` and watched without a thread (:mod:`.child`: its exit
is a pidfd). stdin is a pipe the transport makes itself and writes without blocking
(:mod:`.writer`): one code path on every anyio backend, public APIs only. stdout is a pipe it makes
itself too, read without blocking (:mod:`.reader`), one JSON message per line (:mod:`.framing`).
stderr is drained into a bounded tail, shown by ``describe()`` and in the close reason together
with the exit code or signal.

The child's start time (with its pid, its identity for :class:`~kxen_transport_stdio.procs.Tree`
and the ledger) is read in the event-loop turn in which the child's first output arrives (before
anything it writes next is taken), :data:`IDENTIFY_AFTER_SECONDS` after the spawn if it says nothing, or
when a stop or the child's own exit needs it -- whichever comes first, and always before the child
is reaped. Not at the spawn: reading ``/proc/<pid>/stat`` while the child is still in ``exec`` waits
for the exec, and that would hold the event loop for milliseconds.

Close: note the child's descendants (:class:`kxen_transport_stdio.procs.Tree`), let the stdin backlog go out
and close stdin (EOF), give the child a moment to exit, then stop its whole process group and every
noted descendant (:mod:`.group`: SIGTERM, SIGKILL after a grace period) and reap it.
The close is shielded from cancellation and bounded in time, so no grandchild survives a stop.
"""

from __future__ import annotations

import functools
import json
import os
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.lowlevel

from kxen_core import jsonwire
from kxen_core.errors import ClosedError, ConnectError

from .child import Child, spawn
from .group import TERM_GRACE_SECONDS, signal_name, terminate_group
from .options import StdioOptions
from .procs import Tree, forget_server, record_server, stat
from .procs.counter import mark
from .reader import PipeReader
from .stderr_log import StderrLog
from .writer import PipeWriter

#: host variables a child may inherit; everything else is cleared
ENV_PASSTHROUGH = ("HOME", "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "PATH", "SHELL", "TMPDIR", "USER")
STDERR_TAIL_BYTES = 16 * 1024
#: after stdin is closed (its backlog sent first, within the same bound), how long the child gets to exit
EOF_GRACE_SECONDS = 0.1
#: after stdout ends, how long to wait for the exit code and the rest of stderr
EXIT_SETTLE_SECONDS = 0.5
STDERR_SETTLE_SECONDS = 0.1
#: how long after the spawn the child's start time is read (for its tree and the ledger) when the
#: child has not written to stdout yet and no stop needed it sooner (see the module's docstring)
IDENTIFY_AFTER_SECONDS = 0.05


def child_env(configured: Mapping[str, str], host: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: :data:`ENV_PASSTHROUGH` from ``host`` (default: this process's)
    and the configured ``env`` on top, nothing more; PATH keeps its absolute entries only."""
    source: Mapping[str, str] = os.environ if host is None else host
    env = {}
    for key in ENV_PASSTHROUGH:
        value = source.get(key)  # one lookup (``in`` and ``[]`` each encode the key again)
        if value is not None:
            env[key] = value
    env.update(configured)
    if "PATH" in env:
        env["PATH"] = absolute_path_entries(env["PATH"])
    return env


@functools.lru_cache(maxsize=16)
def absolute_path_entries(search: str) -> str:
    """``search`` (a PATH value) without its relative entries: an empty entry, ``.`` or ``bin``
    names a directory under the child's cwd -- the workspace -- for whatever the child runs next
    (``os.defpath`` when nothing is left, since an empty PATH means the cwd to some). Remembered
    for the last few values: every start of a server filters the same PATH."""
    kept = [d for d in search.split(os.pathsep) if os.path.isabs(d)]
    return os.pathsep.join(kept) if kept else os.defpath


class _Stream:
    """The MessageStream of one running child."""

    def __init__(self, transport: StdioTransport, writer: PipeWriter, reader: PipeReader) -> None:
        self._t = transport
        self._writer = writer
        self._reader = reader
        self._dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    def _encode(self, message: dict[str, Any]) -> bytes:
        return jsonwire.dumps(message, self._encode_json, newline=True)  # orjson where it writes the same

    def _encode_json(self, message: dict[str, Any]) -> bytes:
        try:
            return (self._dumps(message) + "\n").encode()
        except UnicodeEncodeError:  # a lone surrogate: JSON carries it as an escape
            return (json.dumps(message, separators=(",", ":")) + "\n").encode()

    def send_nowait(self, message: dict[str, Any]) -> bool:
        """Write ``message`` to the child without waiting; False (nothing queued) under backpressure."""
        return self._writer.write_nowait(self._encode(message))

    async def send(self, message: dict[str, Any]) -> None:
        try:
            await self._writer.write(self._encode(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            await self._t.settle()
            raise ClosedError(f"cannot write to server: {self._t.exit_reason()}", server=self._t.name) from exc

    def set_receiver(self, receiver: Callable[[Any], None] | None) -> bool:
        """Hand messages to ``receiver`` as they arrive (asyncio only; see kxen_core.transport)."""
        return self._reader.set_receiver(receiver)

    async def receive(self) -> Any:
        try:
            return await self._reader.receive()
        except EOFError:
            pass
        await self._t.settle()  # so the reason has the exit code and the last of stderr
        raise ClosedError(self._t.exit_reason(), server=self._t.name)

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
        self._proc: Child | None = None
        self._writer: PipeWriter | None = None
        self._reader: PipeReader | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._stderr_done: anyio.Event | None = None
        self._settled: anyio.Event | None = None
        self.pid: int | None = None
        self._tree: Tree | None = None
        self._command = ""
        self._identified = False  # the child's start time was read (into the tree and the ledger)
        self._log: StderrLog | None = None  # the full stderr on disk (home/logs), when there is a home

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
            reason = f"server was killed by signal {signal_name(-code)}"
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
        self._identify()  # before the exit is reaped: a reaped pid may be someone else's
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
        command, args, cwd, env = launch.command, list(launch.args), launch.cwd, child_env(launch.env)
        if not os.path.isdir(cwd):
            raise ConnectError(f"working directory does not exist: {cwd}", server=self.name)
        # stdin and stdout are our own pipes (every end close-on-exec until the child's ends become
        # its fds 0 and 1)
        stdin_read, stdin_write = os.pipe()
        try:
            stdout_read, stdout_write = os.pipe()
        except OSError as exc:  # out of descriptors: the first pipe is not kept either
            os.close(stdin_read)
            os.close(stdin_write)
            raise ConnectError(f"cannot start {command!r}: {exc.strerror or exc}", server=self.name) from exc
        since = mark()  # the pid counter before the child: its tree reads only what started after
        try:
            self._proc = spawn([command, *args], stdin=stdin_read, stdout=stdout_write, cwd=cwd, env=env)
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in an argument or env value
            os.close(stdin_write)
            os.close(stdout_read)
            raise ConnectError(
                f"cannot start {command!r}: {getattr(exc, 'strerror', None) or exc}", server=self.name
            ) from exc
        except BaseException:
            os.close(stdin_write)
            os.close(stdout_read)
            raise
        finally:
            # the child has its copies: EOF and EPIPE now follow the child (and what it started) alone
            os.close(stdin_read)
            os.close(stdout_write)
        self.pid = self._proc.pid
        # the child is running: let the other servers starting in this loop spawn theirs before
        # this one's bookkeeping (twenty servers started at once all run sooner); never cancelled
        # here, where nothing would stop what was just started
        await anyio.lowlevel.cancel_shielded_checkpoint()
        # its start time (the tree's and the ledger's identity of the process) is read later: see
        # IDENTIFY_AFTER_SECONDS; until the child is reaped its pid cannot be anyone else's
        self._tree = Tree(self.pid, since=since)
        self._command = command
        self._writer = PipeWriter(stdin_write)
        self._reader = PipeReader(stdout_read, self.max_line_bytes, self.diag)
        self._reader.after_first_read = self._identify  # the child runs its program by then
        self._reader.start()
        if self.context.home is not None:
            self._log = StderrLog(self.context.home, self.name, self.diag)
            self._log.start(self.pid, command)
        self._stderr_done = anyio.Event()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._drain_stderr)
        self._tg.start_soon(self._writer.run)
        self._tg.start_soon(self._identify_soon)
        return _Stream(self, self._writer, self._reader)

    def _identify(self) -> None:
        """Read the child's start time once: into its tree, and into the ledger (for after a host
        crash). Called before anything reaps the child or signals its group."""
        if self._identified or self.pid is None or self._tree is None:
            return
        self._identified = True
        started = stat(self.pid)
        start = started.start if started is not None else None
        self._tree.root_start = start
        record_server(self.pid, start, self._command)

    async def _identify_soon(self) -> None:
        await anyio.sleep(IDENTIFY_AFTER_SECONDS)
        self._identify()

    async def _drain_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None and self._stderr_done is not None
        tail = self._stderr
        try:
            async for chunk in self._proc.stderr:
                if self._log is not None:
                    self._log.write(chunk)
                if len(chunk) > STDERR_TAIL_BYTES:
                    chunk = chunk[-STDERR_TAIL_BYTES:]
                tail.append(chunk)
                self._stderr_size += len(chunk)
                while self._stderr_size > STDERR_TAIL_BYTES and len(tail) > 1:
                    self._stderr_size -= len(tail.popleft())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            if self._log is not None:
                self._log.close()
            self._stderr_done.set()

    async def __aexit__(self, *exc: Any) -> bool | None:
        with anyio.CancelScope(shield=True):
            await self._stop()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
        return None

    async def _stop(self) -> None:
        proc, writer = self._proc, self._writer
        if proc is None or writer is None:
            return
        self._identify()
        if self._tree is not None:
            self._tree.update()  # before EOF: what the child detached is known before it can exit
        # EOF: what is still queued for stdin goes out whole if the child takes it in time, then
        # stdin closes; the child gets the rest of the same grace period to exit by itself
        deadline = anyio.current_time() + EOF_GRACE_SECONDS
        with anyio.CancelScope(deadline=deadline):
            try:
                await writer.flush()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
        writer.close()
        with anyio.CancelScope(deadline=deadline):
            await proc.wait()
        await terminate_group(proc, self._tree)
        forget_server(proc.pid)
        # stdout: whatever a flood left unread is dropped with the read end (a writer that outlived
        # the group gets EPIPE); a receive still waiting ends at once
        if self._reader is not None:
            self._reader.close()
        await proc.aclose()  # stderr and the pidfd


__all__ = [
    "EOF_GRACE_SECONDS",
    "ENV_PASSTHROUGH",
    "STDERR_TAIL_BYTES",
    "TERM_GRACE_SECONDS",
    "StdioTransport",
    "child_env",
]

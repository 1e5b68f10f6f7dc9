"""The stdio transport's part of a host process's life (hook ``kxen_host_guard``).

Entered once around a host's work with its servers (the ``kxen`` command enters it around every
``kxen mcp ...``; an embedding host through :func:`kxen_core.host_guard`):

- on entry, what a crashed host left running is ended (:func:`.procs.end_leftovers`: only
  processes whose pid, start time and boot still match a ledger entry -- its servers, their
  descendants, its adopted orphans -- and what those started), then this process keeps its own
  ledger (:func:`.procs.open_ledger`) of the servers it starts, and, until the exit, notes what
  they start (:func:`.procs.watch_ledger`, in a task of its own);
- with ``subreaper=True`` (Linux), this process becomes a child subreaper, so the orphans of
  double-forking servers are adopted by it, and on exit every adopted orphan is ended
  (:func:`.procs.end_adopted`). Only for a process whose other children all started before entry:
  every later child that is not a server is then treated as a server's leftover.

The exit is shielded and bounded (the waits of :mod:`.procs`), so a cancelled host still cleans up.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

import anyio
import anyio.abc

from . import procs


class HostGuard:
    """Async context manager; see the module docstring."""

    def __init__(self, home: Path, *, subreaper: bool) -> None:
        self.home = Path(home)
        self.subreaper = subreaper
        self._reaping = False
        self._watch: anyio.abc.TaskGroup | None = None
        self.ended: list[int] = []  # pids of what a crashed host left, ended on entry

    async def __aenter__(self) -> HostGuard:
        # become the subreaper first: an orphan made while the leftovers are ended comes back to us
        self._reaping = self.subreaper and not procs.is_subreaper() and procs.become_subreaper()
        with anyio.CancelScope(shield=True):
            self.ended = await procs.end_leftovers(self.home)
        if procs.open_ledger(self.home) is not None:
            self._watch = anyio.create_task_group()
            await self._watch.__aenter__()
            self._watch.start_soon(procs.watch_ledger, procs.adopted if self._reaping else None)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._watch is not None:  # its scope is this task's current one again: left first
                watch, self._watch = self._watch, None
                watch.cancel_scope.cancel()
                await watch.__aexit__(None, None, None)
        finally:
            try:
                if self._reaping:
                    with anyio.CancelScope(shield=True):
                        await procs.end_adopted()
            finally:
                if self._reaping:
                    procs.stop_subreaper()
                    self._reaping = False
                procs.close_ledger()

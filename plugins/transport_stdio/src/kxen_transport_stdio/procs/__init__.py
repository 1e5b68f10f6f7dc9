"""Processes as Linux shows them in ``/proc``: for ending what a server leaves behind.

A server runs in its own session and process group, and closing it signals that group. A server
that detaches a child (``setsid``, ``setpgid``) takes the child out of the group; one that
double-forks also takes it out of its tree (the orphan is adopted by init). Two defences:

- :class:`Tree` follows a server's descendants by parent pid, and everything in its session or
  group, from a snapshot taken *before* anything is signalled (an orphan keeps its place in the
  tree for as long as kxen saw it there). Every process is known by pid *and* start time (field 22
  of ``/proc/<pid>/stat``), and is signalled only while both still match: a recycled pid is never hit.
- :func:`become_subreaper` makes this process a child subreaper (``PR_SET_CHILD_SUBREAPER``), so an
  orphan of any descendant is adopted by kxen instead of init; :func:`end_adopted` ends every
  adopted orphan (and its tree) after the servers are closed. The ``kxen`` command does both; an
  embedding host may opt in, knowing that every child of its process that is not in the snapshot
  :func:`become_subreaper` takes is then treated as a server's leftover.

After a crash of the host (SIGKILL, power to the terminal cut before a signal could be handled),
its servers run on, and so does what they started. :class:`Ledger` is a small state file per kxen
process (``<home>/run/<pid>-<start time>.json``, the directory 0700) listing every stdio server it
started: pid, start time, command, and the boot it ran in -- and, read again every
:data:`LEDGER_WATCH_SECONDS` while servers run (:func:`watch_ledger`), each server's descendants
(``tree``: pid and start time, kept once seen, so a daemon that left with ``setsid`` and whose
parent exited is still known) and the orphans this process adopted as a subreaper (``adopted``).
:func:`end_leftovers` reads the ledgers of hosts that are gone and ends only processes it can
prove are the ones recorded: a server whose pid, start time and boot still match and that still
leads its own session and group (as kxen started them), a descendant or orphan whose pid, start
time and boot still match (and that is not older than its server, or the host), and what each of
them started since. Never a process kxen did not start or that did not descend from one (the
command is recorded for people reading the file; a server may have exec'd another program and is
still the one started). A descendant that was born and detached between two reads, in the last
second before the crash, is not known. Both are bounded (files, entries, members, bytes,
seconds). The ``kxen`` command does both; an embedding host may opt in with :func:`open_ledger`,
:func:`watch_ledger` and :func:`end_leftovers` (or :func:`kxen_core.host_guard`).

Elsewhere than Linux every helper here finds nothing and the group kill is all there is.
"""

from __future__ import annotations

from .ledger import (
    LEDGER_WATCH_SECONDS,
    Ledger,
    boot_id,
    close_ledger,
    end_leftovers,
    forget_server,
    open_ledger,
    record_server,
    watch_ledger,
)
from .tree import Proc, Tree, adopted, become_subreaper, end_adopted, is_subreaper, send, stat, stop_subreaper, table

__all__ = [
    "LEDGER_WATCH_SECONDS",
    "Ledger",
    "boot_id",
    "Proc",
    "Tree",
    "adopted",
    "become_subreaper",
    "close_ledger",
    "end_adopted",
    "end_leftovers",
    "forget_server",
    "is_subreaper",
    "open_ledger",
    "record_server",
    "send",
    "stat",
    "stop_subreaper",
    "table",
    "watch_ledger",
]

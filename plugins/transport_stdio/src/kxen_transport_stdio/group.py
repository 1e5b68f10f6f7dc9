"""Stopping the child's whole process group, bounded in time.

The child leads its own process group (``start_new_session``), so its group id is its pid. After
the child had its chance to exit on EOF: SIGTERM the group (unless the child is reaped and its group
is empty: then the id is not ours any more), SIGKILL it if anything in it is still alive after
:data:`TERM_GRACE_SECONDS`, then wait (at most :data:`KILL_WAIT_SECONDS`) until the child is reaped
and the group is gone. No grandchild survives a stop.

A descendant that left the group (``setsid``, ``setpgid``) is followed too, on Linux: the transport
keeps a :class:`kxen_transport_stdio.procs.Tree` of the child, read before the child gets EOF (so a descendant
orphaned by the child's exit is still known), and every member gets the same SIGTERM, SIGKILL and
bounded wait as the group, each signalled only while its pid and start time still match. An orphan
that double-forked out of the tree before that read is adopted by the ``kxen`` command (a child
subreaper) and ended when it exits (:func:`kxen_transport_stdio.procs.end_adopted`).
"""

from __future__ import annotations

import os
import signal
import sys

import anyio

from .child import Child
from .procs import Tree
from .procs.tree import read_stat

TERM_GRACE_SECONDS = 0.8
KILL_WAIT_SECONDS = 2.0
#: how often the group is probed while waiting for it to go
POLL_SECONDS = 0.01


async def terminate_group(proc: Child, tree: Tree | None = None) -> None:
    pgid = proc.pid
    tree = tree if tree is not None else Tree(pgid)
    tree.update()

    def anything_left() -> bool:
        return proc.returncode is None or group_alive(pgid) or bool(tree.alive())

    if anything_left():
        killpg(pgid, signal.SIGTERM)
        tree.signal(signal.SIGTERM)
        with anyio.move_on_after(TERM_GRACE_SECONDS):
            while anything_left():
                tree.signal(signal.SIGTERM, tree.update())  # found late (forked meanwhile): same signal
                if proc.returncode is None:
                    with anyio.move_on_after(2 * POLL_SECONDS):
                        await proc.wait()
                else:
                    await anyio.sleep(POLL_SECONDS)
        tree.update()
        if anything_left():
            killpg(pgid, signal.SIGKILL)
            tree.signal(signal.SIGKILL)
            with anyio.move_on_after(KILL_WAIT_SECONDS):
                await proc.wait()
                while group_alive(pgid) or tree.alive():  # SIGKILL is not instant: return once all are gone
                    tree.signal(signal.SIGKILL, tree.update())
                    await anyio.sleep(POLL_SECONDS)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
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
            stat = read_stat(entry)
            if stat is None:
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


__all__ = ["KILL_WAIT_SECONDS", "TERM_GRACE_SECONDS", "group_alive", "killpg", "signal_name", "terminate_group"]

"""Commands a plugin adds to the ``kxen`` command line (``kxen_register_commands``).

A plugin registers a :class:`Command`: its name (the word after ``kxen``), one line of help, a
function that adds its options to an ``argparse`` parser, and ``run``, a coroutine function of
``(runtime, args)`` returning the exit code. The ``kxen`` command then does for it what it does
for ``kxen mcp ...``: the global options (``--home``, ``--workspace``, ``--approve``, ``--role``,
``-v``) are parsed, every host guard is entered around the work (what a crashed kxen left is
ended, orphans are adopted), and a signal (Ctrl-C, SIGTERM, a closed terminal) cancels ``run``,
closes every server and exits with 128 + N.

``runtime`` is a :class:`kxen_core.Runtime` made with those options and *not entered*: the command
decides what it holds before the servers start (``hold_approvals``) and enters it (``async with
runtime:``). Parsing is lazy: the plugins are loaded to build the command line only when the word
after ``kxen`` is not one of the core's commands.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:  # argparse only for the annotations: a plugin's entry point stays cheap to import
    import argparse

    from kxen_core.runtime.workspace import Runtime

#: a command's name: a lowercase word (letters, digits, ``-``), at most 32 characters
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


def _check_name(_: Any, __: Any, name: str) -> None:
    if not (1 <= len(name) <= 32 and set(name) <= NAME_CHARS and name[0].isalpha()):
        raise ValueError(f"a command name is a lowercase word of at most 32 letters, digits and '-' (got {name!r})")


@attrs.frozen
class Command:
    """One ``kxen NAME ...`` command of a plugin."""

    name: str = attrs.field(validator=_check_name)
    help: str
    #: ``configure(parser)`` adds the command's own options (the global ones are there already)
    configure: Callable[[argparse.ArgumentParser], None]
    #: ``await run(runtime, args)``: the work; the exit code (0 ok, 1 failed, 2 usage)
    run: Callable[[Runtime, argparse.Namespace], Awaitable[int]]
    #: whether kxen adopts and, on exit, ends the orphans of the processes started while it runs (a
    #: child subreaper, see :func:`kxen_core.host_guard`); False for a command that starts a program
    #: that must outlive it (a browser), as ``kxen settings`` does. Servers are ended either way.
    adopt_orphans: bool = True


#: what ``kxen_register_commands`` is handed: ``register(command)``
RegisterCommand = Callable[[Command], None]

__all__ = ["Command", "RegisterCommand"]

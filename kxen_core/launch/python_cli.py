"""How a Python interpreter reads its command line, for the launcher rules (:mod:`.launchers`).

``python [options] (-c cmd | -m mod | file | -) [args]``: with ``-m``, ``-c`` or a program read from
stdin (``-`` or no file), Python puts its cwd first on ``sys.path``, ahead of everything installed,
so a workspace cwd's ``json.py`` or ``requests/__init__.py`` is what ``import json`` or ``import
requests`` loads. With a file, the file's own directory goes first instead (a server's sibling
``helper.py``), not the cwd. ``-P`` (Python 3.11+; an older one refuses the option) and ``-I`` (which
implies it) keep both off.

kxen does not add any of these options itself, nor ``PYTHONSAFEPATH``: the child runs exactly the
launch that was resolved (and, when held, approved), with exactly the documented environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

#: options that take the next argument as their value (unless it is glued on: ``-Xdev``)
_VALUED = ("X", "W")
#: the most entries of a cwd looked at for importable names; past it the cwd itself counts as one
MAX_CWD_ENTRIES = 4096
#: the most importable paths named (each then gets a content digest in the fingerprint)
MAX_IMPORTABLE = 16
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: a module file's suffix after its name: source, bytecode, an extension module of any build
_MODULE_SUFFIX = re.compile(r"\.(py|pyc|pyw|pyd|so|(?:[\w-]+\.)?so)")


def cwd_import(args: Sequence[str]) -> str | None:
    """``"-m"``, ``"-c"`` or ``"-"`` (a program on stdin) when a Python started with ``args`` puts
    its cwd first on ``sys.path``; None when it runs a file, or ``-I``/``-P`` keeps the cwd off."""
    safe = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":  # the options end; what follows is the file ("-" or nothing: stdin)
            return None if safe or (i + 1 < len(args) and args[i + 1] != "-") else "-"
        if arg == "-":
            return None if safe else "-"
        if arg.startswith("--"):
            i += 2 if arg == "--check-hash-based-pycs" else 1
            continue
        if not arg.startswith("-"):
            return None  # a file: its own directory goes on sys.path, not the cwd
        cluster = arg[1:]
        for j, letter in enumerate(cluster):  # -IBc 'code': flags, then one that takes a value
            if letter in "IP":
                safe = True
            elif letter in "cm":
                return None if safe else f"-{letter}"
            elif letter in _VALUED:
                if j + 1 == len(cluster):
                    i += 1  # -X dev: the value is the next argument
                break
        i += 1
    return None if safe else "-"


def module_name(args: Sequence[str], option: str) -> str | None:
    """The top-level name of the module ``option`` (``-m``) runs, or None (no such option before a
    script, or not a module name)."""
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg in ("-X", "-W", "--check-hash-based-pycs"):
            skip = True  # python -X dev -m mod: the option's value is not a script
            continue
        if arg == option and i + 1 < len(args):
            top = args[i + 1].split(".", 1)[0]
            return top if _IDENT.fullmatch(top) else None
        if arg.startswith(option) and len(arg) > len(option) and not arg.startswith("--"):
            top = arg[len(option) :].split(".", 1)[0]  # python -mmod
            return top if _IDENT.fullmatch(top) else None
        if not arg.startswith("-"):
            return None  # a script comes first: python script.py -m x passes -m to the script
    return None


def importable(cwd: str, lexists: Callable[[str], bool] = os.path.lexists) -> list[str]:
    """The paths in ``cwd`` that ``import name`` would load when ``cwd`` is first on ``sys.path``:
    modules (``name.py``, ``.pyc``, extension modules) and packages (their ``name/__init__.py``), in name
    order, at most :data:`MAX_IMPORTABLE`. A cwd with more than :data:`MAX_CWD_ENTRIES` entries, or
    more importable ones than that bound, adds ``cwd`` itself. A directory without ``__init__.py`` is
    left out: Python takes it as a namespace package only when no installed module has its name, and
    it runs no code of its own."""
    found: list[str] = []
    crowded = False
    try:
        with os.scandir(cwd) as entries:
            for count, entry in enumerate(entries):
                if count >= MAX_CWD_ENTRIES or len(found) >= MAX_IMPORTABLE:
                    crowded = True
                    break
                stem, dot, rest = entry.name.partition(".")
                if not _IDENT.fullmatch(stem):
                    continue
                if dot:
                    if _MODULE_SUFFIX.fullmatch("." + rest):
                        found.append(entry.path)
                elif lexists(init := os.path.join(entry.path, "__init__.py")):
                    found.append(init)  # the package's own code: its content is in the fingerprint
    except OSError:
        return [cwd]  # unreadable: what it holds cannot be told, so the cwd itself counts
    found.sort()
    if crowded:
        found.append(cwd)
    return found


__all__ = ["MAX_CWD_ENTRIES", "MAX_IMPORTABLE", "cwd_import", "importable", "module_name"]

"""What every ``kxen`` command shares: the global options (accepted anywhere on the line), the
version, and logging (``-v``, ``--log-file``, ``KXEN_TRACE_PLUGINS=1``)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

#: global options that take a value, and those that do not
VALUED = ("--home", "--workspace", "--approve", "--role", "--log-file")
FLAGS = ("-v", "--verbose", "-vv")

#: the most bytes one --log-file grows to before it is rotated (one older file is kept)
LOG_FILE_BYTES = 4 * 1024 * 1024


def hoist_globals(argv: Sequence[str]) -> list[str]:
    """``argv`` with the global options moved before the command, so ``kxen mcp status --home X``
    means ``kxen --home X mcp status``. Stops at ``--`` and at the command of ``kxen mcp add NAME
    COMMAND ARGS...`` (what follows is a command line of its own).
    A value option at the very end is left where it is: argparse then says it needs a value."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    argv = list(argv)
    while i < len(argv):
        token = argv[i]
        if token == "--" or _server_command_starts(rest, token):
            rest.extend(argv[i:])
            break
        name = token.split("=", 1)[0]
        if name in VALUED and "=" in token:
            front.append(token)
        elif name in VALUED and i + 1 < len(argv):
            front.extend(argv[i : i + 2])
            i += 1
        elif token in FLAGS:
            front.append(token)
        else:
            rest.append(token)
        i += 1
    return front + rest


def command_word(words: Sequence[str]) -> str | None:
    """The command of a line :func:`hoist_globals` put in order (its globals first), or None (only
    options: ``--help``, ``--version``)."""
    i = 0
    while i < len(words):
        token = words[i]
        if token.split("=", 1)[0] in VALUED:
            i += 1 if "=" in token else 2
        elif token.startswith("-"):
            if token == "--":
                return None
            i += 1
        else:
            return token
    return None


def _server_command_starts(before: list[str], token: str) -> bool:
    """``kxen mcp add NAME COMMAND ARGS...``: from COMMAND on, the words are the server's own."""
    words = [w for w in before if not w.startswith("-")]
    return words[:2] == ["mcp", "add"] and len(words) >= 3 and not token.startswith("-")


def existing_home(text: str) -> Path:
    """``--home``: given explicitly, it must be an existing directory (a typo is not an empty home)."""
    try:
        path = Path(text)
        ok = path.resolve().is_dir()
    except (OSError, RuntimeError, ValueError):
        raise argparse.ArgumentTypeError(f"cannot be resolved (a symlink loop or a NUL byte): {text!r}") from None
    if not ok:
        raise argparse.ArgumentTypeError(f"not an existing directory: {text!r} (create it first, or leave --home out)")
    return path


def version_text() -> str:
    from kxen_core import __version__

    return f"kxen {__version__} (Python {sys.version.split()[0]})"


def add_global_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--version", action="version", version=version_text())
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log to stderr what kxen does (-v: progress and diagnostics; -vv: everything, plugin calls included)",
    )
    p.add_argument("--log-file", type=Path, metavar="FILE", help="also write the log to FILE (rotated at 4 MiB)")


class _SafeFormatter(logging.Formatter):
    """Every log line escaped and scrubbed of the config's secrets, like everything kxen prints."""

    def format(self, record: logging.LogRecord) -> str:
        from kxen_core.cli.output import scrubbed

        return scrubbed(super().format(record))


def configure_logging(verbose: int, log_file: Path | None) -> str | None:
    """Send the ``kxen`` loggers to stderr (with ``-v``; else only warnings, as bare lines) and/or a
    rotated file, every line escaped and scrubbed; returns a problem text when the file cannot be
    opened (kxen goes on without it). ``KXEN_TRACE_PLUGINS=1`` counts as
    ``-vv`` (plugin hook calls are logged at debug level)."""
    from logging.handlers import RotatingFileHandler

    if os.environ.get("KXEN_TRACE_PLUGINS") == "1":
        verbose = max(verbose, 2)
    logger = logging.getLogger("kxen")
    if not verbose and log_file is None:
        # warnings still reach stderr (a server's log message at warning level or above among
        # them), through the same escape-and-scrub path as every other line: never Python's
        # last-resort handler, which prints a record raw
        quiet = logging.StreamHandler(sys.stderr)
        quiet.setLevel(logging.WARNING)
        quiet.setFormatter(_SafeFormatter("%(message)s"))
        logger.addHandler(quiet)
        return None
    level = logging.DEBUG if verbose >= 2 or log_file is not None else logging.INFO
    logger.setLevel(level)
    fmt = _SafeFormatter("%(asctime)s %(name)s %(levelname)s %(message)s")
    problem = None
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setLevel(logging.DEBUG if verbose >= 2 else logging.INFO)
        handler.setFormatter(fmt)
        logger.addHandler(handler)
    if log_file is not None:
        try:
            file_handler = RotatingFileHandler(log_file, maxBytes=LOG_FILE_BYTES, backupCount=1, encoding="utf-8")
        except OSError as exc:
            problem = f"--log-file {str(log_file)!r} cannot be opened: {exc.strerror or exc}"
        else:
            file_handler.setFormatter(fmt)
            logger.addHandler(file_handler)
    return problem


def reset_logging() -> None:
    """Remove what :func:`configure_logging` added (for in-process callers, tests)."""
    logger = logging.getLogger("kxen")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    logger.setLevel(logging.NOTSET)


__all__ = ["add_global_options", "configure_logging", "existing_home", "hoist_globals", "reset_logging", "version_text"]

"""What the ``kxen`` command prints: one line at a time, strict JSON, tables of plain text.

Everything printed passes :func:`say`, which scrubs the loaded config's secrets (see
:func:`use_config`) and survives a terminal whose encoding cannot show a character; text from
outside kxen is made safe with :func:`kxen_core.safe_text.safe_text` by the caller, and tables are
built from ``rich.text.Text`` (never markup).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from kxen_core.config.secrets import config_secrets
from kxen_core.safe_text import Secrets, json_text, safe_text

#: the width of a table that is not printed on a terminal: wide enough that no cell is folded
UNWRAPPED_WIDTH = 100_000

#: what the loaded config says must never be printed; scrubbed from all output (see use_config)
_secrets = Secrets()


def use_config(config: Any) -> None:
    """Scrub the secrets of ``config`` (user and project entries) from everything printed from now on."""
    global _secrets
    _secrets = config_secrets([*config.servers.values(), *config.user_servers.values()])


def use_secrets(secrets: Secrets) -> None:
    """Scrub ``secrets`` (a Runtime's: the config's and what plugins hold, see ``Runtime.secrets``)
    from everything printed from now on."""
    global _secrets
    _secrets = secrets


def reset() -> None:
    """Forget the secrets of an earlier config (one ``kxen`` invocation at a time)."""
    global _secrets
    _secrets = Secrets()


def print_json(data: Any) -> None:
    """Strict JSON, safe on a terminal (non-finite numbers as strings: see :mod:`.safe_text`)."""
    say(json_text(_secrets.data(data)))


def say(text: str, *, err: bool = False) -> None:
    """Print one line. ``text`` must already be safe (:func:`safe_text`); a terminal whose encoding
    cannot show a character gets a backslash escape instead of a crash."""
    stream = sys.stderr if err else sys.stdout
    text = _secrets.text(text)
    try:
        stream.write(text + "\n")
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write((text + "\n").encode(encoding, "backslashreplace").decode(encoding))
    stream.flush()


def table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """A rich table; every cell is a ``Text`` of :func:`safe_text` (never markup). On a terminal
    long cells fold at its width; elsewhere (a pipe, a file, CI) nothing is wrapped, unless the
    environment sets ``COLUMNS``."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title), title_justify="left")
    for c in columns:
        table.add_column(Text(c), overflow="fold")
    for row in rows:
        table.add_row(*[Text(_secrets.text(safe_text(v))) for v in row])
    console = Console(soft_wrap=False, markup=False, emoji=False, highlight=False)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        # a pipe, a file, CI: as wide as the cells (a URI stays copyable), unless COLUMNS says otherwise
        console = Console(soft_wrap=False, markup=False, emoji=False, highlight=False, width=UNWRAPPED_WIDTH)
    try:
        console.print(table)
    except UnicodeEncodeError:
        # a terminal that cannot show some character: the same table in ASCII with escapes
        for row in rows:
            say(
                "  ".join(safe_text(v).encode("ascii", "backslashreplace").decode("ascii") for v in row)
            )  # scrubbed by _say


def scrubbed(text: str) -> str:
    """``text`` safe to write anywhere the user reads (a log line): escaped, the config's secrets out."""
    return _secrets.text(safe_text(text))


def print_problems(problems: list[str]) -> None:
    if problems:
        say("kxen: the project config was rejected (none of its servers will start):", err=True)
        for p in problems:
            say(f"  - {safe_text(p)}", err=True)


__all__ = ["print_json", "print_problems", "reset", "say", "scrubbed", "table", "use_config", "use_secrets"]

"""``kxen mcp audit``: the audit trail of decided calls, read from the data directory (starts nothing).

Reads ``audit.jsonl`` and its rotated files (:mod:`kxen_core.policy.audit_file`), oldest first, and
prints the last ``--limit`` calls, newest last: a table, or with ``--json`` one JSON object per line
(each decided call merged with its end). A line that is not a record is skipped; how many is said
once, on stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from datetime import datetime
from typing import Any

from kxen_core.cli.output import say, table
from kxen_core.safe_text import safe_text

EXIT_OK = 0
DEFAULT_LIMIT = 100
MAX_LIMIT = 1_000_000
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(\d{1,9})([smhdw])")


def since(text: str) -> float:
    """``--since``: a duration back from now (``90s``, ``15m``, ``2h``, ``7d``, ``1w``, or several:
    ``1h30m``) or an ISO 8601 time (``2026-05-01``, ``2026-05-01T10:00``, ``...Z``, an offset;
    without one, local time). Epoch seconds; a usage error otherwise."""
    from kxen_core.policy.audit_read import parse_time

    value = text.strip().lower()
    if value and _DURATION.sub("", value) == "":
        seconds = sum(int(n) * _UNITS[u] for n, u in _DURATION.findall(value))
        return time.time() - seconds
    try:
        return parse_time(text)
    except (ValueError, OverflowError, OSError):
        raise argparse.ArgumentTypeError(
            f"not a duration or a time: {text[:80]!r} (a duration such as 15m, 2h, 7d, or an ISO 8601 time "
            "such as 2026-05-01T10:00Z)"
        ) from None


def _limit(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_LIMIT}: {text[:80]!r}")
    return int(text)


def add_command(mcp: Any) -> None:
    audit = mcp.add_parser("audit", help="the audit trail of decided calls (reads the data directory; starts nothing)")
    audit.add_argument("--since", type=since, metavar="DURATION|TIME", help="only calls since then (15m, 2h, 7d, ISO)")
    audit.add_argument("--server", metavar="NAME", help="only calls to this server")
    audit.add_argument("--tool", metavar="NAME", help="only calls of this tool (its own name, or a method)")
    audit.add_argument(
        "--limit", type=_limit, default=DEFAULT_LIMIT, metavar="N", help=f"the last N calls (default {DEFAULT_LIMIT})"
    )
    audit.add_argument("--json", action="store_true", help="one JSON object per line")


def run(args: argparse.Namespace) -> int:
    from kxen_core.config.paths import data_dir
    from kxen_core.policy.audit_read import read

    def keep(record: dict[str, Any]) -> bool:
        return (args.server is None or record.get("server") == args.server) and (
            args.tool is None or record.get("tool") == args.tool
        )

    directory = data_dir()
    entries, skipped, dropped = read(directory, since=args.since, keep=keep, limit=args.limit)
    if skipped:
        say(f"kxen: warning: skipped {skipped} line(s) of the audit trail that are not records", err=True)
    if dropped:
        say(f"kxen: warning: {dropped} record(s) were dropped while writing (the writer fell behind)", err=True)
    if args.json:
        for entry in entries:
            say(json.dumps(entry, separators=(",", ":"), ensure_ascii=True))
        return EXIT_OK
    if not entries:
        say(f"no recorded calls in {safe_text(str(directory))}" + (" for these filters" if _filtered(args) else ""))
        return EXIT_OK
    table(
        "audit trail",
        ["time", "server", "tool", "verdict", "by", "args", "result", "vote ms", "server ms"],
        [_row(e) for e in entries],
    )
    return EXIT_OK


def _filtered(args: argparse.Namespace) -> bool:
    return any(v is not None for v in (args.since, args.server, args.tool))


def _row(entry: dict[str, Any]) -> list[str]:
    return [
        _local(entry.get("time")),
        str(entry.get("server", "")),
        str(entry.get("tool", "")),
        str(entry.get("verdict", "")),
        _by(entry),
        _args(entry.get("args")),
        _result(entry),
        _ms(entry.get("voteMs")),
        _ms(entry.get("serverMs")),
    ]


def _local(stamp: Any) -> str:
    from kxen_core.policy.audit_read import parse_time

    try:
        return datetime.fromtimestamp(parse_time(str(stamp))).strftime("%Y-%m-%d %H:%M:%S")
    except (ValueError, OverflowError, OSError):
        return str(stamp)


def _by(entry: dict[str, Any]) -> str:
    by = entry.get("by")
    votes: list[Any] = by if isinstance(by, list) else []
    shown = [
        str(v.get("plugin", "?")) + (f" ({v['reason']})" if v.get("reason") else "")
        for v in votes
        if isinstance(v, dict)
    ]
    approval = entry.get("approval")
    if isinstance(approval, dict):
        said = f"channel {approval.get('channel') or '(none)'}"
        if approval.get("remember"):
            said += f", {approval['remember']}"
        shown.append(said)
    return "; ".join(shown)


def _args(shape: Any) -> str:
    if isinstance(shape, dict):
        return " ".join(f"{k}:{_brief(v)}" for k, v in shape.items()) or "{}"
    return str(shape)


def _brief(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(str(k) for k in value) + "}"
    if isinstance(value, list):
        return str(value[0]) if value else "array"
    return str(value)


def _result(entry: dict[str, Any]) -> str:
    error = entry.get("error")
    if isinstance(error, dict):
        if error.get("isError"):
            return "isError"
        return str(error.get("type", "error"))
    result = entry.get("result")
    if isinstance(result, dict):
        return f"{result.get('chars', 0)} chars"
    return "" if entry.get("sent") else "not sent"


def _ms(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, (int, float)) else ""


__all__ = ["add_command", "run", "since"]

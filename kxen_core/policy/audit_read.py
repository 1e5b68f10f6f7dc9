"""Reading the audit trail back (``kxen mcp audit``): every file of the data directory, oldest
first, each decided call merged with its end (:mod:`.audit_file` writes them)."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from kxen_core.policy.audit_file import FILE_NAME, MAX_LINE_BYTES, VERSION, rotated

#: the most rotated files looked for
MAX_ROTATED = 100


def parse_time(text: str) -> float:
    """An ISO 8601 time as epoch seconds (``Z`` or an offset; none: local time). ValueError otherwise."""
    text = text.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    stamp = datetime.fromisoformat(text)
    if stamp.tzinfo is None:
        stamp = stamp.astimezone()  # local time
    return stamp.timestamp()


def files(directory: Path) -> list[Path]:
    """The audit files of ``directory``, oldest first (the rotated ones, then the current)."""
    path = directory / FILE_NAME
    out = [rotated(path, i) for i in range(MAX_ROTATED, 0, -1) if rotated(path, i).is_file()]
    return out + ([path] if path.is_file() else [])


def lines(directory: Path) -> Iterator[bytes]:
    for path in files(directory):
        try:
            with open(path, "rb") as f:
                while True:
                    line = f.readline(MAX_LINE_BYTES * 2)
                    if not line:
                        break
                    yield line
        except OSError:
            continue  # rotated away while reading


def read(
    directory: Path,
    *,
    since: float | None = None,
    keep: Callable[[dict[str, Any]], bool] = lambda _: True,
    limit: int = 100,
) -> tuple[list[dict[str, Any]], int, int]:
    """The last ``limit`` decided calls (oldest first) decided at or after ``since`` (epoch s) and
    kept by ``keep``, each merged with the end of its call (``ended``, ``serverMs``, ``result``,
    ``error``; a ``call`` line holds both already), as ``"event": "call"``; with the number of lines
    skipped (not JSON, not a record of this version) and of records the writer dropped."""
    entries: OrderedDict[str, dict[str, Any]] = OrderedDict()
    skipped = dropped = 0
    for raw in lines(directory):
        try:
            record = json.loads(raw)
        except ValueError:
            skipped += 1
            continue
        if not isinstance(record, dict) or record.get("v") != VERSION or not isinstance(record.get("time"), str):
            skipped += 1
            continue
        event = record.get("event")
        if event == "ended":
            entry = entries.get(record.get("id"))  # type: ignore[arg-type]
            if entry is not None:
                entry["ended"] = record["time"]
                entry.update({k: record[k] for k in ("serverMs", "result", "error") if k in record})
            continue
        if event == "dropped":
            count = record.get("count")
            dropped += count if isinstance(count, int) else 0
            continue
        if event not in ("decided", "call") or not isinstance(record.get("id"), str):  # call: decided and ended
            skipped += 1
            continue
        if since is not None:
            try:
                if parse_time(record["time"]) < since:
                    continue
            except ValueError:
                skipped += 1
                continue
        if not keep(record):
            continue
        record["event"] = "call"  # a call: its decision, and its end once it is in
        entries[record["id"]] = record
        if len(entries) > limit:
            entries.popitem(last=False)
    return list(entries.values()), skipped, dropped


__all__ = ["files", "lines", "parse_time", "read"]

"""Reading the child's stdout: one JSON message per line.

A line that is not JSON, or longer than the line bound, is a diagnostic and is skipped. A line that
is JSON nested too deeply to decode, with a request id at its top level, fails that request at once
(:class:`kxen_core.RequestFailed`) instead of leaving it to its timeout. Memory stays
bounded: an oversized line is discarded as it streams in. The work is linear in the data: only a
new chunk is searched for newlines, and a line that spans chunks is joined once.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from typing import Any

from kxen_core import ProtocolError, RequestFailed, jsonwire

#: where a reply's id is looked for when the line is too deeply nested to decode: a reply puts its
#: id before or after its (deep) result, so only the first and last bytes are searched (O(1) per line)
ID_WINDOW = 256
_ID_HEAD = re.compile(rb'^\s*\{[^{}\[\]]*?"id"\s*:\s*(-?\d{1,18})\s*[,}]')
_ID_TAIL = re.compile(rb'[,{]\s*"id"\s*:\s*(-?\d{1,18})\s*(?:,[^{}\[\]]*)?\}\s*$')


def deep_reply_id(line: bytes) -> int | None:
    """The integer id at the top level of a JSON object ``line`` too deeply nested to decode, if it
    shows in the line's first or last :data:`ID_WINDOW` bytes; else ``None``.

    A hostile server gains nothing from a wrong answer here: it could fail that request with an error
    reply anyway."""
    found = _ID_HEAD.match(line[:ID_WINDOW]) or _ID_TAIL.search(line[-ID_WINDOW:])
    return int(found.group(1)) if found else None


class LineReader:
    """Splits stdout chunks into parsed messages, appended to :attr:`ready`."""

    def __init__(self, max_line_bytes: int, diag: Callable[[str], None]) -> None:
        self.max_line_bytes = max_line_bytes
        self._diag = diag
        self.ready: deque[Any] = deque()
        self._parts: list[bytes] = []  # the pieces of the line being received (no newline yet)
        self._held = 0  # their total size, never above the line bound
        self._skipping = False  # inside an oversized line, discarding until its newline
        self._loads = jsonwire.loads  # json.loads's answers, faster

    def feed(self, chunk: bytes) -> None:
        nl = chunk.find(b"\n")
        if nl < 0:
            self._hold(chunk)
            return
        if self._skipping:
            self._skipping = False
        elif self._parts:
            self._parts.append(chunk[:nl])
            line = b"".join(self._parts)
            self._parts = []
            self._held = 0
            self._parse(line)
        elif nl:
            self._parse(chunk[:nl])
        start = nl + 1
        find = chunk.find
        while True:
            nl = find(b"\n", start)
            if nl < 0:
                break
            if nl > start:
                self._parse(chunk[start:nl])
            start = nl + 1
        if start < len(chunk):
            self._hold(chunk[start:])

    def finish(self) -> None:
        """stdout ended: a last line without its newline still counts."""
        if self._parts and not self._skipping:
            self._parse(b"".join(self._parts))
        self._parts = []
        self._held = 0

    def _hold(self, piece: bytes) -> None:
        if self._skipping:
            return
        self._held += len(piece)
        if self._held > self.max_line_bytes:
            self._diag(f"stdout line longer than {self.max_line_bytes} bytes skipped")
            self._skipping = True
            self._parts = []
            self._held = 0
        else:
            self._parts.append(piece)

    def _parse(self, line: bytes) -> None:
        if len(line) > self.max_line_bytes:
            self._diag(f"stdout line longer than {self.max_line_bytes} bytes skipped")
            return
        try:
            self.ready.append(self._loads(line))
        except RecursionError:  # JSON nested too deeply to decode
            rid = deep_reply_id(line)
            self._diag(f"stdout line nested too deeply to decode skipped ({len(line)} bytes)")
            if rid is not None:
                error = ProtocolError(f"the reply to request {rid} is nested too deeply to decode")
                self.ready.append(RequestFailed(id=rid, error=error))
        except ValueError:
            text = line.strip()
            if text:
                shown = text[:200].decode("utf-8", "replace")
                self._diag(f"non-JSON stdout line skipped ({len(line)} bytes): {shown!r}")


__all__ = ["LineReader"]

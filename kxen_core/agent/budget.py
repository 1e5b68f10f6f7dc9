"""Text of bounded size built in one pass: a running budget, JSON in bounded chunks, base64 sizes.

:class:`Budget` keeps at most ``limit`` characters of what it is given (a slice of a piece, never a
copy of the whole) while counting the length of everything, so a 20 MiB input costs one pass and
about ``limit`` characters of memory. :func:`json_pieces` writes JSON the same way. Used by
:mod:`kxen_core.agent.output` for everything the agent gets.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

#: JSON strings are encoded this many characters at a time (a huge string is never encoded whole)
CHUNK_CHARS = 65_536
#: nesting deeper than this is written as a placeholder
MAX_JSON_DEPTH = 64

_SURROGATE = re.compile(r"[\ud800-\udfff]")
#: how the marker at the end of a cut output begins
CUT_MARKER = "\n[output cut by kxen: "


class Budget:
    """Collects pieces of text up to ``limit`` characters while counting the length of the whole."""

    __slots__ = ("limit", "total", "_parts", "_kept")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0  # characters of the whole output, kept or not
        self._parts: list[str] = []
        self._kept = 0

    def add(self, piece: str) -> None:
        self.total += len(piece)
        room = self.limit - self._kept
        if room > 0:
            part = piece if len(piece) <= room else piece[:room]  # a slice: never a copy of the whole
            self._parts.append(part)
            self._kept += len(part)

    def add_json(self, value: Any) -> None:
        for piece in json_pieces(value):
            self.add(piece)

    @property
    def full(self) -> bool:
        return self._kept >= self.limit

    def finish(self) -> tuple[str, bool]:
        """(the text, whether it was cut): at most ``limit`` characters, marker included."""
        text = "".join(self._parts)
        cut = self.total > self.limit
        if cut:
            marker = f"{CUT_MARKER}{self.total} characters, more than the limit of {self.limit}]"
            text = text[: max(0, self.limit - len(marker))] + marker
        # a lone surrogate cannot be encoded for any model API: show it as U+FFFD (same length)
        return _SURROGATE.sub("\ufffd", text), cut


def json_pieces(value: Any, depth: int = 0) -> Iterator[str]:
    """``value`` as JSON text (``ensure_ascii=False``), in pieces of bounded size.

    Non-finite numbers become the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (strict JSON).
    """
    if isinstance(value, str):
        yield from _string_pieces(value)
    elif value is None:
        yield "null"
    elif value is True:
        yield "true"
    elif value is False:
        yield "false"
    elif isinstance(value, int):
        yield str(value)
    elif isinstance(value, float):
        if math.isfinite(value):
            yield repr(value)
        else:
            yield '"NaN"' if math.isnan(value) else ('"Infinity"' if value > 0 else '"-Infinity"')
    elif depth >= MAX_JSON_DEPTH:
        yield '"[nested too deep]"'
    elif isinstance(value, dict):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            if i:
                yield ", "
            yield from _string_pieces(key if isinstance(key, str) else str(key))
            yield ": "
            yield from json_pieces(item, depth + 1)
        yield "}"
    elif isinstance(value, (list, tuple)):
        yield "["
        for i, item in enumerate(value):
            if i:
                yield ", "
            yield from json_pieces(item, depth + 1)
        yield "]"
    else:
        yield from _string_pieces(str(value))


def _string_pieces(text: str) -> Iterator[str]:
    if len(text) <= CHUNK_CHARS:
        yield json.dumps(text, ensure_ascii=False)
        return
    yield '"'
    for start in range(0, len(text), CHUNK_CHARS):
        yield json.dumps(text[start : start + CHUNK_CHARS], ensure_ascii=False)[1:-1]
    yield '"'


def base64_size(data: Any) -> int | None:
    """The number of bytes ``data`` (base64 text) decodes to, from its length alone; None if no string."""
    if not isinstance(data, str):
        return None
    n = len(data)
    pad = (1 if n >= 1 and data[-1] == "=" else 0) + (1 if n >= 2 and data[-2] == "=" else 0)
    return max(0, (n - pad) * 3 // 4)


__all__ = ["CHUNK_CHARS", "CUT_MARKER", "MAX_JSON_DEPTH", "Budget", "base64_size", "json_pieces"]

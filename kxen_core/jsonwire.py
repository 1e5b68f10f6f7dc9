"""JSON as it crosses the wire: read with orjson where that gives exactly what the standard
library gives, with the standard library everywhere else.

Every message a server sends is decoded here (the stdio framing, the Streamable HTTP bodies and
SSE events), so decoding is a good part of what a reply and a catalog page cost the host: on the
2-core machine of docs/performance.md a short reply reads in 0.8 instead of 2.6 us, a page of 100
real tool definitions (12 KB) in 30 instead of 66 us.

:func:`loads` gives the same value as ``json.loads`` for every input, and raises what it raises:

* what orjson refuses goes to ``json.loads`` as it is: ``NaN`` and ``Infinity``, a number past
  the range of a float (``1e400``: ``inf`` for ``json``), a lone surrogate (``"\\ud800"``, or in a
  ``str``), a byte-order mark, UTF-16 or UTF-32 bytes, nesting past orjson's 1,024 levels, and
  everything neither accepts (then ``json.loads`` raises its own error, with its own message);
* an integer literal orjson would read as a float (past 64 bits: ``18446744073709551616``, or
  below ``-2**63``) is never given to orjson: 19 or more digits in a row anywhere in the text (in
  a string too: a false alarm costs the standard library's speed, nothing else) send the text to
  ``json.loads``.

Duplicate keys keep the last value in both.

:func:`dumps` writes what kxen sends: the transport's own standard-library encoding (compact,
UTF-8) unless orjson writes JSON of the same value: where orjson refuses (a key that is not a
string, an integer past 64 bits, a lone surrogate, a subclass of ``str``/``int``/``dict``/``list``,
anything ``json`` would refuse as well) and where its output holds a ``null`` (orjson writes
``NaN`` and ``Infinity`` as ``null``; ``json`` writes them as they are), the standard library
writes it. Floats are written in their shortest form either way (``1.5e-7`` or ``1.5e-07``: the
same number). Two kinds of object ``json`` refuses, orjson writes: a ``uuid.UUID`` (as its
string) and an ``enum.Enum`` member (as its value); kxen's own messages hold neither, and the
arguments of a tool call are checked as JSON by the safety vote before they are sent.

orjson is imported with the first message, not with kxen. A property test compares the two over
random JSON values and texts and hostile ones (tests/test_jsonwire.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

#: every digit as ``0``: a run of 19 of them is then one ``bytes.find`` (C), not a regex scan
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
#: 19 digits in a row: the shortest integer literal orjson may read as a float (-2**63 - 1 has 19)
_LONG_RUN = b"0" * 19


def loads(data: bytes | bytearray | str) -> Any:
    """``json.loads(data)``, faster where it can be (see the module docstring)."""
    raw: bytes | bytearray
    if isinstance(data, str):
        try:
            raw = data.encode()
        except UnicodeEncodeError:  # a lone surrogate: orjson refuses it, json reads it
            return json.loads(data)
    else:
        raw = data
    if raw.translate(_DIGITS_AS_ZERO).find(_LONG_RUN) < 0:
        orjson = _orjson or _import()
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


def dumps(message: Any, fallback: Callable[[Any], bytes], *, newline: bool = False) -> bytes:
    """``fallback(message)`` (the standard library's compact UTF-8 JSON of ``message``, with a
    newline after it when ``newline``), written by orjson where that gives the same JSON (see the
    module docstring)."""
    orjson = _orjson or _import()
    try:
        out: bytes = orjson.dumps(message, None, _NEWLINE if newline else _PLAIN)
    except TypeError:  # a key that is no string, an integer past 64 bits, a lone surrogate ...
        return fallback(message)
    if b"null" in out:  # a None, or a non-finite float orjson wrote as null: json writes it
        return fallback(message)
    return out


_orjson: Any = None  # imported with the first message: importing kxen does not load it
_PLAIN = _NEWLINE = 0  # orjson's options, once it is imported


def _import() -> Any:
    global _orjson, _PLAIN, _NEWLINE
    import orjson

    _PLAIN = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
    _NEWLINE = _PLAIN | orjson.OPT_APPEND_NEWLINE
    _orjson = orjson
    return orjson


__all__ = ["dumps", "loads"]

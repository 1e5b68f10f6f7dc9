"""Text from outside kxen, made safe to print: on a terminal, and as strict JSON.

Server names, descriptions, error messages, a server's stderr, tool results, key paths of a
project file: any of it may carry terminal escapes, bidi overrides that reorder what is shown, or
lone surrogates that cannot be encoded. :func:`safe_text` shows every such character literally as
a visible escape (``\\x1b``, ``\\u202e``, ``\\udc80``), so nothing reaches the terminal that the
terminal would act on, and nothing makes printing fail.

Escaped: control characters (C0, DEL, C1 -- ``ESC`` among them), format characters (bidi
overrides and isolates, zero-width characters, Unicode tags), line and paragraph separators, and
surrogates. Newlines and tabs are escaped too unless ``multiline=True``.

:func:`json_text` is the ``--json`` form: always strict JSON (``allow_nan=False``). Non-finite
numbers (``1e999``, ``NaN`` from a server) become the strings ``"Infinity"``, ``"-Infinity"`` and
``"NaN"``; the characters above are written as ``\\uXXXX`` escapes, so the output is plain to look
at and decodes to exactly the same strings.

Rich is never given markup built from such text: tables are built from ``rich.text.Text``.

:class:`Secrets` (from :func:`kxen_core.config.secrets.config_secrets`) scrubs what the user configured as secret -- the
query values of a server URL (``api_key=...``), credential headers, sensitive env values -- from
whatever a server sends back before it is shown.
"""

from __future__ import annotations

import functools
import json
import math
import operator
import re
import unicodedata
from typing import Any
from urllib.parse import urlsplit, urlunsplit

#: Unicode categories shown as escapes: control, format, surrogate, line and paragraph separator
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

_CANDIDATE = re.compile(r"[^\x20-\x7e]")  # everything else is printable ASCII


@functools.lru_cache(maxsize=4096)
def _unsafe(ch: str) -> bool:
    return unicodedata.category(ch) in UNSAFE_CATEGORIES


def _escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _sub_line(m: re.Match[str]) -> str:
    ch = m.group()
    return _escape(ch) if _unsafe(ch) else ch


def _sub_multiline(m: re.Match[str]) -> str:
    ch = m.group()
    return _escape(ch) if ch not in "\n\t" and _unsafe(ch) else ch


def safe_text(value: Any, *, multiline: bool = False) -> str:
    """``value`` as text a terminal shows literally (``None`` is ``""``)."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    return _CANDIDATE.sub(_sub_multiline if multiline else _sub_line, text)


def finite(data: Any) -> Any:
    """``data`` with every non-finite float replaced by ``"Infinity"``, ``"-Infinity"`` or ``"NaN"``."""
    if isinstance(data, float):
        if math.isfinite(data):
            return data
        return "NaN" if math.isnan(data) else ("Infinity" if data > 0 else "-Infinity")
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(v) for v in data]
    return data


def _json_escape(m: re.Match[str]) -> str:
    ch = m.group()
    if ch < " " or not _unsafe(ch):  # json.dumps escapes C0 in strings; outside them it is layout
        return ch
    code = ord(ch)
    if code > 0xFFFF:  # as a surrogate pair, the only way JSON spells it
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def json_text(data: Any, *, indent: int | None = 2) -> str:
    """Strict JSON for ``data`` (see the module docstring), safe on a terminal."""
    text = json.dumps(finite(data), indent=indent, ensure_ascii=False, allow_nan=False)
    # outside strings the output is ASCII (and layout), so every other match is inside a string,
    # where \\uXXXX is valid
    return _CANDIDATE.sub(_json_escape, text)


def redacted_url(url: str | None) -> str:
    """``url`` for display: every query value (``api_key=...``) and any user info replaced by ``***``,
    the fragment dropped. The keys stay, so a person can still tell two URLs apart."""
    if not url:
        return ""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")[2]
        if "@" in parts.netloc:
            netloc = "***@" + netloc
    except ValueError:
        return "(not a valid URL)"
    query = "&".join(
        (piece.partition("=")[0] + "=***") if "=" in piece else piece for piece in parts.query.split("&") if piece
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def shown_url(server: Any) -> str:
    """A server's URL for display: as written when it took host variables (``https://${HOST}/mcp``:
    what a variable supplied is a secret), else the URL; query values hidden (:func:`redacted_url`)."""
    written = next((e.written for e in getattr(server, "expanded", ()) if e.path == "url"), None)
    return redacted_url(written if written is not None else server.url)


def query_values(url: str | None) -> list[str]:
    """The query values of ``url`` (what :func:`redacted_url` hides), raw and percent-decoded."""
    from urllib.parse import parse_qsl

    if not url:
        return []
    try:
        query = urlsplit(url).query
    except ValueError:
        return []
    out: list[str] = []
    for piece in query.split("&"):
        raw = piece.partition("=")[2]
        if raw:
            out.append(raw)
    for _key, value in parse_qsl(query, keep_blank_values=False):
        out.append(value)
    return [v for v in dict.fromkeys(out) if v]


def _same_answer(new: Any, old: Any) -> bool:
    """Whether a source's answer equals the one kept (a frozenset or a tuple, as ``_refresh`` keeps it)."""
    return new is old or (new == old if isinstance(new, (frozenset, tuple)) else frozenset(new) == old)


class Secrets:
    """Values that must never be printed (query values of configured URLs, credential header and env
    values, the tokens a sign-in plugin holds), scrubbed as ``***`` from text and from every string
    of a JSON-like value. Each value is also known in its :func:`safe_text` form and as it is written
    inside a JSON string, so it is found after escaping too.

    ``sources`` are callables that return the values some plugin holds *now* (see the
    ``kxen_register_secrets`` hook): they are asked at each scrub, and the scrubber is rebuilt only
    when one of them answers differently (an immutable answer -- a ``frozenset`` or ``tuple`` -- is
    compared by identity first, so a source that hands back the same object while nothing changed
    costs one call; equal answers in new objects cost a comparison, not a rebuild). A source that
    raises counts as no values and is asked again next time."""

    MIN_CHARS = 4  # shorter values are too common to scrub

    def __init__(self, values: Any = (), *, sources: Any = ()) -> None:
        self._fixed = self._forms(values)
        self._sources = tuple(sources)
        self._answers: tuple[Any, ...] = ()
        self._live: frozenset[str] = frozenset()
        self._values = sorted(self._fixed, key=len, reverse=True)  # whole values before their parts

    @classmethod
    def _forms(cls, values: Any) -> set[str]:
        found = {v for v in values if isinstance(v, str) and len(v) >= cls.MIN_CHARS}
        return found | {safe_text(v) for v in found} | {json.dumps(v, ensure_ascii=False)[1:-1] for v in found}

    def __bool__(self) -> bool:
        return bool(self.values)

    @property
    def values(self) -> list[str]:
        """Every value scrubbed now, longest first (the sources asked)."""
        sources = self._sources
        if sources:
            old = self._answers
            if len(old) == 1:  # one source (kxen's OAuth plugin): one call and one identity test
                try:
                    answer = sources[0]()
                except Exception:  # a broken source must not stop the scrub of everything else
                    answer = ()
                if answer is not old[0]:
                    self._refresh([answer])
            else:
                self._refresh(None)
        return self._values

    def _refresh(self, answers: list[Any] | None) -> None:
        old = self._answers
        if answers is None:
            answers = []
            for source in self._sources:
                try:
                    answers.append(source())
                except Exception:
                    answers.append(())
        if len(old) == len(answers) and all(map(operator.is_, answers, old)):
            return  # the same objects as last time (the common case: a loop in C)
        if len(old) == len(answers) and all(map(_same_answer, answers, old)):
            return  # equal answers in new objects (an immutable one compared by value: no rebuild)
        self._answers = tuple(a if isinstance(a, (frozenset, tuple)) else frozenset(a) for a in answers)
        live = self._forms(v for answer in self._answers for v in answer)
        if live != self._live:
            self._live = frozenset(live)
            self._values = sorted(self._fixed | live, key=len, reverse=True)

    def text(self, text: str) -> str:
        for v in self.values:
            if v in text:
                text = text.replace(v, "***")
        return text

    def cut_text(self, text: str, end: int) -> str:
        """:meth:`text` for a text cut at ``end`` (a bound): a secret's first characters (at least
        :data:`MIN_CHARS`) just before the cut are scrubbed too, so no cut shows part of a secret."""
        head, tail = text[:end], text[end:]
        for v in self.values:
            start = head.find(v[: self.MIN_CHARS], max(0, len(head) - len(v) + 1))
            while start != -1:
                if v.startswith(head[start:]):
                    head = head[:start] + "***"
                    break
                start = head.find(v[: self.MIN_CHARS], start + 1)
        return self.text(head) + tail

    def data(self, data: Any) -> Any:
        if not self.values:
            return data
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, dict):
            return {self.text(k) if isinstance(k, str) else k: self.data(v) for k, v in data.items()}
        if isinstance(data, (list, tuple)):
            return [self.data(v) for v in data]
        return data


__all__ = [
    "UNSAFE_CATEGORIES",
    "Secrets",
    "finite",
    "json_text",
    "query_values",
    "redacted_url",
    "safe_text",
    "shown_url",
]

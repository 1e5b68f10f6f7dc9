"""The ``WWW-Authenticate`` value of a 401/403 answer (RFC 9110 §11.6.1, RFC 6750 §3, RFC 9728 §5.1).

Several challenges may come in one value (``Basic realm="a", Bearer scope="x"``); parameter values
are tokens or quoted strings. The parser is total: whatever it cannot read it skips, and it never
looks at more than :data:`MAX_CHARS` characters.
"""

from __future__ import annotations

import re

import attrs

MAX_CHARS = 8192
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_SPACE = re.compile(r"[ \t]*")


@attrs.frozen(kw_only=True)
class Bearer:
    """What a Bearer challenge said (each field as sent; empty when absent)."""

    resource_metadata: str = ""
    scope: tuple[str, ...] = ()
    error: str = ""
    error_description: str = ""

    @property
    def insufficient_scope(self) -> bool:
        return self.error == "insufficient_scope"


def _quoted(text: str, i: int) -> tuple[str, int]:
    out = []
    i += 1
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
        elif c == '"':
            return "".join(out), i + 1
        else:
            out.append(c)
            i += 1
    return "".join(out), i


def _is_param(text: str, k: int) -> bool:
    """Whether ``name=`` (an auth-param) starts at ``k``."""
    m = _TOKEN.match(text, k)
    if not m:
        return False
    e = _SPACE.match(text, m.end()).end()  # type: ignore[union-attr]
    return e < len(text) and text[e] == "=" and not text.startswith("==", e)


def parse_challenges(value: str) -> list[tuple[str, dict[str, str]]]:
    """``[(scheme lower-cased, {param lower-cased: value})]`` in the order sent."""
    text = value[:MAX_CHARS]
    out: list[tuple[str, dict[str, str]]] = []
    i = 0
    current: dict[str, str] | None = None
    while i < len(text):
        i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
        if i < len(text) and text[i] == ",":
            i += 1
            continue
        m = _TOKEN.match(text, i)
        if not m:
            i += 1  # unreadable: skip one character (the loop always advances)
            continue
        name, j = m.group(), m.end()
        k = _SPACE.match(text, j).end()  # type: ignore[union-attr]
        if k < len(text) and text[k] == "=" and current is not None and not text.startswith("==", k):
            k = _SPACE.match(text, k + 1).end()  # type: ignore[union-attr]
            if k < len(text) and text[k] == '"':
                param, i = _quoted(text, k)
            else:
                v = _TOKEN.match(text, k)
                param, i = (v.group(), v.end()) if v else ("", k)
            current.setdefault(name.lower(), param)
            continue
        # a scheme starts a new challenge; an optional token68 may follow it
        current = {}
        out.append((name.lower(), current))
        i = j
        k = _SPACE.match(text, j).end()  # type: ignore[union-attr]
        if k > j and not _is_param(text, k):
            t = _TOKEN68.match(text, k)
            if t:
                i = t.end()
    return out


def parse_bearer(value: str) -> Bearer:
    """The first Bearer or DPoP challenge of ``value`` (RFC 9449 §7.1: the same parameters; an
    empty :class:`Bearer` when there is none)."""
    for scheme, params in parse_challenges(value):
        if scheme in ("bearer", "dpop"):
            scope = tuple(s for s in params.get("scope", "").split(" ") if s)[:100]
            return Bearer(
                resource_metadata=params.get("resource_metadata", "")[:2048],
                scope=scope,
                error=params.get("error", "")[:100],
                error_description=params.get("error_description", "")[:300],
            )
    return Bearer()

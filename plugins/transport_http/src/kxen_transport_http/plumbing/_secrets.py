"""URLs and header values as they may appear in messages: without secrets."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from kxen_core.safe_text import query_values


def safe_url(url: str) -> str:
    """``url`` without userinfo, query and fragment: what may appear in messages."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port is not None else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "(invalid url)"


def url_secrets(url: str | None) -> list[str]:
    """The query values of ``url`` (``api_key=...``), as written and percent-decoded: secrets."""
    return query_values(url)


class Redactor:
    """Remembers the header values sent lately, and the query values of the configured URLs, and
    scrubs them from any text.

    Call it on every text that leaves a transport (an exception message, a diagnostic, a body the
    server echoed): ``redact(text, limit)`` replaces each remembered value with ``***`` and cuts the
    result to ``limit`` characters. The query values of ``urls`` are kept for the transport's life.
    """

    MAX_VALUES = 64

    def __init__(self, urls: Iterable[str | None] = ()) -> None:
        self._values: set[str] = set()
        #: how often the remembered values were forgotten (a held credential is remembered again)
        self.clears = 0
        self._fixed: set[str] = {v for url in urls for v in url_secrets(url) if len(v) >= 4}

    def remember(self, values: Iterable[str]) -> None:
        for v in values:
            # "Bearer <token>": the token alone is a secret too (servers echo it without the scheme)
            scheme, _, credential = v.partition(" ")
            for secret in (v, credential.strip()) if credential and scheme.isalpha() else (v,):
                if len(secret) >= 4:
                    if len(self._values) >= self.MAX_VALUES:
                        self._values.clear()
                        self.clears += 1
                    self._values.add(secret)

    def __call__(self, text: str, limit: int = 300) -> str:
        for v in sorted(self._values | self._fixed, key=len, reverse=True):  # whole values before their parts
            if v in text:
                text = text.replace(v, "***")
        return text if len(text) <= limit else text[:limit] + "..."

    def value(self, value: Any) -> Any:
        """``value`` itself, or its redacted JSON text when a remembered value occurs in it."""
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            return None
        return value if not any(v in text for v in self._values | self._fixed) else self(text, 2000)

"""One canonical digest for launches and tool calls: what an approval is bound to.

Its own module so that :mod:`.policy` (which every policy or approval plugin imports) need not load
:mod:`.launch` and the file and process helpers behind it.
"""

from __future__ import annotations

from typing import Any


def fingerprint(payload: Any) -> str:
    """A stable SHA-256 over canonical JSON (a lone surrogate is hashed as itself, never a crash)."""
    import hashlib  # on first use: importing kxen need not load OpenSSL's digests
    import json

    data = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )
    return hashlib.sha256(data).hexdigest()


__all__ = ["fingerprint"]

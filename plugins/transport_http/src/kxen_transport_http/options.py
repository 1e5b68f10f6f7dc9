"""The ``options`` of ``http`` and ``sse`` server entries, validated when the config is loaded.

Kept free of heavy imports: the entry points import it to register the kinds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

MiB = 1024 * 1024


def _within(low: float, high: float, rule: str) -> Callable[[Any, attrs.Attribute, Any], None]:
    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if not low <= value <= high:
            raise ValueError(f"{attribute.name} must be {rule} (got {value!r})")

    return check


_bytes = _within(1024, 1024 * MiB, "an integer from 1024 to 1073741824")
_connect = _within(0.001, 600, "a number of seconds > 0 and <= 600")
_queue = _within(1, 65536, "an integer from 1 to 65536")
_header_bytes = _within(64, MiB, "an integer from 64 to 1048576")


@attrs.frozen(kw_only=True)
class SseOptions:
    """``options`` of an ``sse`` entry (legacy HTTP+SSE)."""

    #: the largest response body or SSE event accepted
    maxMessageBytes: int = attrs.field(default=16 * MiB, validator=_bytes)
    connectTimeoutSeconds: float = attrs.field(default=10.0, validator=_connect)
    #: messages from the server waiting for the session
    queueSize: int = attrs.field(default=256, validator=_queue)
    #: how long the SSE stream may take to name its POST endpoint
    endpointTimeoutSeconds: float = attrs.field(default=10.0, validator=_connect)


@attrs.frozen(kw_only=True)
class HttpOptions:
    """``options`` of an ``http`` entry (Streamable HTTP)."""

    maxMessageBytes: int = attrs.field(default=16 * MiB, validator=_bytes)
    connectTimeoutSeconds: float = attrs.field(default=10.0, validator=_connect)
    queueSize: int = attrs.field(default=256, validator=_queue)
    #: open the GET stream for server-initiated messages after initialize
    getStream: bool = True
    maxReconnectAttempts: int = attrs.field(default=3, validator=_within(0, 100, "an integer from 0 to 100"))
    defaultRetryMs: int = attrs.field(default=1000, validator=_within(0, 600_000, "an integer from 0 to 600000"))
    #: the stateless era's mirrored headers: one ``Mcp-Name``/``Mcp-Param-*`` value as sent, and
    #: ``Mcp-Method``, ``Mcp-Name`` and every ``Mcp-Param-*`` together (names and values); a request
    #: over either fails before it is sent
    maxHeaderValueBytes: int = attrs.field(default=4096, validator=_header_bytes)
    maxMirroredHeaderBytes: int = attrs.field(default=8192, validator=_header_bytes)

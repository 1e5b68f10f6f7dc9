"""The ``options`` of a stdio server entry, validated when the config is loaded."""

from __future__ import annotations

from typing import Any

import attrs

MAX_LINE_BYTES = 32 * 1024 * 1024  # default bound of one stdout line
MIN_LINE_BYTES, MAX_LINE_BYTES_LIMIT = 1024, 1024 * 1024 * 1024


def _line_bound(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if not MIN_LINE_BYTES <= value <= MAX_LINE_BYTES_LIMIT:
        raise ValueError(
            f"maxLineBytes must be an integer from {MIN_LINE_BYTES} to {MAX_LINE_BYTES_LIMIT} (got {value})"
        )


@attrs.frozen(kw_only=True)
class StdioOptions:
    """``options`` of a ``stdio`` entry (camelCase keys, as in ``mcp.json``)."""

    #: the longest stdout line (one JSON-RPC message) accepted; longer lines are skipped
    maxLineBytes: int = attrs.field(default=MAX_LINE_BYTES, validator=_line_bound)

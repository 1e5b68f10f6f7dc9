"""The sides a workload runs on, and the adapters of each transport.

- ``raw``: the floor (plain asyncio + json over the pipes; one plain httpx POST per request).
- ``kxen``: the host's public path, a ``Runtime`` (``adapters_runtime``): what the targets judge.
- ``session``: kxen's ``Session`` over its transport, without the Runtime (informational: it shows
  what the Runtime adds).
- ``sdk``: the official Python SDK's client (informational; W1's client CPU is judged against it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapters import KxenHttpClient, KxenStdioClient, RawHttpClient, RawStdioClient, ServerSpec
from adapters_runtime import ClientFleet, KxenRuntimeClient, KxenRuntimeFleet, KxenRuntimeHttpClient
from adapters_sdk import SdkHttpClient, SdkStdioClient, available

SIDES = ("raw", "kxen", "session", "sdk")

ADAPTERS: dict[str, dict[str, type]] = {
    "stdio": {"raw": RawStdioClient, "kxen": KxenRuntimeClient, "session": KxenStdioClient, "sdk": SdkStdioClient},
    "http": {"raw": RawHttpClient, "kxen": KxenRuntimeHttpClient, "session": KxenHttpClient, "sdk": SdkHttpClient},
}


def usable(side: str) -> bool:
    return side != "sdk" or available()


def maker(transport: str, side: str, pipelined: bool) -> Callable[..., Any]:
    """``make(spec, pipelined=...)`` for one side, with ``make.fleet(specs)`` for W5's first shape:
    one Runtime holding every server on the kxen side, one client per server on the others."""
    cls = ADAPTERS[transport][side]

    def make(spec: ServerSpec, pipelined: bool = pipelined) -> Any:
        return cls(spec, pipelined=pipelined)

    def fleet(specs: list[ServerSpec]) -> Any:
        if side == "kxen":
            return KxenRuntimeFleet(specs)
        return ClientFleet([cls(s) for s in specs])

    make.fleet = fleet  # type: ignore[attr-defined]
    return make

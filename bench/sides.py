"""The sides a workload runs on, and the adapters of each transport.

- ``raw``: the floor (plain asyncio + json over the pipes; one plain httpx POST per request).
- ``kxen``: the host's public path, a ``Runtime`` (``adapters_runtime``): what the targets judge.
- ``session``: kxen's ``Session`` over its transport, without the Runtime (informational: it shows
  what the Runtime adds).
- ``sdk``: the official Python SDK's client (informational; W1's client CPU is judged against it).
- ``kxen_bearer``: W9 only (transport ``http_auth``, a peer that requires a Bearer token): a Runtime
  whose entry sends the token as a static header, what W9's OAuth side (``kxen`` there: the token
  from the OAuth plugin's store) is judged against.

A workload runs on the sides its transport has an adapter for (``sides_for``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapters import KxenHttpClient, KxenStdioClient, RawHttpClient, RawStdioClient, ServerSpec
from adapters_runtime import (
    ClientFleet,
    KxenRuntimeClient,
    KxenRuntimeFleet,
    KxenRuntimeHttpClient,
    KxenRuntimeOAuthClient,
)
from adapters_sdk import SdkHttpClient, SdkStdioClient, available

SIDES = ("raw", "kxen", "kxen_bearer", "session", "sdk")

ADAPTERS: dict[str, dict[str, type]] = {
    "stdio": {"raw": RawStdioClient, "kxen": KxenRuntimeClient, "session": KxenStdioClient, "sdk": SdkStdioClient},
    "http": {"raw": RawHttpClient, "kxen": KxenRuntimeHttpClient, "session": KxenHttpClient, "sdk": SdkHttpClient},
    # W9: the peer requires a Bearer token; every side but kxen's OAuth one sends it as a static header
    "http_auth": {
        "raw": RawHttpClient,
        "kxen": KxenRuntimeOAuthClient,
        "kxen_bearer": KxenRuntimeHttpClient,
        "session": KxenHttpClient,
        "sdk": SdkHttpClient,
    },
}
#: what ``--transport`` may choose for the workloads that name none (the others name their own)
CHOSEN_TRANSPORTS = ("http", "stdio")


def sides_for(transport: str, sides: tuple[str, ...]) -> tuple[str, ...]:
    """Those of ``sides`` that ``transport`` has an adapter for."""
    return tuple(s for s in sides if s in ADAPTERS[transport])


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

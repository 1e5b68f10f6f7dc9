"""The ``sse`` entry point: legacy HTTP+SSE for servers whose kind is ``sse``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kxen_core.plugins import hookimpl

if TYPE_CHECKING:
    from kxen_core.config.models import ServerConfig
    from kxen_core.transport import TransportContext


@hookimpl
def kxen_transport_open(server: ServerConfig, context: TransportContext) -> Any:
    if server.kind != "sse":
        return None
    from .legacy import open_legacy_sse  # imported on use: keeps plugin discovery light

    return open_legacy_sse(server, context)

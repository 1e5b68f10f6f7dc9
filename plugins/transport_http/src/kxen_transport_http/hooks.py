"""The ``http`` entry point: Streamable HTTP for servers whose kind is ``http``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kxen_core.plugins import hookimpl

if TYPE_CHECKING:
    from kxen_core.config.models import ServerConfig
    from kxen_core.transport import TransportContext


@hookimpl
def kxen_transport_open(server: ServerConfig, context: TransportContext) -> Any:
    if server.kind != "http":
        return None
    from .streamable import open_streamable_http  # imported on use: keeps plugin discovery light

    return open_streamable_http(server, context)

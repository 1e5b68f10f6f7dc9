"""The ``sse`` entry point: legacy HTTP+SSE for servers whose kind is ``sse``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kxen_transport_http.options import SseOptions

from kxen_core import hookimpl

if TYPE_CHECKING:
    from kxen_core import RegisterTransport, ServerConfig, Transport, TransportContext


def open_sse(server: ServerConfig, context: TransportContext) -> Transport:
    from .legacy import open_legacy_sse  # imported on use: keeps plugin discovery light

    return open_legacy_sse(server, context)


@hookimpl
def kxen_register_transports(register: RegisterTransport) -> None:
    register("sse", open_sse, options=SseOptions)

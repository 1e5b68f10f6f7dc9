"""The ``http`` entry point: Streamable HTTP for servers whose kind is ``http``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kxen_core import hookimpl

from .options import HttpOptions

if TYPE_CHECKING:
    from kxen_core import RegisterTransport, ServerConfig, Transport, TransportContext


def open_http(server: ServerConfig, context: TransportContext) -> Transport:
    from .streamable import open_streamable_http  # imported on use: keeps plugin discovery light

    return open_streamable_http(server, context)


@hookimpl
def kxen_register_transports(register: RegisterTransport) -> None:
    register("http", open_http, options=HttpOptions)

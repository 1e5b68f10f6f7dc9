"""The ``http`` entry point: Streamable HTTP for servers whose kind is ``http``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kxen_core import hookimpl

from .options import HttpOptions

if TYPE_CHECKING:
    from kxen_core import CatalogPage, RegisterTransport, ServerConfig, Transport, TransportContext, Verdict


def open_http(server: ServerConfig, context: TransportContext) -> Transport:
    from .streamable import open_streamable_http  # imported on use: keeps plugin discovery light

    return open_streamable_http(server, context)


@hookimpl
def kxen_register_transports(register: RegisterTransport) -> None:
    register("http", open_http, options=HttpOptions)


@hookimpl
def kxen_catalog_page(server: ServerConfig, kind: str, page: CatalogPage) -> list[Verdict]:
    """Over Streamable HTTP in the stateless era, a tool whose ``x-mcp-header`` annotations cannot be
    mirrored into headers is dropped (MCP 2026-07-28): it could never be called correctly."""
    if kind != "tools" or page.era != "modern" or server.kind != "http":
        return []
    from kxen_core import Verdict

    from ._modern import invalid_header

    verdicts = []
    for index, tool in enumerate(page.items):
        reason = invalid_header(tool.get("inputSchema"))
        if reason is not None:
            verdicts.append(Verdict.reject(index, reason))
    return verdicts

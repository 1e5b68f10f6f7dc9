"""Entry point ``stdio`` of the ``kxen`` group (kept light: the transport module loads on first use)."""

from __future__ import annotations

from kxen_core.plugins import hookimpl


@hookimpl
def kxen_transport_open(server, context):
    if server.kind != "stdio":
        return None
    from .transport import StdioTransport

    return StdioTransport(server, context)

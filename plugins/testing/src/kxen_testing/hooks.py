"""Entry point ``memory`` of the ``kxen`` group."""

from __future__ import annotations

from kxen_core.plugins import hookimpl


@hookimpl
def kxen_transport_open(server, context):
    if server.kind != "memory":
        return None
    from .memory import MemoryTransport

    return MemoryTransport(server, context)

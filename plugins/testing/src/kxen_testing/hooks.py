"""Entry point ``memory`` of the ``kxen`` group."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from kxen_core import hookimpl

if TYPE_CHECKING:
    from kxen_core import RegisterTransport, ServerConfig, Transport, TransportContext


@attrs.frozen(kw_only=True)
class MemoryOptions:
    """``options`` of a ``memory`` entry: the registered fake server to talk to (default: the entry's name)."""

    server: str | None = None


def open_memory(server: ServerConfig, context: TransportContext[MemoryOptions]) -> Transport:
    from .memory import MemoryTransport

    return MemoryTransport(server, context)


@hookimpl
def kxen_register_transports(register: RegisterTransport) -> None:
    register("memory", open_memory, options=MemoryOptions)

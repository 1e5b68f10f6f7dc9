"""Entry point ``stdio`` of the ``kxen`` group (kept light: the transport module loads on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kxen_core import hookimpl

from .options import StdioOptions

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    from kxen_core import RegisterTransport, ServerConfig, Transport, TransportContext


def open_stdio(server: ServerConfig, context: TransportContext[StdioOptions]) -> Transport:
    from .transport import StdioTransport

    return StdioTransport(server, context)


@hookimpl
def kxen_register_transports(register: RegisterTransport) -> None:
    register("stdio", open_stdio, options=StdioOptions)


@hookimpl
def kxen_host_guard(home: Path, subreaper: bool) -> AbstractAsyncContextManager[Any]:
    from .guard import HostGuard

    return HostGuard(home, subreaper=subreaper)

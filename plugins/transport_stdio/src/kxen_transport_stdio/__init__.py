"""kxen-transport-stdio: MCP servers as child processes speaking newline-delimited JSON.

The entry point (``kxen_transport_stdio.hooks``) imports only the options; the transport itself
(``StdioTransport``, ``child_env``, ``ENV_PASSTHROUGH``) is loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .options import StdioOptions

if TYPE_CHECKING:
    from .transport import ENV_PASSTHROUGH, StdioTransport, child_env


def __getattr__(name: str) -> Any:
    if name in ("ENV_PASSTHROUGH", "StdioTransport", "child_env"):
        from . import transport

        return getattr(transport, name)
    raise AttributeError(f"module 'kxen_transport_stdio' has no attribute {name!r}")


__all__ = ["ENV_PASSTHROUGH", "StdioOptions", "StdioTransport", "child_env"]

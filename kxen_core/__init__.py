"""kxen: a strict, fast MCP host runtime.

Public names: :class:`Runtime`, ``hookimpl`` (the marker plugins use), the config loader and the
error tree. Everything else is importable from its module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .runtime import Runtime

from .plugins import hookimpl


def __getattr__(name: str) -> Any:
    # the runtime pulls in anyio and the session; load it on first use to keep imports cheap
    if name == "Runtime":
        from .runtime import Runtime

        return Runtime
    raise AttributeError(name)


__all__ = ["Runtime", "hookimpl", "__version__"]

"""kxen-transport-stdio: MCP servers as child processes speaking newline-delimited JSON."""

from .options import StdioOptions
from .transport import ENV_PASSTHROUGH, StdioTransport, child_env

__all__ = ["ENV_PASSTHROUGH", "StdioOptions", "StdioTransport", "child_env"]

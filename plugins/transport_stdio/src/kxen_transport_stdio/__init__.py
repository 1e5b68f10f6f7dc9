"""kxen-transport-stdio: MCP servers as child processes speaking newline-delimited JSON."""

from .transport import ENV_PASSTHROUGH, StdioTransport, child_env, resolve_launch

__all__ = ["ENV_PASSTHROUGH", "StdioTransport", "child_env", "resolve_launch"]

"""An MCP server on the official Python SDK (the ``mcp`` package) whose one tool has parameters named like
LangChain's own keyword arguments (``config``, ``callbacks``, ``run_manager``): they must reach the
server as the model sent them. Usage: ``python named_args_server.py`` (stdio)."""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("kxen-named-args-peer")


@mcp.tool()
def configure(config: str, callbacks: int, run_manager: bool) -> str:
    """Say what arrived."""
    return json.dumps({"config": config, "callbacks": callbacks, "run_manager": run_manager}, sort_keys=True)


if __name__ == "__main__":
    mcp.run("stdio")

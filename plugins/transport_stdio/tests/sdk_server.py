"""The official Python SDK (mcp 2.x MCPServer) over stdio: a real third-party peer for kxen."""

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("kxen-sdk-peer")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@mcp.tool()
def boom() -> str:
    """Always raise."""
    raise RuntimeError("boom went the tool")


if __name__ == "__main__":
    mcp.run("stdio")

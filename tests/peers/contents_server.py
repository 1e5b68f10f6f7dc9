"""An MCP server on the official Python SDK (the ``mcp`` package) with resources and prompts, over stdio.

Resources: ``note://hello`` (text), ``bin://pixel`` (16 bytes, ``image/png``), and the template
``note://{name}``. Prompts: ``review`` (``code`` required, ``language`` optional) and ``hello`` (no
arguments). Tool: ``picture`` returns the same 16 bytes as an image content.
"""

from __future__ import annotations

import base64

from mcp.server.mcpserver import MCPServer
from mcp.types import ImageContent

mcp = MCPServer("kxen-contents-peer")

PIXEL = bytes(range(16))


@mcp.resource("note://hello", name="hello", description="a text note", mime_type="text/plain")
def hello_note() -> str:
    return "hello from the SDK"


@mcp.resource("bin://pixel", name="pixel", description="sixteen bytes", mime_type="image/png")
def pixel() -> bytes:
    return PIXEL


@mcp.resource("note://{name}", name="note", description="a note by name", mime_type="text/plain")
def note(name: str) -> str:
    return f"note {name}"


@mcp.prompt(description="review some code")
def review(code: str, language: str = "python") -> str:
    return f"Review this {language} code:\n{code}"


@mcp.prompt(description="say hello")
def hello() -> str:
    return "hello"


@mcp.tool()
def picture() -> ImageContent:
    """Return a tiny image."""
    return ImageContent(type="image", data=base64.b64encode(PIXEL).decode(), mimeType="image/png")


if __name__ == "__main__":
    mcp.run("stdio")

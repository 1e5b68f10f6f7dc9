"""A hostile stdio MCP server (stdlib only) whose answers are huge: results, reads and prompts.

Usage: ``python contents_server.py [--log FILE]``; ``--log`` appends every message it receives to
FILE (one JSON line each), so a test can prove what never left the client.

Tools: ``huge`` (a 20 MiB text block), ``blocks`` (200 text blocks of 5,000 characters),
``media`` (a 2 MiB image, a 1 MiB audio clip and a 3 MiB embedded blob), ``structured`` (20 MiB of
``structuredContent`` and no content), ``error`` (an ``isError`` result of 1 MiB). Resources:
``huge://text`` (20 MiB of text), ``huge://blob`` (a 12 MiB blob labelled ``text/plain``),
``huge://many`` (300 contents, text and blob). Prompts: ``big`` (argument ``topic`` required) answers
3 MiB of text and a 2 MiB image.
"""

from __future__ import annotations

import base64
import json
import sys

MiB = 1024 * 1024


def b64(size: int, byte: bytes) -> str:
    return base64.b64encode(byte * size).decode()


def schema() -> dict:
    return {"type": "object"}


TOOLS = [
    {"name": n, "description": f"hostile {n}", "inputSchema": schema()}
    for n in ("huge", "blocks", "media", "structured", "error")
]
RESOURCES = [
    {"uri": "huge://text", "name": "text", "mimeType": "text/plain"},
    {"uri": "huge://blob", "name": "blob", "mimeType": "text/plain"},
    {"uri": "huge://many", "name": "many"},
]
PROMPTS = [{"name": "big", "description": "a big prompt", "arguments": [{"name": "topic", "required": True}]}]


def call(name: str) -> dict:
    if name == "huge":
        return {"content": [{"type": "text", "text": "H" * (20 * MiB)}]}
    if name == "blocks":
        return {"content": [{"type": "text", "text": str(i % 10) * 5000} for i in range(200)]}
    if name == "media":
        return {
            "content": [
                {"type": "image", "data": b64(2 * MiB, b"\x89"), "mimeType": "image/png"},
                {"type": "audio", "data": b64(MiB, b"\x01"), "mimeType": "audio/wav"},
                {
                    "type": "resource",
                    "resource": {
                        "uri": "huge://embedded",
                        "blob": b64(3 * MiB, b"\xfe"),
                        "mimeType": "application/octet-stream",
                    },
                },
            ]
        }
    if name == "structured":
        return {"content": [], "structuredContent": {"rows": ["S" * 1000] * (20 * 1024)}}
    return {"content": [{"type": "text", "text": "E" * MiB}], "isError": True}


def read(uri: str) -> dict:
    if uri == "huge://text":
        return {"contents": [{"uri": uri, "text": "T" * (20 * MiB), "mimeType": "text/plain"}]}
    if uri == "huge://blob":
        return {"contents": [{"uri": uri, "blob": b64(12 * MiB, b"\x7f"), "mimeType": "text/plain"}]}
    many = []
    for i in range(300):
        if i % 2:
            many.append({"uri": f"{uri}/{i}", "blob": b64(10_000, b"\x02"), "mimeType": "image/png"})
        else:
            many.append({"uri": f"{uri}/{i}", "text": "m" * 1000})
    return {"contents": many}


def main() -> None:
    log = open(sys.argv[sys.argv.index("--log") + 1], "a", encoding="utf-8") if "--log" in sys.argv else None
    out = sys.stdout
    for line in sys.stdin:
        if log:
            log.write(line if line.endswith("\n") else line + "\n")
            log.flush()
        message = json.loads(line)
        method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
        if rid is None or method is None:
            continue
        if method == "initialize":
            result: dict = {
                "protocolVersion": params.get("protocolVersion"),
                "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
                "serverInfo": {"name": "hostile-contents", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "resources/list":
            result = {"resources": RESOURCES}
        elif method == "resources/templates/list":
            result = {
                "resourceTemplates": [{"uriTemplate": "huge://{name}", "name": "any", "description": "D" * 100_000}]
            }
        elif method == "prompts/list":
            result = {"prompts": PROMPTS}
        elif method == "tools/call":
            result = call(params.get("name"))
        elif method == "resources/read":
            result = read(params.get("uri"))
        elif method == "prompts/get":
            result = {
                "messages": [
                    {"role": "user", "content": {"type": "text", "text": "P" * (3 * MiB)}},
                    {
                        "role": "user",
                        "content": {"type": "image", "data": b64(2 * MiB, b"\x03"), "mimeType": "image/png"},
                    },
                ]
            }
        elif method == "ping":
            result = {}
        else:
            out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}}) + "\n")
            out.flush()
            continue
        out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()

"""A hostile stdio MCP server (stdlib only) for the catalog and notification tests.

``tools/list`` offers tools with names inside and outside MCP's rule, a 1 MB description, a schema
pointing at another document, a 128-character name and one of 129. ``tools/call`` of ``flood``
sends ``PROGRESS`` progress notifications for the call's token (and some for a made-up one) and
``MESSAGES`` log messages of 100 KB each, then answers. Usage: ``noisy_server.py [PROGRESS] [MESSAGES]``.
"""

import json
import sys

PROGRESS = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
MESSAGES = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000
OBJ = {"type": "object"}
TOOLS = [
    {"name": "flood", "title": "Flood", "inputSchema": OBJ, "annotations": {"readOnlyHint": True}},
    {"name": "dotted.name", "inputSchema": OBJ},
    {"name": "n" * 128, "inputSchema": OBJ},
    {"name": "n" * 129, "inputSchema": OBJ},
    {"name": "has space", "inputSchema": OBJ},
    {"name": "emoji_\U0001f600", "inputSchema": OBJ},
    {"name": "esc\x1b[2J", "inputSchema": OBJ},
    {"name": "huge_description", "description": "d" * 1_000_000, "inputSchema": OBJ},
    {
        "name": "remote_ref",
        "inputSchema": {"type": "object", "properties": {"x": {"$ref": "https://example.invalid/s.json"}}},
    },
    {"name": "array_schema", "inputSchema": {"type": "array"}},
]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")


def answer(rid, result):
    send({"jsonrpc": "2.0", "id": rid, "result": result})
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
    if rid is None:
        continue
    if method == "initialize":
        answer(
            rid,
            {
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "noisy", "version": "0"},
            },
        )
    elif method == "tools/list":
        answer(rid, {"tools": TOOLS})
    elif method == "tools/call":
        token = (params.get("_meta") or {}).get("progressToken")
        blob = "m" * 100_000
        for i in range(1, max(PROGRESS, MESSAGES) + 1):
            if token is not None and i <= PROGRESS:
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": i, "total": PROGRESS},
                    }
                )
            if i % 100 == 0:
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": "made-up", "progress": i},
                    }
                )
            if i <= MESSAGES:
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/message",
                        "params": {"level": "warning", "logger": "flood", "data": blob},
                    }
                )
        answer(rid, {"content": [{"type": "text", "text": f"called {params.get('name')}"}]})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})
        sys.stdout.flush()

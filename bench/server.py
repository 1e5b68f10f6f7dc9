#!/usr/bin/env python3
"""The benchmark's MCP peer: a minimal stdio server, standard library only, no SDK.

Leaner than ``demo/server.py`` on purpose (no argparse, no threads, no lock, binary stdin/stdout):
the faster the peer, the more of the client's own cost a ratio to the raw floor shows.

Methods: ``initialize``, ``ping``, ``tools/list`` (paged through ``nextCursor``), ``tools/call``
(``echo`` returns its ``text``; ``tool_<i>`` returns its own name). Notifications are read and
ignored. Requests are answered in arrival order, one at a time: concurrent clients pipeline.

Usage: ``server.py [--tools N] [--page-size P] [--catalog FILE] [--resource-chars N]`` serves
``echo`` plus N tools ``tool_0..`` (with ``--catalog``, the real definitions of FILE repeated under
those names). With ``--resource-chars N`` (opt-in: W10) it also declares ``resources`` and serves
one text resource, :data:`RESOURCE_URI`, of N characters (:func:`resource_text`), through
``resources/list``, ``resources/templates/list`` (empty) and ``resources/read``.
"""

import json
import sys

RESOURCE_URI = "bench://text/big"


def resource_text(n_chars: int) -> str:
    """``n_chars`` characters of numbered lines (each line says where it starts), so that a prefix
    of the text is told from any other slice of it."""
    lines, size, i = [], 0, 0
    while size < n_chars:
        line = f"{size:09d} line {i} of the bench resource\n"
        lines.append(line)
        size += len(line)
        i += 1
    return "".join(lines)[:n_chars]


def make_tools(n_tools: int, catalog: str = "") -> list[dict]:
    """``echo`` and ``tool_0`` .. ``tool_<n-1>``: the catalog both bench peers serve. With
    ``catalog`` (a JSON list of real tool definitions), tool ``i`` is definition ``i % len`` of it
    under the name ``tool_<i>`` (its description, schema and annotations kept)."""
    tools = [
        {
            "name": "echo",
            "description": "Return the given text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        }
    ]
    if catalog:
        with open(catalog, encoding="utf-8") as f:
            real = json.load(f)["tools"]
        return tools + [{**real[i % len(real)], "name": f"tool_{i}"} for i in range(n_tools)]
    tools += [
        {
            "name": f"tool_{i}",
            "description": f"Generated tool number {i}.",
            "inputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}},
        }
        for i in range(n_tools)
    ]
    return tools


def main() -> None:
    argv = sys.argv[1:]
    n_tools = int(argv[argv.index("--tools") + 1]) if "--tools" in argv else 0
    page_size = int(argv[argv.index("--page-size") + 1]) if "--page-size" in argv else 100
    catalog = argv[argv.index("--catalog") + 1] if "--catalog" in argv else ""
    resource_chars = int(argv[argv.index("--resource-chars") + 1]) if "--resource-chars" in argv else 0
    tools = make_tools(n_tools, catalog)
    capabilities: dict = {"tools": {}}
    resources: list = []
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    read_tail = b""  # the encoded resources/read result after the id, made once (the peer stays lean)
    if resource_chars:
        capabilities["resources"] = {}
        resources = [{"uri": RESOURCE_URI, "name": "big", "mimeType": "text/plain", "size": resource_chars}]
        contents = [{"uri": RESOURCE_URI, "mimeType": "text/plain", "text": resource_text(resource_chars)}]
        read_tail = b',"result":' + dumps({"contents": contents}).encode() + b"}\n"
    loads = json.loads
    read = sys.stdin.buffer.readline
    out = sys.stdout.buffer
    write, flush = out.write, out.flush

    while True:
        line = read()
        if not line:
            return
        try:
            msg = loads(line)
        except ValueError:
            continue
        rid = msg.get("id")
        method = msg.get("method")
        if rid is None or method is None:
            continue  # a notification (or a stray reply): nothing to answer
        params = msg.get("params") or {}
        if method == "tools/call":
            name = params.get("name")
            if name == "echo":
                text = (params.get("arguments") or {}).get("text", "")
                result = {"content": [{"type": "text", "text": text}]}
            elif isinstance(name, str) and name.startswith("tool_"):
                result = {"content": [{"type": "text", "text": name}]}
            else:
                reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "unknown tool"}}
                write(dumps(reply).encode() + b"\n")
                flush()
                continue
        elif method == "tools/list":
            start = int(params.get("cursor") or 0)
            end = start + page_size
            result = {"tools": tools[start:end]}
            if end < len(tools):
                result["nextCursor"] = str(end)
        elif method == "resources/read" and resources and params.get("uri") == RESOURCE_URI:
            write(b'{"jsonrpc":"2.0","id":' + dumps(rid).encode() + read_tail)
            flush()
            continue
        elif method == "resources/list" and resources:
            result = {"resources": resources}
        elif method == "resources/templates/list" and resources:
            result = {"resourceTemplates": []}
        elif method == "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion") or "2025-11-25",
                "capabilities": capabilities,
                "serverInfo": {"name": "kxen-bench", "version": "0.1.0"},
            }
        elif method == "ping":
            result = {}
        else:
            reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "method not found"}}
            write(dumps(reply).encode() + b"\n")
            flush()
            continue
        write(dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode() + b"\n")
        flush()


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass

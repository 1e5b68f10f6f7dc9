#!/usr/bin/env python3
"""A small MCP server over stdio, standard library only (no SDK): kxen's demo and benchmark peer.

Tools: ``echo`` (text back), ``add`` (a + b, with structured content), ``slow`` (sleeps, for timeout
and cancellation demos), ``fail`` (an error result). With ``--tools N`` it also serves N generated
tools ``tool_0..`` paged ``--page-size`` at a time, for catalog benchmarks. It logs nothing to stdout
but protocol messages; ``--log FILE`` appends every received message to FILE (one JSON per line).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")

BASE_TOOLS = [
    {
        "name": "echo",
        "description": "Return the given text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {
        "name": "add",
        "description": "Add two numbers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
        "outputSchema": {"type": "object", "properties": {"sum": {"type": "number"}}},
    },
    {
        "name": "slow",
        "description": "Sleep for `seconds`, then answer.",
        "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
    },
    {"name": "fail", "description": "Always report an error.", "inputSchema": {"type": "object"}},
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", type=int, default=0, help="extra generated tools")
    ap.add_argument("--page-size", type=int, default=100)
    ap.add_argument("--log", help="append every received message to this file")
    opts = ap.parse_args()

    tools = BASE_TOOLS + [
        {
            "name": f"tool_{i}",
            "description": f"Generated tool number {i}.",
            "inputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}},
        }
        for i in range(opts.tools)
    ]
    out = sys.stdout
    lock = threading.Lock()
    log = open(opts.log, "a", encoding="utf-8") if opts.log else None
    cancelled: set = set()

    def send(msg: dict) -> None:
        data = json.dumps(msg, separators=(",", ":")) + "\n"
        with lock:
            out.write(data)
            out.flush()

    def reply(rid, result) -> None:
        send({"jsonrpc": "2.0", "id": rid, "result": result})

    def slow(rid, seconds: float) -> None:
        time.sleep(seconds)
        if rid not in cancelled:
            reply(rid, {"content": [{"type": "text", "text": f"slept {seconds}"}]})

    for line in sys.stdin:
        if log:
            log.write(line if line.endswith("\n") else line + "\n")
            log.flush()
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method is None or rid is None:
            if method == "notifications/cancelled":
                cancelled.add(params.get("requestId"))
            continue
        if method == "initialize":
            asked = params.get("protocolVersion")
            reply(
                rid,
                {
                    "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "kxen-demo", "version": "0.1.0"},
                },
            )
        elif method == "ping":
            reply(rid, {})
        elif method == "tools/list":
            start = int(params.get("cursor") or 0)
            end = start + opts.page_size
            result = {"tools": tools[start:end]}
            if end < len(tools):
                result["nextCursor"] = str(end)
            reply(rid, result)
        elif method == "tools/call":
            name, args = params.get("name"), params.get("arguments") or {}
            if name == "echo":
                reply(rid, {"content": [{"type": "text", "text": str(args.get("text", ""))}]})
            elif name == "add":
                total = args.get("a", 0) + args.get("b", 0)
                reply(
                    rid,
                    {
                        "content": [{"type": "text", "text": json.dumps({"sum": total})}],
                        "structuredContent": {"sum": total},
                    },
                )
            elif name == "slow":
                seconds = args.get("seconds")  # left out, or null (a strict-mode model's "left out"): 1
                seconds = 1.0 if seconds is None else float(seconds)
                threading.Thread(target=slow, args=(rid, seconds), daemon=True).start()
            elif name == "fail":
                reply(rid, {"content": [{"type": "text", "text": "this tool always fails"}], "isError": True})
            elif name.startswith("tool_"):
                reply(rid, {"content": [{"type": "text", "text": name}]})
            else:
                send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"Unknown tool: {name}"}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"Method not found: {method}"}})


if __name__ == "__main__":
    main()

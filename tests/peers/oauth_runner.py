"""kxen in a second process for the OAuth tests: ``python oauth_runner.py HOME WORKSPACE SERVER TOOL
[ARGS_JSON]``. Starts a Runtime with the http transport and kxen-oauth (no authorize-URL taker:
it can only use what is stored), calls the tool once and prints one JSON line: the server's state,
its error and the tool's text. Exit 0 when the call succeeded."""

from __future__ import annotations

import json
import sys

import anyio

from kxen_core import Runtime
from kxen_core.plugins.manager import make_plugin_manager


async def main(home: str, ws: str, server: str, tool: str, args: str) -> int:
    pm = make_plugin_manager(allow=["http", "oauth"])
    async with Runtime(home=home, workspace=ws, pm=pm) as rt:
        await rt.wait_ready(30)
        (status,) = [s for s in rt.status() if s["name"] == server]
        out = {"state": status["state"], "error": status.get("error"), "text": None}
        if status["state"] == "ready":
            result = await rt.call_tool(f"{server}__{tool}", json.loads(args))
            out["text"] = "".join(c.get("text", "") for c in result.get("content", []))
            out["isError"] = bool(result.get("isError"))
        print(json.dumps(out))
        return 0 if out["text"] is not None and not out.get("isError") else 1


if __name__ == "__main__":
    a = sys.argv[1:]
    sys.exit(anyio.run(main, a[0], a[1], a[2], a[3], a[4] if len(a) > 4 else "{}"))

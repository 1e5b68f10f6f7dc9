"""kxen as a client under the official MCP conformance harness.

The harness runs ``<command> <server url>`` with the scenario name in ``MCP_CONFORMANCE_SCENARIO``.
This client goes through kxen's real path: a throwaway KXEN_HOME whose user settings turn remote MCP
and loopback HTTP on, one server entry for the URL, the Runtime, policy and the http transport.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import anyio

from kxen_core import Runtime

import modern  # the 2026-07-28 scenarios' calls (beside this script, which runs as a script)

#: what each scenario asks the client to call, beyond initialize and listing
CALLS = {
    "tools_call": [("add_numbers", {"a": 5, "b": 3})],
    "sse-retry": [("test_reconnection", {})],
}


async def run(url: str, scenario: str) -> int:
    with tempfile.TemporaryDirectory(prefix="kxen-conformance-") as home:
        Path(home, "config.toml").write_text("[mcp]\nremote_enabled = true\nallow_loopback_http = true\n")
        entry = {"url": url, "transport": "http", "defaultToolPolicy": "allow", "timeouts": {"requestSeconds": 20}}
        Path(home, "mcp.json").write_text(json.dumps({"mcpServers": {"peer": entry}}))
        async with Runtime(home=home, workspace=home) as rt:
            await rt.wait_ready(25)
            st = rt.servers["peer"]
            print(f"kxen: server state {st.state} {st.phase or ''} {st.error or ''}", file=sys.stderr)
            if st.state != "ready":
                # the initialize scenario's mock only speaks initialize; listing may fail after it
                return 0 if scenario == "initialize" and st.phase == "catalog" else 1
            calls = CALLS.get(scenario, []) + modern.calls_for(rt, "peer", scenario, os.environ.get("MCP_CONFORMANCE_CONTEXT"))
            for tool, args in calls:
                result = await rt.call_tool(tool, args, server="peer")
                print(f"kxen: {tool} -> {json.dumps(result)[:500]}", file=sys.stderr)
                if result.get("isError"):
                    return 1
            failed = await modern.extras(rt, "peer", scenario)
            for line in failed:
                print(f"kxen: {line}", file=sys.stderr)
            if failed:
                return 1
    return 0


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: client.py [...] SERVER_URL (scenario in MCP_CONFORMANCE_SCENARIO)", file=sys.stderr)
        return 2
    return anyio.run(run, sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", ""))


if __name__ == "__main__":
    sys.exit(main())

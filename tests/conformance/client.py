"""kxen as a client under the official MCP conformance harness.

The harness runs ``<command> <server url>`` with the scenario name in ``MCP_CONFORMANCE_SCENARIO``,
the spec revision it tests in ``MCP_CONFORMANCE_PROTOCOL_VERSION`` (0.2.x) and, for scenarios that
hand the client credentials, ``MCP_CONFORMANCE_CONTEXT`` (JSON). This client goes through kxen's
real path, the way a person would set it up:

* a throwaway ``KXEN_HOME`` whose user settings turn remote MCP and loopback HTTP on, and one user
  server entry for the URL, confirmed as ``kxen remote on --yes`` records it; credentials from the
  context go into that entry's ``oauth`` block (a private key into a 0600 file in the home), as a
  user would write them;
* a throwaway ``KXEN_DATA_DIR`` for the OAuth token store;
* the Runtime with the installed plugins (http transport, kxen-oauth) plus :mod:`headless`: an
  authorize-URL taker that follows the sign-in redirects without a browser, and an elicitation
  handler that accepts with the requested schema's defaults
  (:func:`kxen_core.asks.apply_schema_defaults`);
* then what the scenario asks for (:data:`scenarios.ACTIONS`), through ``Runtime.call_tool``.

Exit 0 when every step worked; 1 (with the reason on stderr) otherwise.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from headless import Headless  # noqa: E402
from scenarios import oauth_block, run_scenario  # noqa: E402

from kxen_core import Runtime  # noqa: E402
from kxen_core.config import ServerConfig  # noqa: E402
from kxen_core.config.trust import acknowledge_remote  # noqa: E402
from kxen_core.plugins.manager import make_plugin_manager  # noqa: E402
from kxen_core.protocol.era_requests import MODERN_VERSIONS  # noqa: E402
from kxen_core.protocol.session import SUPPORTED_PROTOCOL_VERSIONS  # noqa: E402
from kxen_core.runtime.remote_ack import acknowledgement_key  # noqa: E402
from kxen_core.safe_text import safe_text  # noqa: E402

SERVER = "peer"
#: the client's own bound, under the harness's --timeout: ``KXEN_CONFORMANCE_SECONDS`` (the tests
#: set it from the timeout they pass), else 50 s for the harness's usual 60 s
CLIENT_SECONDS = float(os.environ.get("KXEN_CONFORMANCE_SECONDS") or 50.0)
#: settling (sign-in included) may take most of it; the calls need the rest
READY_SECONDS = CLIENT_SECONDS * 0.8


def say(text: str) -> None:
    """One line on stderr (the harness keeps it); server text in it is escaped."""
    print(f"kxen-conformance: {safe_text(text)}", file=sys.stderr, flush=True)


def write_home(home: Path, url: str, scenario: str, context: dict[str, Any]) -> None:
    """The user config a person would write for this server and these credentials, and the
    confirmation of the server that turns remote MCP on (what ``kxen remote on --yes`` writes)."""
    (home / "config.toml").write_text("[mcp]\nallow_loopback_http = true\n")
    entry: dict[str, Any] = {
        "url": url,
        "transport": "http",
        "defaultToolPolicy": "allow",
        # the in-band sign-in happens inside the first request (initialize): give it the time a
        # user would on a slow machine (a suite runs every client at once)
        "timeouts": {"requestSeconds": round(CLIENT_SECONDS * 0.5), "initializeSeconds": round(CLIENT_SECONDS * 0.7)},
    }
    oauth = oauth_block(scenario, context, home)
    if oauth:
        entry["oauth"] = oauth
    (home / "mcp.json").write_text(json.dumps({"mcpServers": {SERVER: entry}}))
    os.chmod(home / "mcp.json", 0o600)  # it may hold a client secret, as a user's would
    key = acknowledgement_key(ServerConfig(name=SERVER, url=url, transport="http"))
    acknowledge_remote(home, [key], enable=True)


async def run(url: str, scenario: str, context: dict[str, Any], version: str) -> int:
    spoken = (*MODERN_VERSIONS, *SUPPORTED_PROTOCOL_VERSIONS)
    if version and version not in spoken:
        say(f"the harness tests protocol {version}; kxen speaks {', '.join(spoken)}")
    with tempfile.TemporaryDirectory(prefix="kxen-conformance-") as tmp:
        home, data = Path(tmp, "home"), Path(tmp, "data")
        home.mkdir(mode=0o700)
        data.mkdir(mode=0o700)
        os.environ["KXEN_DATA_DIR"] = str(data)
        write_home(home, url, scenario, context)
        pm = make_plugin_manager()
        headless = Headless(say)
        pm.register(headless, name="conformance-headless")
        with anyio.move_on_after(CLIENT_SECONDS) as deadline:
            async with Runtime(home=home, workspace=home, pm=pm) as rt:
                await rt.wait_ready(READY_SECONDS)
                return await run_scenario(rt, SERVER, scenario, say)
        if deadline.cancelled_caught:
            say(f"gave up after {CLIENT_SECONDS:.0f} s")
    return 1


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: client.py [...] SERVER_URL (scenario in MCP_CONFORMANCE_SCENARIO)", file=sys.stderr)
        return 2
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT", "")
    try:
        context = json.loads(raw) if raw else {}
    except ValueError:
        say("MCP_CONFORMANCE_CONTEXT is not JSON; ignored")
        context = {}
    if not isinstance(context, dict):
        context = {}
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "")
    return anyio.run(run, sys.argv[-1], scenario, context, version)


if __name__ == "__main__":
    sys.exit(main())

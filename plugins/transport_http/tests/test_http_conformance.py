"""The MCP conformance harness judges kxen's Streamable HTTP client (initialize, tools_call, sse-retry)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

#: on one pytest-xdist worker with tests/test_conformance.py (XDIST_GROUPS in the root conftest.py):
#: sse-retry is judged in milliseconds, so it never runs while a suite run there has every core busy
pytestmark = pytest.mark.peer

CLIENT = Path(__file__).parent / "conformance_client.py"


@pytest.mark.parametrize("scenario", ["initialize", "tools_call", "sse-retry"])
def test_conformance_scenario(node22: str, npm_peers: Path, tmp_path: Path, scenario: str) -> None:
    harness = npm_peers / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    if not harness.exists():
        pytest.skip(f"{harness} is missing")
    command = f"{sys.executable} {CLIENT}"
    if " " in sys.executable or " " in str(CLIENT):
        pytest.skip("the harness splits --command on spaces")
    proc = subprocess.run(
        [node22, str(harness), "client", "--command", command, "--scenario", scenario, "--timeout", "30000"],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=tmp_path,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert "OVERALL: PASSED" in output and ", 0 failed, 0 warnings" in output, output[-4000:]

"""kxen under the official MCP conformance harness (@modelcontextprotocol/conformance, Node 22).

The harness starts each scenario's mock server (it listens on every interface), runs
tests/conformance/client.py with the server URL, and judges what kxen sent. Where this machine
allows it, harness and client run in a private network namespace whose only interface is loopback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.peer

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "tests" / "conformance" / "client.py"
HARNESS_TIMEOUT = 180


def _isolated(cmd: list[str]) -> list[str]:
    """Wrap ``cmd`` in a loopback-only network namespace when we may create one."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return cmd
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10)
    if probe.returncode != 0:
        return cmd
    return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *cmd]


@pytest.mark.parametrize("scenario", ["initialize", "tools_call", "sse-retry"])
def test_conformance_scenario(scenario: str, node22: str, npm_peers: Path, tmp_path: Path) -> None:
    harness = npm_peers / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    assert " " not in str(CLIENT) and " " not in sys.executable, "the harness splits --command on spaces"
    cmd = [
        node22,
        str(harness),
        "client",
        "--command",
        f"{sys.executable} {CLIENT}",
        "--scenario",
        scenario,
        "--timeout",
        "60000",
        "-o",
        str(tmp_path / "results"),
    ]
    env = {**os.environ, "PATH": f"{Path(node22).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(_isolated(cmd), capture_output=True, text=True, timeout=HARNESS_TIMEOUT, env=env, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "OVERALL: PASSED" in out, out[-6000:]
    assert "0 failed, 0 warnings" in out, out[-6000:]

"""kxen under the official conformance harness's 2026-07-28 leg (the stateless era), one scenario at a
time: harness 0.2.0-alpha.12 (npm alias ``conformance-next`` in tests/peers) with
``--spec-version 2026-07-28``. These are the scenarios that need no OAuth; the auth scenarios run
with the OAuth plugin. ``KXEN_CONFORMANCE_HARNESS`` may name the harness's ``dist/index.js``
installed elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_conformance import CLIENT, HARNESS_TIMEOUT, _isolated

pytestmark = pytest.mark.peer

SPEC = "2026-07-28"
SCENARIOS = [
    "tools_call",
    "request-metadata",
    "sep-2322-client-request-state",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "json-schema-ref-no-deref",
    "json-schema-2020-12-preservation",
]


@pytest.fixture
def harness_next(npm_peers: Path) -> Path:
    given = os.environ.get("KXEN_CONFORMANCE_HARNESS")
    harness = Path(given) if given else npm_peers / "conformance-next" / "dist" / "index.js"
    if not harness.exists():
        reason = f"{harness} is missing (npm alias conformance-next in tests/peers)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return harness


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_stateless_era_scenario(scenario: str, node22: str, harness_next: Path, tmp_path: Path) -> None:
    assert " " not in str(CLIENT) and " " not in sys.executable, "the harness splits --command on spaces"
    cmd = [
        node22,
        str(harness_next),
        "client",
        "--command",
        f"{sys.executable} {CLIENT}",
        "--scenario",
        scenario,
        "--spec-version",
        SPEC,
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
    assert ", 0 failed, 0 warnings" in out, out[-6000:]
    passed = [line for line in out.splitlines() if line.startswith("Passed: ")]
    assert passed and not passed[-1].startswith("Passed: 0/"), out[-6000:]  # checks ran, not all skipped

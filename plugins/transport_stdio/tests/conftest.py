from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The stdio tests run on both anyio backends (overrides kxen_testing's asyncio-only fixture):
    the transport has one code path, and so must behave the same on each."""
    return request.param


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws.resolve()


@pytest.fixture(autouse=True)
def no_helper_survives():
    """After each test, no helper_server.py process started by this run may be left alive."""
    from stdio_support import owned_helpers

    yield
    deadline = time.monotonic() + 2.0
    while (left := owned_helpers()) and time.monotonic() < deadline:
        time.sleep(0.01)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"helper processes survived the test: {left}"

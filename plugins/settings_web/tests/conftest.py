"""The Settings page's browser tests: one headless Chromium (the system's, driven by Playwright)
for the whole session, a fresh browser context (its own cookies and storage) per test.

The tests here use the core tests' helpers (tests/support.py, tests/remote_support.py,
tests/oauth_support.py): that directory is put on ``sys.path``, as pytest does for the core tests.
Every async test and fixture of a module here runs on one asyncio loop (the module's
``anyio_backend``), the loop the browser was launched on; it closes with the module.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))

#: Debian's chromium package (CI's .ci/run installs it); Playwright's own browsers are never fetched
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: milliseconds for the browser to start
LAUNCH_MS = 30_000


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio, for each module: the browser fixture and the module's tests share one event loop.

    Module, not session: anyio keeps the loop of an async fixture running until its backend
    fixture ends, and a loop left running on a worker makes every later ``anyio.run`` there (the
    ``kxen`` command run in-process by the core's tests) fail with "Already running asyncio"."""
    return "asyncio"


@pytest.fixture(scope="module")
async def browser(anyio_backend: str) -> AsyncIterator[object]:
    """Headless Chromium for the module (the browser tests are one module, on one worker: the
    "harness" group in the root conftest.py); skips without /usr/bin/chromium (fails in CI)."""
    if not Path(CHROMIUM).exists():
        reason = f"{CHROMIUM} is missing (apt-get install chromium; .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    playwright_api = pytest.importorskip("playwright.async_api", reason="playwright (a dev dependency) is missing")
    async with playwright_api.async_playwright() as pw:
        chromium = await pw.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, timeout=LAUNCH_MS
        )
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace directory (canonical path)."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path.resolve()

"""Core test configuration. Async tests run on anyio's pytest plugin; the asyncio backend
(``anyio_backend``), ``kxen_home`` and ``fakes`` come from kxen_testing.pytest_plugin (root conftest)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace directory (canonical path); some test modules define their own."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path.resolve()

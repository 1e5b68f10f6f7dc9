"""Core test configuration: async tests run on anyio's pytest plugin with the asyncio backend."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace directory (canonical path); some test modules define their own."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path.resolve()

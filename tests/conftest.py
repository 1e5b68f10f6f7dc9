"""Core test configuration. Async tests run on anyio's pytest plugin; the asyncio backend
(``anyio_backend``), ``kxen_home`` and ``fakes`` come from kxen_testing.pytest_plugin (root conftest)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from remote_support import Peers


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace directory (canonical path); some test modules define their own."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path.resolve()


@pytest.fixture
def peers(sdk_peer: Callable[..., str], request: pytest.FixtureRequest) -> Peers:
    """Real peers for the remote tests: ``peers.sdk(mode)``, ``peers.everything(mode)`` -> (url, kind)."""
    return Peers(sdk_peer, request)

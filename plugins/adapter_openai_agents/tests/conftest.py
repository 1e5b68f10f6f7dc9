"""The OpenAI Agents SDK adapter's tests use the core tests' helpers (tests/support.py,
tests/adapter_support.py): that directory is put on ``sys.path``, as pytest does for the core tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path.resolve()


@pytest.fixture(autouse=True)
def _no_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's tracing exports to a remote service by default: off in every test (the tests pass
    ``RunConfig(tracing_disabled=True)`` too)."""
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")

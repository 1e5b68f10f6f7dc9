"""The LangChain adapter's tests use the core tests' helpers (tests/support.py,
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

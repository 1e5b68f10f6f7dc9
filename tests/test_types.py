"""The core and every plugin type-check: the names plugin authors and hosts use are typed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MYPY_SECONDS = 300


def test_core_and_plugins_type_check(tmp_path):
    if shutil.which("mypy") is None and not (Path(sys.executable).parent / "mypy").exists():
        pytest.skip("mypy is not installed (it is in the dev group)")
    sources = ["kxen_core", *sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("plugins/*/src"))]
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), *sources],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=MYPY_SECONDS,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout

"""The core and every plugin type-check: the names plugin authors and hosts use are typed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MYPY_SECONDS = 300


def test_core_and_plugins_type_check():
    if shutil.which("mypy") is None and not (Path(sys.executable).parent / "mypy").exists():
        pytest.skip("mypy is not installed (it is in the dev group)")
    sources = ["kxen_core", *sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("plugins/*/src"))]
    proc = subprocess.run(
        # mypy's own incremental cache in the checkout (.mypy_cache, ignored by git): a second run
        # checks only what changed, with the same verdict as a cold one
        [sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache"), *sources],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=MYPY_SECONDS,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout

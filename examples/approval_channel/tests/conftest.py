"""Run the example's tests from the kxen checkout without installing it: put src/ on sys.path.

(kxen's own fixtures, ``anyio_backend``, ``kxen_home`` and ``fakes``, come from the kxen-testing
pytest plugin that the root conftest.py enables.)
"""

from __future__ import annotations

import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

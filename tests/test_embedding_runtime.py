"""docs/embedding.md, "A Runtime in your host": its program runs as written, from the repository
root over the bundled demo server, and prints the text block that follows it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "embedding.md"
RUN_SECONDS = 60


def test_the_first_page_s_program_prints_what_it_says(tmp_path):
    text = DOC.read_text()
    start = text.index("## A Runtime in your host\n")
    section = text[start : text.index("\n## ", start + 1)]
    ((program, printed),) = re.findall(r"```python\n(.*?)```\n\n```text\n(.*?)```", section, flags=re.S)
    env = {**os.environ, "KXEN_DATA_DIR": str(tmp_path / "data"), "KXEN_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [sys.executable, "-c", program],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == printed

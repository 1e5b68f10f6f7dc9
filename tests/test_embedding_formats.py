"""docs/embedding.md, "Model-API formats": its program runs as written, from the repository root
over the bundled demo server, and prints the text block that follows it."""

from __future__ import annotations

import re

from support import ROOT, run_program

DOC = ROOT / "docs" / "embedding.md"


def test_the_model_api_formats_program_prints_what_it_says(tmp_path):
    text = DOC.read_text()
    start = text.index("## Model-API formats\n")
    section = text[start : text.index("\n## ", start + 1)]
    ((program, printed),) = re.findall(r"```python\n(.*?)```\n\n```text\n(.*?)```", section, flags=re.S)
    proc = run_program(["-c", program], {"KXEN_DATA_DIR": str(tmp_path / "data"), "KXEN_HOME": str(tmp_path / "home")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == printed

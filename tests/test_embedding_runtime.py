"""docs/embedding.md: the programs of "A Runtime in your host" and "Your own Settings screen" run
as written, from the repository root over the bundled demo server, and print the text block that
follows each."""

from __future__ import annotations

import re

import pytest
from support import ROOT, run_program

DOC = ROOT / "docs" / "embedding.md"


def _section(title: str) -> tuple[str, str]:
    text = DOC.read_text()
    start = text.index(f"## {title}\n")
    section = text[start : text.index("\n## ", start + 1)]
    ((program, printed),) = re.findall(r"```python\n(.*?)```\n\n```text\n(.*?)```", section, flags=re.S)
    return program, printed


@pytest.mark.parametrize(
    "title",
    [
        # the approval channel first, the host's config as mappings, tools() with policy, agent_call
        "A Runtime in your host",
        # an ask held for the host's screen and answered from the event stream while the agent's
        # call waits; "tool" lets the next call through unasked; a restart
        "Your own Settings screen",
    ],
)
def test_the_program_prints_what_the_section_says(tmp_path, title):
    program, printed = _section(title)
    proc = run_program(["-c", program], {"KXEN_DATA_DIR": str(tmp_path / "data"), "KXEN_HOME": str(tmp_path / "home")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == printed

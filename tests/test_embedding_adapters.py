"""docs/embedding.md, "Framework adapters": each python program of the section runs as written, from
the repository root over the bundled demo configuration, and prints the text block that follows it."""

from __future__ import annotations

import re

import pytest
from support import ROOT, run_program

DOC = ROOT / "docs" / "embedding.md"


def section() -> str:
    text = DOC.read_text()
    start = text.index("## Framework adapters\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def programs() -> list[tuple[str, str]]:
    """(program, what it prints) for every python block followed by a text block."""
    pairs = re.findall(r"```python\n(.*?)```\n\n```text\n(.*?)```", section(), flags=re.S)
    assert len(pairs) == 3, "one program per framework"
    return pairs


@pytest.mark.parametrize("index", range(3), ids=["pydantic-ai", "langchain", "openai-agents"])
def test_the_section_s_programs_print_what_it_says(index):
    program, printed = programs()[index]
    proc = run_program(["-c", program], {"OPENAI_AGENTS_DISABLE_TRACING": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == printed

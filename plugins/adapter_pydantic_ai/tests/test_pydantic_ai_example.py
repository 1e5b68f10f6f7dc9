"""examples/pydantic_ai_agent.py, run as a person would from the repository root, with the bundled
demo configuration: the scripted model's call reaches the real demo server through kxen."""

from __future__ import annotations

from support import ROOT, run_program

EXAMPLE = ROOT / "examples" / "pydantic_ai_agent.py"


def test_the_example_runs_the_agent_over_the_demo_server():
    proc = run_program([str(EXAMPLE), "--home", "demo/home"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "tools: demo__echo, demo__add, demo__slow",  # no demo__fail: the demo config denies it
        'call: demo__add {"a": 2, "b": 40}',
        'returned (success): {"sum": 42}',
        'answer: 2 + 40 gives {"sum": 42}',
    ]

"""docs/cli.md names the --json shape of every command that prints one: each key a command prints
(at the top level and in the rows of its lists) is written, quoted or as code, in that command's row."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from kxen_testing import mem, text_result

DOCS = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()

COMMANDS = [
    ("mcp status", ["mcp", "status", "--json", "--wait", "10"]),
    ("mcp tools", ["mcp", "tools", "--json", "--wait", "10"]),
    ("mcp approvals", ["mcp", "approvals", "--json"]),
    ("mcp plan", ["mcp", "plan", "--json"]),
    ("mcp pins", ["mcp", "pins", "--json"]),
    ("mcp doctor", ["mcp", "doctor", "m", "--json", "--wait", "10"]),
    ("mcp list", ["mcp", "list", "--json"]),
    ("mcp get", ["mcp", "get", "m", "--json"]),
    ("mcp call", ["mcp", "call", "m", "echo", "--json", "--wait", "10", "--approve", "0" * 12]),
    ("mcp tasks", ["mcp", "tasks", "--json", "--wait", "10"]),
    ("plugins", ["plugins", "--json"]),
    ("config check", ["config", "check", "--json"]),
]


def doc_row(command: str) -> str:
    rows = [line for line in DOCS.splitlines() if re.match(rf"\| `kxen {re.escape(command)}\b", line)]
    assert rows, f"docs/cli.md has no row for kxen {command}"
    return " ".join(rows)


def keys(data: object) -> set[str]:
    out: set[str] = set()
    if isinstance(data, dict):
        out |= set(data)
        for value in data.values():
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                for item in value:
                    out |= set(item)
    return out


@pytest.mark.parametrize("command, argv", COMMANDS, ids=[c for c, _ in COMMANDS])
def test_every_printed_key_is_documented(kx, kxen_home, fakes, command, argv):
    fakes.add("f", tools={"echo": lambda a: text_result("x")})
    kxen_home.write_servers({"m": mem("f")})
    code, out, err = kx(*argv)
    assert code in (0, 1), err
    row = doc_row(command) + (doc_row("mcp list") if command == "mcp get" else "")  # get: "the list keys plus ..."
    missing = sorted(k for k in keys(json.loads(out)) if f'"{k}"' not in row and f"`{k}`" not in row)
    assert not missing, f"kxen {command} --json prints keys docs/cli.md does not name: {missing}"

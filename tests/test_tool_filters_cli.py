"""``kxen mcp tools --all`` and the status sizes on the command line (issue 27, part 2), against
server-everything; and every key ``--all --json`` prints is named in docs/cli.md."""

from __future__ import annotations

import json
import shutil

import pytest
from kxen_testing import mem, text_result
from test_cli_docs_shapes import doc_row, keys

WAIT = 60


def test_tools_all_shows_the_hidden_tools_with_why(kx, kxen_home, monkeypatch, everything_js):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    monkeypatch.setenv("COLUMNS", "250")  # the tables unfolded
    entry = {"command": node, "args": [everything_js, "stdio"], "disabledTools": ["get-e*"]}
    entry["annotationFilter"] = {"readOnlyHint": True}
    kxen_home.write_servers({"ev": entry})

    code, out, err = kx("mcp", "tools", "--json", "--wait", str(WAIT))
    assert code == 0, err
    listed = {t["name"] for t in json.loads(out)["tools"] if t["server"] == "ev"}
    assert "echo" in listed and "get-env" not in listed and "toggle-simulated-logging" not in listed
    assert all("hidden" not in t for t in json.loads(out)["tools"])  # the model's listing as it is

    code, out, err = kx("mcp", "status", "--json", "--wait", str(WAIT))
    (row,) = json.loads(out)["servers"]
    hidden = row["toolsHidden"]
    assert hidden == row["tools"] - len(listed) > 1 and row["toolTokens"] == -(-row["toolChars"] // 4) > 0
    code, out, err = kx("mcp", "status", "--wait", str(WAIT))
    assert f"{row['tools']} ({hidden} hidden)" in out and "~tokens" in out and f"{row['toolTokens']:,}" in out, out

    code, out, err = kx("mcp", "tools", "--wait", str(WAIT))
    assert code == 0 and f"ev: {hidden} listed tools not shown to the model (filtered or denied)" in out, out
    assert "kxen mcp tools --all shows why" in out

    code, out, err = kx("mcp", "tools", "ev", "--all", "--json", "--wait", str(WAIT))
    assert code == 0, err
    every = {t["name"]: t for t in json.loads(out)["tools"]}
    assert (
        every["get-env"]["hidden"] is True
        and every["get-env"]["why"] == "filtered by disabledTools 'get-e*' (user config)"
    )
    assert every["gzip-file-as-resource"]["why"].startswith("filtered by annotationFilter.readOnlyHint (user config)")
    assert every["echo"]["hidden"] is False and every["echo"]["why"] is None
    assert {n for n, t in every.items() if not t["hidden"]} == listed and len(every) == row["tools"]

    code, out, err = kx("mcp", "tools", "ev", "--all", "--wait", str(WAIT))
    assert code == 0 and "not shown: why" in out and "filtered by disabledTools 'get-e*' (user config)" in out, out


def test_every_key_tools_all_prints_is_documented(kx, kxen_home, fakes):
    fakes.add("f", tools={"echo": lambda a: text_result("x"), "rm": lambda a: text_result("y")})
    kxen_home.write_servers({"m": mem("f", disabledTools=["rm"])})
    code, out, err = kx("mcp", "tools", "--all", "--json", "--wait", "10")
    assert code == 0, err
    data = json.loads(out)
    assert {t["name"]: t["hidden"] for t in data["tools"]} == {"echo": False, "rm": True}
    row = doc_row("mcp tools")
    missing = sorted(k for k in keys(data) if f'"{k}"' not in row and f"`{k}`" not in row)
    assert not missing, f"kxen mcp tools --all --json prints keys docs/cli.md does not name: {missing}"
    assert "--all" in row

"""``kxen mcp status`` alone tells a person what each server is doing and what to do next: a ready
server, a crashed one (with its stderr), an unapproved project server (the exact --approve), a
remote server while remote is off, one that fails initialize, one whose command is missing."""

from __future__ import annotations

import json
import sys

from support import demo_entry, write_project

from kxen_core.config.trust import trust

CRASH = {
    "command": sys.executable,
    "args": ["-c", "import sys; sys.stderr.write('boom: missing API key\\n'); sys.exit(3)"],
}
REFUSE = {
    "command": sys.executable,
    "args": [
        "-c",
        "import sys, json; line = sys.stdin.readline(); rid = json.loads(line)['id']; "
        "print(json.dumps({'jsonrpc': '2.0', 'id': rid, 'error': {'code': -32603, 'message': 'not today'}}), "
        "flush=True)",
    ],
}


def test_status_says_what_each_server_does_and_what_to_do(kx, kxen_home, ws, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio,http")
    kxen_home.write_servers(
        {
            "ok": demo_entry(),
            "crash": CRASH,
            "refuse": REFUSE,
            "web": {"url": "https://x.example/mcp"},
            "gone": {"command": "no-such-cmd-kxen"},
        }
    )
    write_project(ws, {"proj": demo_entry()})
    trust(kxen_home.path, ws)
    code, out, err = kx("mcp", "status", "--wait", "30")
    assert code == 1  # failed servers
    blocks = {}
    for line in out.splitlines():
        if line.endswith(":") and not line.startswith(" "):
            current = blocks.setdefault(line[:-1], [])
        elif line.startswith("  ") and blocks:
            current.append(line.strip())
    assert "ok" not in blocks  # ready: nothing to say
    assert any("exited with code 3" in line and "boom: missing API key" in line for line in blocks["crash"])
    assert any("not today" in line for line in blocks["refuse"])
    assert "next: kxen remote on" in blocks["web"]
    assert any(line.startswith("next: install the command") for line in blocks["gone"])
    assert any(line.startswith("next: kxen --approve ") for line in blocks["proj"])
    code, out, err = kx("mcp", "status", "--json", "--wait", "30")
    rows = {r["name"]: r for r in json.loads(out)["servers"]}
    assert rows["ok"]["state"] == "ready" and rows["ok"]["next"] is None
    assert (rows["refuse"]["state"], rows["refuse"]["phase"]) == ("failed", "initialize")
    assert (
        rows["proj"]["next"]
        == f"kxen --approve {rows['proj']['fingerprint']} mcp status  (see what it runs: kxen mcp approvals)"
    )


def test_a_not_ready_message_has_no_stray_none():
    from kxen_core.errors import ServerNotReady

    assert (
        str(ServerNotReady("p", "awaiting_approval", None, "not approved"))
        == "server 'p' is awaiting_approval (not approved)"
    )
    assert str(ServerNotReady("p", "failed", "initialize", "boom")) == "server 'p' is failed (initialize: boom)"
    assert str(ServerNotReady("p", "connecting")) == "server 'p' is connecting"


def test_a_description_cut_for_the_table_says_so():
    from kxen_core.cli.mcp import _first_line

    assert _first_line("a" * 150) == "a" * 99 + "…"
    assert _first_line("first line\nmore below") == "first line …"
    assert _first_line("short") == "short" and _first_line(None) == ""


def test_the_status_table_fits_80_columns(kx, kxen_home, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    monkeypatch.setenv("COLUMNS", "80")
    kxen_home.write_servers({"a-rather-long-server-name-for-x": CRASH, "ok": demo_entry()})
    code, out, err = kx("mcp", "status", "--wait", "30")
    table = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) <= 80


def test_status_says_how_a_remote_server_authenticates_without_values(kx, kxen_home, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio,http")
    kxen_home.write_servers(
        {
            "web": {"url": "https://x.example/mcp", "headers": {"Authorization": "Bearer sk-live-statusauth1"}},
            "bare": {"url": "https://y.example/mcp"},
            "ok": demo_entry(),
        }  # fmt: skip
    )
    code, out, err = kx("mcp", "status", "--json", "--wait", "10")
    rows = {r["name"]: r for r in json.loads(out)["servers"]}
    assert (rows["web"]["auth"], rows["bare"]["auth"], rows["ok"]["auth"]) == ("headers: Authorization", "none", None)
    assert "sk-live" not in out

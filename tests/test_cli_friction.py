"""What a new user meets in ``kxen``'s output: tables that keep a URI whole in a pipe, ``mcp tools``
naming the servers it could not list, ``mcp status`` with nothing configured, ``--json`` problems
as objects, ``mcp read --output``, ``doctor``'s pid, and a multi-line reason shown as lines."""

from __future__ import annotations

import base64
import json
import shutil
import sys

import pytest
from kxen_testing import FakeServer, mem, text_result
from support import demo_entry, write_project

from kxen_core.config.trust import trust

WAIT = 60
BLOB = b"\x00\x01binary\xff" * 100
LONG_URL = "https://mcp.example.com/" + "/".join(f"segment{i}" for i in range(20)) + "/mcp?x=1"
TWO_LINES = {
    "command": sys.executable,
    "args": ["-c", "import sys; sys.stderr.write('boom: first line\\nsecond line \\x1b[2J\\n'); sys.exit(3)"],
}
MUTE = {"command": sys.executable, "args": ["-c", "import sys\nfor line in sys.stdin: pass"]}


def read(params):
    uri = params["uri"]
    if uri.endswith(".bin"):
        return {"contents": [{"uri": uri, "blob": base64.b64encode(BLOB).decode(), "mimeType": "image/png"}]}
    if uri.endswith("two"):
        return {"contents": [{"uri": uri, "text": "a"}, {"uri": uri, "text": "b"}]}
    return {"contents": [{"uri": uri, "text": "héllo"}]}


def fake() -> FakeServer:
    return FakeServer(
        tools={"echo": lambda a: text_result("x")},
        resources=[{"uri": "file:///x.bin", "name": "x"}],
        methods={"resources/read": read},
    )


# --- tables in a pipe ---------------------------------------------------------------------------------


def test_a_table_in_a_pipe_is_not_wrapped(kx, kxen_home, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "http")
    kxen_home.write_servers({"far": {"url": LONG_URL}})
    code, out, err = kx("mcp", "list")
    assert code == 0, err
    [row] = [line for line in out.splitlines() if "far" in line]
    assert LONG_URL.replace("x=1", "x=***") in row, "the URI stays on one line, whole"
    monkeypatch.setenv("COLUMNS", "80")  # asked for: the table fits it
    code, out, _ = kx("mcp", "list")
    assert max(len(line) for line in out.splitlines()) <= 80


# --- mcp tools: servers that are waiting ------------------------------------------------------------


def test_tools_names_the_servers_waiting_for_trust_approval_or_a_switch(kx, kxen_home, ws, fakes, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory,stdio")
    fakes.add("f", fake())
    kxen_home.write_servers({"ready": mem("f"), "off": {**mem("f"), "enabled": False}})
    write_project(ws, {"proj": demo_entry()})
    code, out, err = kx("mcp", "tools", "--json", "--wait", "10")
    assert code == 0, err
    data = json.loads(out)
    assert {t["server"] for t in data["tools"]} == {"ready", None}  # None: kxen's own resource tools
    waiting = {w["server"]: w for w in data["notListed"]}
    assert set(waiting) == {"off", "proj"}
    assert waiting["proj"]["state"] == "awaiting_trust" and waiting["proj"]["next"].startswith("kxen trust ")
    assert waiting["off"]["state"] == "disabled" and waiting["off"]["reason"]
    assert waiting["off"]["next"].startswith("kxen mcp enable off"), "the verb that does it"
    trust(kxen_home.path, ws)
    code, out, err = kx("mcp", "tools", "--wait", "10")
    assert code == 0, err
    assert "proj: no tools listed: awaiting_approval: " in out
    assert "  next: kxen --approve " in out
    code, out, _ = kx("mcp", "tools", "ready", "--json", "--wait", "10")
    assert json.loads(out)["notListed"] == [], "only the server asked about"


# --- mcp status with nothing configured -----------------------------------------------------------


def test_status_with_no_servers_says_how_to_add_one(kx):
    code, out, _ = kx("mcp", "status", "--wait", "5")
    assert code == 0
    assert "no servers configured: add one with kxen mcp add NAME -- COMMAND" in out
    assert "kxen mcp import FILE" in out


# --- --json problems ------------------------------------------------------------------------------


def test_json_problems_are_file_path_rule_objects_and_the_text_is_kept(kx, kxen_home, ws):
    servers = kxen_home.write_servers({"x": {"comand": "y"}})
    code, out, _ = kx("config", "check", "--json")
    assert code == 2
    [problem] = json.loads(out)["problems"]
    assert problem["file"] == str(servers) and problem["path"] == "mcpServers.x"
    assert problem["rule"].startswith("extra fields found (comand)") or "comand" in problem["rule"]
    code, _, err = kx("config", "check")
    assert code == 2 and f"{servers}: mcpServers.x: " in err, "people keep the one-line form"
    kxen_home.write_servers({})
    trust(kxen_home.path, ws)
    pfile = write_project(ws, {"p": {"url": "http://example.com/mcp"}})
    for argv in (["mcp", "list", "--json"], ["mcp", "plan", "--json"], ["config", "check", "--json"]):
        code, out, _ = kx(*argv)
        [problem] = json.loads(out)["problems"]
        assert problem == {"file": str(pfile), "path": "mcpServers.p.url",
                           "rule": "must be https:// (plain http:// only for loopback hosts)"}, argv  # fmt: skip


# --- mcp read --output ----------------------------------------------------------------------------


def test_read_output_saves_the_bytes(kx, kxen_home, fakes, tmp_path):
    fakes.add("f", fake())
    kxen_home.write_servers({"s": mem("f")})
    target = tmp_path / "out.png"
    code, out, err = kx("mcp", "read", "s", "file:///x.bin", "--output", str(target), "--wait", "10")
    assert code == 0, err
    assert target.read_bytes() == BLOB
    assert f"saved {len(BLOB)} bytes of file:///x.bin (image/png) to {target}" in out
    code, out, err = kx("mcp", "read", "s", "file:///t.txt", "--output", str(target), "--json", "--wait", "10")
    assert code == 0, err and json.loads(out)["bytes"] == len("héllo".encode())
    assert target.read_bytes() == "héllo".encode()
    code, _, err = kx("mcp", "read", "s", "file:///two", "--output", str(tmp_path / "n"), "--wait", "10")
    assert code == 1 and "has 2 contents" in err and not (tmp_path / "n").exists()


def test_read_output_goes_through_policy(kx, kxen_home, fakes, tmp_path):
    server = fakes.add("f", fake())
    kxen_home.write_servers({"s": mem("f", toolPolicies={"resources/read": "deny"})})
    target = tmp_path / "out.png"
    code, _, err = kx("mcp", "read", "s", "file:///x.bin", "--output", str(target), "--wait", "10")
    assert code == 1 and "denied by policy" in err and not target.exists()
    assert not [m for m in server.received if m.get("method") == "resources/read"]


def test_read_output_of_a_real_servers_blob(kx, kxen_home, monkeypatch, everything_js, tmp_path):
    """The twin against server-everything: its blob resource saved as the bytes it encodes."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    kxen_home.write_servers({"ev": {"command": node, "args": [everything_js, "stdio"]}})
    target = tmp_path / "blob.bin"
    uri = "demo://resource/dynamic/blob/3"
    code, out, err = kx("mcp", "read", "ev", uri, "--output", str(target), "--json", "--wait", str(WAIT))
    assert code == 0, out + err
    data = target.read_bytes()
    assert data.startswith(b"Resource 3: This is a base64 blob created at ")
    assert json.loads(out)["bytes"] == len(data)


# --- doctor and multi-line reasons ----------------------------------------------------------------


def test_doctor_names_the_pid_and_says_initialize_once(kx, kxen_home, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    kxen_home.write_servers({"crash": TWO_LINES, "slow": {**MUTE, "timeouts": {"startupSeconds": 1}}})
    code, out, _ = kx("mcp", "doctor", "crash", "--json")
    steps = {s["step"]: s for s in json.loads(out)["steps"]}
    assert code == 1 and steps["transport"]["ok"] and steps["transport"]["detail"].startswith("pid ")
    assert int(steps["transport"]["detail"].removeprefix("pid ")) > 0
    code, out, _ = kx("mcp", "doctor", "slow", "--wait", "30")
    assert code == 1 and "FAIL initialize: " in out
    assert "initialize: initialize:" not in out


def test_a_multi_line_reason_is_shown_as_indented_escaped_lines(kx, kxen_home, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    kxen_home.write_servers({"crash": TWO_LINES})
    code, out, _ = kx("mcp", "status", "--wait", "30")
    assert code == 1
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if "stderr: boom: first line" in line)
    assert lines[at].startswith("  server exited with code 3")
    assert lines[at + 1] == "    second line \\x1b[2J", "a further line is indented, its escapes still escaped"
    assert "\\x0a" not in out and "\x1b" not in out
    code, out, _ = kx("mcp", "doctor", "crash")
    assert "\n  second line \\x1b[2J" in out and "\\x0a" not in out

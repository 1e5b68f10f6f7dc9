"""The ``kxen`` command, run in-process: JSON shapes and exit codes (0 ok, 1 failed, 2 usage/config)."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest
from kxen_testing import FakeError, mem, text_result

import kxen_core.plugins.manager as plugins_mod

STATUS_KEYS = {"name", "scope", "transport", "state", "phase", "error", "tools", "resources", "prompts"}


def echo(args: dict[str, Any]) -> dict[str, Any]:
    return text_result(f"echo: {args.get('text', '')}")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


def as_json(out: str) -> Any:
    return json.loads(out)


def agent_text(view: dict[str, Any]) -> str:
    """The one text block of what the agent gets (``kxen mcp call --json``)."""
    (block,) = view["content"]
    assert block["type"] == "text"
    return block["text"]


# --- mcp status -------------------------------------------------------------------------------


def test_status_json(kx, kxen_home, fakes):
    fakes.add("f", tools={"echo": echo, "other": echo}, resources=[{"uri": "file:///r", "name": "r"}])
    kxen_home.write_servers({"demo": mem("f"), "off": mem("f", enabled=False)})
    code, out, _ = kx("mcp", "status", "--json", "--wait", "10")
    assert code == 0
    data = as_json(out)
    assert "servers" in data
    assert data.get("problems", []) == []  # nothing rejected
    by_name = {s["name"]: s for s in data["servers"]}
    assert set(by_name) == {"demo", "off"}
    for s in data["servers"]:
        assert STATUS_KEYS <= set(s)
    demo = by_name["demo"]
    assert (demo["state"], demo["tools"], demo["resources"], demo["prompts"]) == ("ready", 2, 1, 0)
    assert (demo["scope"], demo["transport"], demo["phase"], demo["error"]) == ("user", "memory", None, None)
    assert by_name["off"]["state"] == "disabled"


def test_status_with_a_failed_server_exits_1(kx, kxen_home, fakes):
    fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"ok": mem("f"), "bad": mem("not-registered")})
    code, out, _ = kx("mcp", "status", "--json", "--wait", "10")
    assert code == 1
    by_name = {s["name"]: s for s in as_json(out)["servers"]}
    assert by_name["ok"]["state"] == "ready"
    assert (by_name["bad"]["state"], by_name["bad"]["phase"]) == ("failed", "transport")


def test_status_text_output(kx, kxen_home, fakes):
    fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"demo": mem("f")})
    code, out, _ = kx("mcp", "status", "--wait", "10")
    assert code == 0
    assert "demo" in out and "ready" in out


def test_home_option_wins_over_environment(kx, kxen_home, fakes, monkeypatch, tmp_path):
    other = tmp_path / "other-home"
    other.mkdir()
    monkeypatch.setenv("KXEN_HOME", str(other))
    fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"demo": mem("f")})
    code, out, _ = kx("mcp", "status", "--json", "--wait", "10")
    assert code == 0
    assert [s["name"] for s in as_json(out)["servers"]] == ["demo"]


# --- mcp tools --------------------------------------------------------------------------------


def test_tools_json(kx, kxen_home, fakes):
    fakes.add("fa", tools={"echo": echo})
    fakes.add("fb", tools={"ping": echo})
    kxen_home.write_servers({"a": mem("fa"), "b": mem("fb")})
    code, out, _ = kx("mcp", "tools", "--json", "--wait", "10")
    assert code == 0
    data = as_json(out)
    assert set(data) == {"tools", "notListed"}
    assert {t["qualifiedName"] for t in data["tools"]} == {"a__echo", "b__ping"}
    for t in data["tools"]:
        assert set(t) == {"server", "name", "qualifiedName", "description", "inputSchema", "policy", "policyReasons"}
        assert t["policy"] == "ask" and t["policyReasons"] == ["kxen.config-policy: defaultToolPolicy"]
        assert t["qualifiedName"] == f"{t['server']}__{t['name']}"


def test_tools_of_one_server(kx, kxen_home, fakes):
    fa = fakes.add("fa", tools={"echo": echo})
    fb = fakes.add("fb", tools={"ping": echo})
    kxen_home.write_servers({"a": mem("fa"), "b": mem("fb")})
    code, out, _ = kx("mcp", "tools", "b", "--json", "--wait", "10")
    assert code == 0
    assert [t["qualifiedName"] for t in as_json(out)["tools"]] == ["b__ping"]
    assert fa.connections == 0 and fb.connections == 1  # only the named server is started


def test_tools_with_a_failed_server_exits_1(kx, kxen_home, fakes):
    fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"ok": mem("f"), "bad": mem("not-registered")})
    code, out, err = kx("mcp", "tools", "--json", "--wait", "10")
    assert code == 1
    assert [t["qualifiedName"] for t in as_json(out)["tools"]] == ["ok__echo"]
    assert "bad" in err


# --- mcp call ---------------------------------------------------------------------------------


def test_call_json(kx, kxen_home, fakes):
    fake = fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"demo": mem("f", toolPolicies={"echo": "allow"})})
    code, out, _ = kx("mcp", "call", "demo", "echo", "--args", '{"text": "hi"}', "--json", "--wait", "10")
    assert code == 0
    assert as_json(out) == {**text_result("echo: hi"), "isError": False}  # exactly what the agent gets
    calls = [m for m in fake.received if m.get("method") == "tools/call"]
    assert [c["params"] for c in calls] == [
        {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": "kxen-1"}}
    ]


def test_call_text_prints_the_result_text(kx, kxen_home, fakes):
    fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"demo": mem("f", defaultToolPolicy="allow")})
    code, out, _ = kx("mcp", "call", "demo", "echo", "--args", '{"text": "plain"}', "--wait", "10")
    assert code == 0
    assert out.strip() == "echo: plain"


@pytest.mark.parametrize("args", ["{not json", '{"a": ', "[1, 2]", '"text"', "3", "null"])
def test_call_with_bad_args_exits_2_before_starting_anything(kx, kxen_home, fakes, args):
    fake = fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"demo": mem("f", defaultToolPolicy="allow")})
    code, out, err = kx("mcp", "call", "demo", "echo", "--args", args, "--json")
    assert code == 2
    assert "--args" in err
    assert fake.connections == 0


def test_call_unknown_server_exits_2(kx, kxen_home, fakes):
    fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"demo": mem("f")})
    code, _, err = kx("mcp", "call", "nope", "echo", "--json", "--wait", "10")
    assert code == 2
    assert "nope" in err


def test_call_denied_by_policy_exits_1(kx, kxen_home, fakes):
    fake = fakes.add("f", tools={"rm": echo})
    kxen_home.write_servers({"demo": mem("f", toolPolicies={"rm": "deny"})})
    code, out, _ = kx("mcp", "call", "demo", "rm", "--json", "--wait", "10")
    assert code == 1
    data = as_json(out)
    assert set(data) == {"content", "isError"} and data["isError"] is True
    assert agent_text(data).startswith("PolicyDenied: ") and "demo__rm" in agent_text(data)
    assert not [m for m in fake.received if m.get("method") == "tools/call"]


def test_call_needing_approval_without_a_channel_exits_1(kx, kxen_home, fakes):
    fake = fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"demo": mem("f")})  # defaultToolPolicy "ask", no channel loaded
    code, out, _ = kx("mcp", "call", "demo", "echo", "--json", "--wait", "10")
    assert code == 1
    assert agent_text(as_json(out)).startswith("ApprovalDenied: ")
    assert not [m for m in fake.received if m.get("method") == "tools/call"]


def test_call_remote_error_exits_1(kx, kxen_home, fakes):
    def failing(args):
        raise FakeError(-32000, "tool exploded")

    fakes.add("f", tools={"bad": failing})
    kxen_home.write_servers({"demo": mem("f", defaultToolPolicy="allow")})
    code, out, _ = kx("mcp", "call", "demo", "bad", "--json", "--wait", "10")
    assert code == 1
    text = agent_text(as_json(out))
    assert text.startswith("RemoteError: ") and "tool exploded" in text


def test_call_tool_error_result_exits_1(kx, kxen_home, fakes):
    fakes.add("f", tools={"soft": lambda a: text_result("it failed", is_error=True)})
    kxen_home.write_servers({"demo": mem("f", defaultToolPolicy="allow")})
    code, out, _ = kx("mcp", "call", "demo", "soft", "--json", "--wait", "10")
    assert code == 1
    assert as_json(out)["isError"] is True


def test_call_on_a_failed_server_exits_1(kx, kxen_home, fakes):
    kxen_home.write_servers({"bad": mem("not-registered")})
    code, out, _ = kx("mcp", "call", "bad", "x", "--json", "--wait", "10")
    assert code == 1
    assert agent_text(as_json(out)).startswith("ServerNotReady: ")


def test_call_timeout_exits_1(kx, kxen_home, fakes):
    fakes.add("f", tools={"slow": echo}, hang={"tools/call"})
    kxen_home.write_servers({"demo": mem("f", defaultToolPolicy="allow")})
    code, out, _ = kx("mcp", "call", "demo", "slow", "--timeout", "0.2", "--json", "--wait", "10")
    assert code == 1
    assert agent_text(as_json(out)).startswith("RequestTimeout: ")


# --- broken config ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ("mcp", "status", "--json"),
        ("mcp", "tools", "--json"),
        ("mcp", "call", "a", "b", "--json"),
        ("config", "check", "--json"),
    ],
)
def test_broken_config_exits_2_with_every_problem(kx, kxen_home, argv):
    kxen_home.write_servers({"a": {"command": "x", "enabled": "false"}, "b b": {"command": "y"}})
    code, out, _ = kx(*argv)
    assert code == 2
    data = as_json(out)
    assert data["ok"] is False
    assert len(data["problems"]) == 2
    assert all(p["file"] == str(kxen_home.path / "mcp.json") for p in data["problems"])
    assert sorted(p["path"] for p in data["problems"]) == ["mcpServers.a.enabled", "mcpServers.b b"]


def test_broken_config_text_goes_to_stderr(kx, kxen_home):
    (kxen_home.path / "mcp.json").write_text("{")
    code, out, err = kx("mcp", "status")
    assert code == 2
    assert out == ""
    assert "not valid JSON" in err


# --- config check -----------------------------------------------------------------------------


def test_config_check_json_ok(kx, kxen_home, ws, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory,stdio,http")  # the kinds are checked against these
    kxen_home.write_servers({"a": {"command": "x"}, "b": {"url": "https://example.com/mcp"}})
    code, out, _ = kx("config", "check", "--json")
    assert code == 0
    data = as_json(out)
    assert data["ok"] is True and data["problems"] == []
    assert data["servers"] == ["a", "b"]
    assert str(kxen_home.path / "mcp.json") in data["files"]
    assert str(kxen_home.path / "config.toml") in data["files"]


def test_config_check_text_ok(kx, kxen_home, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory,stdio")
    kxen_home.write_servers({"a": {"command": "x"}})
    code, out, _ = kx("config", "check")
    assert code == 0
    assert out.startswith("OK: 1 server")


@pytest.mark.parametrize(
    "entry, where, rule",
    [
        (
            {"url": "https://example.com/mcp", "transport": "streamable-http"},
            "transport",
            "unknown transport kind 'streamable-http' (did you mean 'http'?",
        ),
        (
            {"url": "https://example.com/mcp", "transport": "htp"},
            "transport",
            "unknown transport kind 'htp' (did you mean 'http'?",
        ),
        (
            {"command": "x", "options": {"maxLineByte": 4096}},
            "options",
            "unknown key(s): maxLineByte (did you mean 'maxLineBytes'?)",
        ),
        (
            {"command": "x", "options": {"maxLineBytes": "64k"}},
            "options.maxLineBytes",
            "expected an integer, got str\n",
        ),  # never the value
        (
            {"url": "https://example.com/mcp", "options": {"queueSize": 0}},
            "options.queueSize",
            "queueSize must be an integer from 1 to 65536",
        ),
        (
            {"url": "https://example.com/mcp", "transport": "sse", "options": {"getStream": False}},
            "options",
            "unknown key(s): getStream",
        ),
        (
            {"transport": "memory", "options": {"servr": "f"}},
            "options",
            "unknown key(s): servr (did you mean 'server'?)",
        ),
    ],
)
def test_config_check_rejects_a_typo_in_a_kind_or_an_option(kx, kxen_home, monkeypatch, entry, where, rule):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory,stdio,http,sse")
    kxen_home.write_servers({"ok": {"command": "x"}, "typo": entry})
    code, out, err = kx("config", "check")
    assert code == 2 and out == ""
    assert f"{kxen_home.path / 'mcp.json'}: mcpServers.typo.{where}: {rule}" in err
    assert "mcpServers.ok" not in err


def test_config_check_starts_nothing(kx, kxen_home, fakes):
    fake = fakes.add("f", tools={"echo": echo})
    kxen_home.write_servers({"demo": mem("f")})
    code, _, _ = kx("config", "check", "--json")
    assert code == 0
    assert fake.connections == 0


# --- plugins ----------------------------------------------------------------------------------


def test_plugins_json(kx):
    code, out, _ = kx("plugins", "--json")
    assert code == 0
    data = as_json(out)
    assert set(data) == {"plugins", "failures", "skipped"}
    for p in data["plugins"]:
        assert set(p) == {"name", "dist", "version", "source", "hooks", "transports"}
        assert p["source"] in ("entry point", "default", "registered")
        assert all(h.startswith("kxen_") for h in p["hooks"])
    memory = [p for p in data["plugins"] if p["name"] == "memory"]
    assert memory and memory[0]["dist"] == "kxen-testing" and memory[0]["source"] == "entry point"
    assert memory[0]["hooks"] == ["kxen_register_transports"]
    assert memory[0]["transports"] == ["memory"]
    assert any(p["source"] == "default" for p in data["plugins"])
    assert data["failures"] == []
    # everything else installed was skipped by the allowlist, and says so
    for s in data["skipped"]:
        assert set(s) == {"dist", "entryPoint"} and s["entryPoint"] != "memory"


def test_plugins_with_a_load_failure_exits_1(kx, monkeypatch):
    class EP:
        name = "memory"
        group = "kxen"
        dist = types.SimpleNamespace(metadata={"Name": "kxen-broken"}, version="0.0.1")

        def load(self):
            raise ImportError("No module named 'gone'")

    monkeypatch.setattr(
        plugins_mod,
        "importlib_metadata",
        types.SimpleNamespace(
            distributions=lambda path: [types.SimpleNamespace(_normalized_name="kxen_broken", entry_points=[EP()])]
        ),
    )
    code, out, _ = kx("plugins", "--json")
    assert code == 1
    failures = as_json(out)["failures"]
    assert failures == [{"dist": "kxen-broken", "entryPoint": "memory", "error": "ImportError: No module named 'gone'"}]


def test_usage_errors_exit_2(kx):
    with pytest.raises(SystemExit) as info:
        kx("mcp", "frobnicate")
    assert info.value.code == 2

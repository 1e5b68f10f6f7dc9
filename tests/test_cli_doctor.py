"""``kxen mcp doctor SERVER``: each step of one server's start checked on its own, with its time and
its exact error; a process that never answers initialize is named as such."""

from __future__ import annotations

import json
import sys

from support import demo_entry, write_project

from kxen_core.config.trust import trust

MUTE = {"command": sys.executable, "args": ["-c", "import sys\nfor line in sys.stdin: pass"]}
CRASH = {
    "command": sys.executable,
    "args": ["-c", "import sys; sys.stderr.write('boom: missing API key'); sys.exit(3)"],
}


def steps_of(out: str) -> dict[str, dict]:
    data = json.loads(out)
    return {s["step"]: s for s in data["steps"]}


def test_a_healthy_server_and_a_call(kx, kxen_home, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    kxen_home.write_servers({"d": {**demo_entry(), "toolPolicies": {"add": "allow"}}})
    code, out, err = kx("mcp", "doctor", "d", "--call", "add", "--args", '{"a": 1, "b": 2}', "--json")
    assert code == 0, out + err
    steps = steps_of(out)
    assert list(steps) == ["gate", "transport", "auth", "initialize", "tools", "call"]
    assert all(s["ok"] for s in steps.values())
    assert all(isinstance(steps[k]["ms"], float) for k in ("transport", "initialize", "tools", "call"))
    assert steps["tools"]["detail"].startswith("4 tool(s)")


def test_each_failure_is_named_at_its_step(kx, kxen_home, ws, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio,http")
    kxen_home.write_servers(
        {"mute": MUTE, "crash": CRASH, "web": {"url": "https://x.example/mcp"}, "gone": {"command": "no-such-kxen-cmd"}}
    )
    write_project(ws, {"proj": demo_entry()})
    trust(kxen_home.path, ws)
    code, out, _ = kx("mcp", "doctor", "mute", "--wait", "1.5", "--json")
    steps = steps_of(out)
    assert code == 1 and steps["initialize"]["ok"] is False
    assert (
        "the process runs (pid " in steps["initialize"]["detail"]
        and "never answered initialize within 1.5 s" in steps["initialize"]["detail"]
    )
    code, out, _ = kx("mcp", "doctor", "crash", "--json")
    assert code == 1 and "exited with code 3" in steps_of(out)["initialize"]["detail"]
    code, out, _ = kx("mcp", "doctor", "gone", "--json")
    steps = steps_of(out)
    assert code == 1 and steps["transport"]["ok"] is False and "not found" in steps["transport"]["detail"]
    code, out, _ = kx("mcp", "doctor", "web", "--json")
    assert code == 1 and "next: kxen remote on" in steps_of(out)["gate"]["detail"]
    code, out, _ = kx("mcp", "doctor", "proj", "--json")
    assert code == 1 and "kxen --approve" in steps_of(out)["gate"]["detail"]
    code, out, _ = kx("mcp", "doctor", "mute", "--wait", "1")
    assert code == 1 and "FAIL initialize" in out and "ok   transport" in out


def test_the_budgets_in_force_are_printed(kx, kxen_home, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    budget = {"requestSeconds": 45, "maxTotalSeconds": 900, "toolSeconds": {"add": 120}}
    kxen_home.write_servers({"d": {**demo_entry(), "timeouts": budget}, "plain": demo_entry()})
    code, out, err = kx("mcp", "doctor", "d", "--json")
    assert code == 0, out + err
    assert json.loads(out)["timeouts"] == {
        "requestSeconds": 45,
        "initializeSeconds": 60,
        "startupSeconds": 120,
        "resetOnProgress": True,
        "maxTotalSeconds": 900,
        "toolSeconds": {"add": 120},
    }
    code, out, err = kx("mcp", "doctor", "d")
    assert code == 0, out + err
    assert (
        "timeouts: start 120 s to its first answer, then 60 s, each request 45 s "
        "(a tool call's restarted by its progress, at most 900 s in all); "
        "tools of their own: add 120 s"
    ) in out
    code, out, err = kx("mcp", "doctor", "plain")
    plain = (
        "timeouts: start 120 s to its first answer, then 60 s, each request 30 s "
        "(a tool call's restarted by its progress, at most 600 s in all)"
    )
    assert plain + "\n" in out

"""Approval of project stdio launches: what a channel is shown (never a secret), how channels are
asked (first answer wins, none or a broken one = no), and the CLI side (``kxen mcp approvals``,
``kxen --approve FINGERPRINT``)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from kxen_testing import Channel
from support import DEMO, Spy, demo_entry, settle, state, write_project

from kxen_core import hookimpl
from kxen_core.cli import command as cli
from kxen_core.config import load_config
from kxen_core.config.trust import trust
from kxen_core.launch.resolve import Launch, digest, resolve_launch, sensitive_key
from kxen_core.plugins.manager import make_plugin_manager
from kxen_core.policy import ApprovalDecision, fingerprint
from kxen_core.runtime.workspace import Runtime

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[1]

SECRETS = {"API_TOKEN": "tok-SECRET-0001", "DB_PASSWORD": "pw-SECRET-0002", "GITHUB_PAT": "ghp-SECRET-0003",
           "aws_secret_access_key": "aws-SECRET-0004", "SESSION_COOKIE": "ck-SECRET-0005"}  # fmt: skip
PLAIN = {"MODE": "fast", "LOG_LEVEL": "debug", "REGION": "eu-west-1"}


# --- helpers ----------------------------------------------------------------------------------


def channel_pm(*channels: Any, entrypoints: bool = True):
    """A plugin manager whose only approval channels are ``channels`` (the installed ones removed)."""
    pm = make_plugin_manager(load_entrypoints=entrypoints, extra=list(channels))
    for impl in list(pm.hook.kxen_approval_prompt.get_hookimpls()):
        if impl.plugin not in channels:
            pm.unregister(impl.plugin)
    return pm


def assert_no_secret(text: str) -> None:
    for value in SECRETS.values():
        assert value not in text


# --- what an approval request shows -----------------------------------------------------------


async def test_launch_request_shows_plain_env_and_only_digests_of_sensitive_keys(kxen_home, ws, tmp_path):
    plog = tmp_path / "p.log"
    write_project(ws, {"p": demo_entry(plog, env={**SECRETS, **PLAIN})})
    trust(kxen_home.path, ws)
    channel = Channel(approved=False)
    async with Runtime(workspace=ws, pm=channel_pm(channel)) as rt:
        await settle(rt)
        status = json.dumps(rt.status())
    [request] = channel.requests
    assert request.kind == "stdio_launch" and request.server == "p"
    assert str(ws / ".kxen" / "mcp.json") in request.summary
    env = request.details["env"]
    assert set(env) == set(SECRETS) | set(PLAIN)
    for key, value in PLAIN.items():
        assert env[key] == value
    for key, value in SECRETS.items():
        assert env[key] == "sha256:" + hashlib.sha256(value.encode()).hexdigest()
    assert request.details["command"] == sys.executable
    assert request.details["args"] == [str(DEMO), "--log", str(plog)]
    assert request.details["cwd"] == str(ws)
    for text in (repr(request), str(request), json.dumps(request.details), request.summary, status):
        assert_no_secret(text)
    assert not plog.exists()


@pytest.mark.parametrize(
    "key", ["API_TOKEN", "api_token", "GITHUB_PAT", "OPENAI_API_KEY", "DB_PASSWORD", "CLIENT_SECRET",
            "AWS_SECRET_ACCESS_KEY", "SESSION_ID", "AUTH_HEADER", "PRIVATE_KEY_PEM", "COOKIE_JAR", "CREDENTIALS"],
)  # fmt: skip
def test_sensitive_keys_are_shown_as_digests(key):
    launch = Launch(command="/bin/true", args=(), cwd="/", env={key: "hunter2-value", "MODE": "x"})
    shown = launch.display()["env"]
    assert sensitive_key(key)
    assert shown[key] == digest("hunter2-value") and shown[key].startswith("sha256:")
    assert shown["MODE"] == "x"
    assert "hunter2-value" not in json.dumps(launch.display()) + repr(launch)


def test_fingerprint_is_canonical_and_covers_env_values():
    a = Launch(command="/bin/x", args=("1",), cwd="/w", env={"A": "1", "B": "2"})
    b = Launch(command="/bin/x", args=("1",), cwd="/w", env={"B": "2", "A": "1"})
    assert a.fingerprint == b.fingerprint  # key order does not matter
    assert len(a.fingerprint) == 64 and int(a.fingerprint, 16) >= 0
    c = Launch(command="/bin/x", args=("1",), cwd="/w", env={"A": "1", "B": "3"})
    assert c.fingerprint != a.fingerprint
    # a secret's digest is shown, but the fingerprint covers the value itself
    s1 = Launch(command="/bin/x", args=(), cwd="/w", env={"API_TOKEN": "one"})
    s2 = Launch(command="/bin/x", args=(), cwd="/w", env={"API_TOKEN": "two"})
    assert s1.fingerprint != s2.fingerprint
    # args are ordered and not joined: ["a b"] is not ["a", "b"]
    assert (
        Launch(command="/x", args=("a b",), cwd="/", env={}).fingerprint
        != Launch(command="/x", args=("a", "b"), cwd="/", env={}).fingerprint
    )
    assert fingerprint({"x": 1, "y": [1, 2]}) == fingerprint({"y": [1, 2], "x": 1})


async def test_launch_runs_exactly_the_approved_interpreter_path(kxen_home, ws, tmp_path):
    """A venv's bin/python is a symlink; the approved (and started) command keeps that path, so the
    server runs inside the venv and not with the base interpreter behind the link."""
    out = tmp_path / "prefix.txt"
    (ws / "wrap.py").write_text(
        "import runpy, sys\n"
        f"open({str(out)!r}, 'w').write(sys.prefix)\n"
        f"sys.argv = [{str(DEMO)!r}]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )
    write_project(ws, {"p": {"command": sys.executable, "args": ["wrap.py"]}})
    trust(kxen_home.path, ws)
    launch = resolve_launch(load_config(None, ws).servers["p"], ws)
    assert launch.command == os.path.abspath(sys.executable)
    async with Runtime(workspace=ws, pm=channel_pm(), approve=[launch.fingerprint]) as rt:
        await settle(rt)
        assert state(rt, "p")["state"] == "ready"
    assert out.read_text() == sys.prefix


async def test_a_relative_command_is_shown_and_started_as_an_absolute_path(kxen_home, ws, tmp_path):
    plog = tmp_path / "p.log"
    script = ws / "bin" / "serve"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {DEMO} --log {plog}\n")
    script.chmod(0o755)
    write_project(ws, {"p": {"command": "./bin/serve"}})
    trust(kxen_home.path, ws)
    channel = Channel(approved=True)
    async with Runtime(workspace=ws, pm=channel_pm(channel)) as rt:
        await settle(rt)
        assert state(rt, "p")["state"] == "ready"
    assert channel.requests[0].details["command"] == str(script)
    assert plog.exists()


async def test_a_missing_command_fails_without_asking(kxen_home, ws):
    write_project(ws, {"p": {"command": "kxen-no-such-command-xyz"}})
    trust(kxen_home.path, ws)
    channel = Channel(approved=True)
    async with Runtime(workspace=ws, pm=channel_pm(channel)) as rt:
        await settle(rt)
        p = state(rt, "p")
        assert (p["state"], p["phase"]) == ("failed", "transport")
        assert "command not found" in p["error"]
    assert channel.requests == []


def test_credentials_inside_url_values_are_not_shown():
    launch = Launch(command="/bin/x", args=(), cwd="/", env={"DATABASE_URL": "postgres://app:pw-SECRET-9@db/app"})
    assert "pw-SECRET-9" not in json.dumps(launch.display())


# --- how channels are asked -------------------------------------------------------------------


async def test_first_channel_that_answers_decides(kxen_home, ws, tmp_path):
    plog = tmp_path / "p.log"
    write_project(ws, {"p": demo_entry(plog)})
    trust(kxen_home.path, ws)
    passing, approving, never = Channel(None, "a-pass"), Channel(True, "b-yes"), Channel(False, "c-no")
    # pluggy asks the last registered first
    async with Runtime(workspace=ws, pm=channel_pm(never, approving, passing)) as rt:
        await settle(rt)
        assert state(rt, "p")["state"] == "ready"
        assert rt.approved  # remembered for this process
    assert len(passing.requests) == len(approving.requests) == 1
    assert never.requests == []
    assert plog.exists()


class Raising:
    __name__ = "broken-channel"

    @hookimpl
    def kxen_approval_prompt(self, request):
        raise RuntimeError("the dialog crashed")


class Garbage:
    __name__ = "garbage-channel"

    @hookimpl
    def kxen_approval_prompt(self, request):
        return True  # not an ApprovalDecision


@pytest.mark.parametrize("channel", [Raising(), Garbage()], ids=["raises", "returns-garbage"])
async def test_a_broken_channel_is_a_no(kxen_home, ws, tmp_path, channel):
    plog = tmp_path / "p.log"
    write_project(ws, {"p": demo_entry(plog)})
    trust(kxen_home.path, ws)
    async with Runtime(workspace=ws, pm=channel_pm(channel)) as rt:
        await settle(rt)
        p = state(rt, "p")
        assert p["state"] == "awaiting_approval"
        assert not rt.approved
        if isinstance(channel, Raising):
            assert "broken-channel" in p["error"] and "the dialog crashed" in p["error"]
        else:  # a bare True is a no that says why, not "no channel"
            assert "the approval channel answered a bool, not an ApprovalDecision" in p["error"], p["error"]
    assert not plog.exists()


async def test_prompts_are_asked_one_at_a_time(kxen_home, ws, tmp_path):
    write_project(ws, {f"p{i}": demo_entry(tmp_path / f"p{i}.log", env={"N": str(i)}) for i in range(3)})
    trust(kxen_home.path, ws)

    class Slow:
        __name__ = "slow-channel"
        active = peak = 0

        @hookimpl
        async def kxen_approval_prompt(self, request):
            Slow.active += 1
            Slow.peak = max(Slow.peak, Slow.active)
            await anyio.sleep(0.05)
            Slow.active -= 1
            return ApprovalDecision(approved=True, channel="slow")

    async with Runtime(workspace=ws, pm=channel_pm(Slow())) as rt:
        await settle(rt)
        assert {s["state"] for s in rt.status()} == {"ready"}
    assert Slow.peak == 1


async def test_the_same_fingerprint_is_asked_once_even_when_requested_together(kxen_home, ws, tmp_path):
    # two project entries with the identical launch have one fingerprint
    write_project(ws, {"a": demo_entry(), "b": demo_entry()})
    trust(kxen_home.path, ws)

    class Slow(Channel):
        @hookimpl
        async def kxen_approval_prompt(self, request):
            self.requests.append(request)
            await anyio.sleep(0.1)
            return ApprovalDecision(approved=True, channel="slow")

    channel = Slow(approved=True)
    async with Runtime(workspace=ws, pm=channel_pm(channel)) as rt:
        await settle(rt)
        assert {s["state"] for s in rt.status()} == {"ready"}
    assert len(channel.requests) == 1


async def test_a_channel_can_approve_one_server_and_decline_another(kxen_home, ws, tmp_path):
    write_project(ws, {"yes": demo_entry(tmp_path / "yes.log"), "no": demo_entry(tmp_path / "no.log")})
    trust(kxen_home.path, ws)

    class Picky:
        __name__ = "picky"

        @hookimpl
        def kxen_approval_prompt(self, request):
            return ApprovalDecision(approved=request.server == "yes", reason="not that one", channel="picky")

    async with Runtime(workspace=ws, pm=channel_pm(Picky())) as rt:
        await settle(rt)
        assert state(rt, "yes")["state"] == "ready"
        no = state(rt, "no")
        assert no["state"] == "awaiting_approval" and "not that one" in no["error"]
    assert (tmp_path / "yes.log").exists() and not (tmp_path / "no.log").exists()


# --- fallback and the other gates -------------------------------------------------------------


async def test_fallback_from_an_unapproved_project_entry_respects_the_remote_switch(kxen_home, ws):
    kxen_home.write_servers({"s": {"url": "https://example.com/mcp"}})  # remote_enabled is off (default)
    write_project(ws, {"s": demo_entry()})
    trust(kxen_home.path, ws)
    spy = Spy()
    async with Runtime(workspace=ws, pm=channel_pm(spy, entrypoints=False)) as rt:
        await settle(rt)
        assert state(rt, "s")["state"] != "ready"
    assert [(s.scope, s.kind) for s in spy.opened] == []


async def test_project_entries_of_plugin_transport_kinds_need_approval_too(kxen_home, ws):
    write_project(ws, {"box": {"transport": "container", "options": {"image": "repo/tools:latest"}}})
    trust(kxen_home.path, ws)
    spy, channel = Spy(), Channel(approved=None)
    async with Runtime(workspace=ws, pm=channel_pm(spy, channel, entrypoints=False)) as rt:
        await settle(rt)
    assert spy.opened == [] or [r.server for r in channel.requests] == ["box"]


async def test_fallback_skips_a_disabled_user_entry(kxen_home, ws, tmp_path):
    ulog = tmp_path / "u.log"
    kxen_home.write_servers({"s": demo_entry(ulog, enabled=False)})
    write_project(ws, {"s": demo_entry(tmp_path / "p.log")})
    trust(kxen_home.path, ws)
    async with Runtime(workspace=ws, pm=channel_pm()) as rt:
        await settle(rt)
        assert state(rt, "s")["state"] == "awaiting_approval"
    assert not ulog.exists()


async def test_user_stdio_servers_need_no_approval(kxen_home, ws, tmp_path):
    ulog = tmp_path / "u.log"
    kxen_home.write_servers({"u": demo_entry(ulog, env=dict(SECRETS))})
    channel = Channel(approved=False)
    async with Runtime(workspace=ws, pm=channel_pm(channel)) as rt:
        await settle(rt)
        assert state(rt, "u")["state"] == "ready"
    assert channel.requests == []
    assert ulog.exists()


# --- kxen mcp approvals / kxen --approve --------------------------------------------------------


def test_mcp_approvals_json_lists_fingerprints_and_redacted_env(kxen_home, ws, capsys):
    trust(kxen_home.path, ws)  # an untrusted workspace's file gives only names (tests/test_untrusted_project.py)
    write_project(ws, {"p": demo_entry(env={**SECRETS, **PLAIN}), "q": demo_entry(args=["x"])})
    kxen_home.write_servers({"u": demo_entry()})
    assert cli.main(["--workspace", str(ws), "mcp", "approvals", "--json"]) == 0
    out = capsys.readouterr().out
    assert_no_secret(out)
    rows = {r["server"]: r for r in json.loads(out)["approvals"]}
    assert set(rows) == {"p", "q"}  # user servers need no approval
    config = load_config(None, ws)
    for name, row in rows.items():
        launch = resolve_launch(config.servers[name], ws)
        assert row["fingerprint"] == launch.fingerprint
        assert row["kind"] == "stdio_launch"
        assert row["trusted"] is True and row["approved"] is False
        assert row["launch"] == launch.display()
    env = rows["p"]["launch"]["env"]
    assert all(env[k] == v for k, v in PLAIN.items())
    assert all(env[k] == digest(v) for k, v in SECRETS.items())

    # text output: no secret either
    assert cli.main(["--workspace", str(ws), "mcp", "approvals"]) == 0
    text = capsys.readouterr().out
    assert_no_secret(text)
    assert rows["p"]["fingerprint"] in text and "needs approval" in text

    fp = rows["p"]["fingerprint"]
    assert cli.main(["--workspace", str(ws), "--approve", fp, "mcp", "approvals", "--json"]) == 0
    rows = {r["server"]: r for r in json.loads(capsys.readouterr().out)["approvals"]}
    assert rows["p"]["approved"] is True and rows["p"]["trusted"] is True
    assert rows["q"]["approved"] is False


def test_mcp_approvals_starts_nothing(kxen_home, ws, tmp_path, capsys):
    plog = tmp_path / "p.log"
    write_project(ws, {"p": demo_entry(plog)})
    trust(kxen_home.path, ws)
    fp = resolve_launch(load_config(None, ws).servers["p"], ws).fingerprint
    assert cli.main(["--workspace", str(ws), "--approve", fp, "mcp", "approvals", "--json"]) == 0
    capsys.readouterr()
    assert not plog.exists()


def test_mcp_approvals_with_nothing_to_approve(kxen_home, ws, capsys):
    assert cli.main(["--workspace", str(ws), "mcp", "approvals", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"approvals": [], "problems": []}
    assert cli.main(["--workspace", str(ws), "mcp", "approvals"]) == 0
    assert "no project servers" in capsys.readouterr().out


def _kxen(*args: str, home: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KXEN_")}
    env["KXEN_HOME"] = str(home)
    env["KXEN_DISABLE_PLUGINS"] = "tty"  # never prompt on a terminal that runs the tests
    return subprocess.run(
        [sys.executable, "-m", "kxen_core.cli.command", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def test_cli_approve_starts_exactly_the_approved_server(kxen_home, ws, tmp_path):
    logs = {name: tmp_path / f"{name}.log" for name in ("p", "q")}
    write_project(ws, {name: demo_entry(log) for name, log in logs.items()})
    trust(kxen_home.path, ws)
    listed = _kxen("--workspace", str(ws), "mcp", "approvals", "--json", home=kxen_home.path)
    assert listed.returncode == 0, listed.stderr
    fps = {r["server"]: r["fingerprint"] for r in json.loads(listed.stdout)["approvals"]}

    proc = _kxen("--workspace", str(ws), "--approve", fps["p"], "mcp", "status", "--json", "--wait", "30",
                 home=kxen_home.path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    servers = {s["name"]: s for s in json.loads(proc.stdout)["servers"]}
    assert servers["p"]["state"] == "ready" and servers["p"]["scope"] == "project"
    assert servers["q"]["state"] == "awaiting_approval"
    assert servers["q"]["fingerprint"] == fps["q"]
    assert logs["p"].exists() and not logs["q"].exists()

    both = _kxen("--workspace", str(ws), "--approve", fps["p"], "--approve", fps["q"], "mcp", "status", "--json",
                 home=kxen_home.path)  # fmt: skip
    assert both.returncode == 0, both.stderr
    assert {s["state"] for s in json.loads(both.stdout)["servers"]} == {"ready"}
    assert logs["q"].exists()


def test_cli_without_approval_shows_how_to_approve(kxen_home, ws, tmp_path):
    plog = tmp_path / "p.log"
    write_project(ws, {"p": demo_entry(plog, env=dict(SECRETS))})
    trust(kxen_home.path, ws)
    proc = _kxen("--workspace", str(ws), "mcp", "status", home=kxen_home.path)
    assert proc.returncode == 0, proc.stderr
    fp = resolve_launch(load_config(None, ws).servers["p"], ws).fingerprint
    assert f"--approve {fp}" in proc.stdout
    assert_no_secret(proc.stdout + proc.stderr)
    assert not plog.exists()

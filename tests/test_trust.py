"""Workspace trust: an untrusted workspace starts nothing from its project file; ``kxen trust`` lets
project servers load, and project stdio servers then still wait for approval of their exact launch.

"Started" is proved with demo/server.py ``--log FILE``: the server appends every message it receives
to FILE, so a server that never ran never creates its log.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from support import WAIT, demo_entry, settle, state, write_project

from kxen_core import hookimpl
from kxen_core.cli import command as cli
from kxen_core.config import load_config
from kxen_core.config.trust import trust, untrust
from kxen_core.errors import ConfigError, ServerNotReady
from kxen_core.launch.resolve import resolve_launch
from kxen_core.plugins.manager import make_plugin_manager
from kxen_core.policy import ApprovalDecision, ApprovalRequest
from kxen_core.runtime.workspace import Runtime

pytestmark = pytest.mark.anyio


# --- helpers ----------------------------------------------------------------------------------


def no_channel_pm(*extra: Any):
    """Every installed plugin, but no approval channel at all (the tty one included)."""
    pm = make_plugin_manager(extra=list(extra))
    for impl in list(pm.hook.kxen_approval_prompt.get_hookimpls()):
        if impl.plugin not in extra:
            pm.unregister(impl.plugin)
    return pm


def logged_methods(log: Path) -> list[str]:
    return [json.loads(line).get("method", "<response>") for line in log.read_text().splitlines() if line.strip()]


class Recorder:
    """An approval channel that records the requests and answers with ``approved``."""

    def __init__(self, approved: bool | None) -> None:
        self.approved = approved
        self.requests: list[ApprovalRequest] = []
        self.__name__ = f"recorder-{approved}"

    @hookimpl
    def kxen_approval_prompt(self, request: ApprovalRequest) -> ApprovalDecision | None:
        self.requests.append(request)
        if self.approved is None:
            return None
        return ApprovalDecision(approved=self.approved, reason="" if self.approved else "test says no", channel="test")


# --- trust ------------------------------------------------------------------------------------


async def test_untrusted_workspace_starts_no_project_server_while_user_servers_run(kxen_home, ws, tmp_path):
    plog, ulog = tmp_path / "project.log", tmp_path / "user.log"
    kxen_home.write_servers({"u": demo_entry(ulog, toolPolicies={"echo": "allow"})})
    write_project(ws, {"p": demo_entry(plog)})
    channel = Recorder(approved=True)  # even a channel that says yes to everything is never asked
    async with Runtime(workspace=ws, pm=no_channel_pm(channel)) as rt:
        await settle(rt)
        p, u = state(rt, "p"), state(rt, "u")
        assert (p["state"], p["scope"]) == ("awaiting_trust", "project")
        assert "kxen trust" in p["error"]
        assert u["state"] == "ready"
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("u__echo", {"text": "hi"})
        assert result["content"][0]["text"] == "hi"
        with pytest.raises(ServerNotReady):
            await rt.call_tool("p__echo", {"text": "hi"})
        assert {t["server"] for t in rt.tools()} == {"u"}
    assert channel.requests == []
    assert ulog.exists() and "initialize" in logged_methods(ulog)
    assert not plog.exists(), "a project server of an untrusted workspace was started"


async def test_untrusted_project_remote_and_plugin_kinds_wait_for_trust_too(kxen_home, ws, fakes):
    fakes.add("mem", tools={"t": lambda a: {"content": []}})
    kxen_home.write_settings("[mcp]\nremote_enabled = true\n")
    write_project(ws, {"mem": {"transport": "memory"}, "web": {"url": "https://example.com/mcp"}})
    async with Runtime(workspace=ws, pm=no_channel_pm()) as rt:
        await settle(rt)
        assert {s["name"]: s["state"] for s in rt.status()} == {"mem": "awaiting_trust", "web": "awaiting_trust"}
    assert _fake_received("mem") == []


def _fake_received(name: str) -> list[str]:
    from kxen_testing.memory import get_fake

    return get_fake(name).received_methods()


async def test_kxen_trust_then_project_stdio_waits_for_approval_and_fails_closed(kxen_home, ws, tmp_path, capsys):
    plog = tmp_path / "project.log"
    write_project(ws, {"p": demo_entry(plog)})
    assert cli.main(["trust", str(ws)]) == 0
    assert "trusted" in capsys.readouterr().out
    assert load_config(None, ws).trusted
    async with Runtime(workspace=ws, pm=no_channel_pm()) as rt:
        await settle(rt)
        p = state(rt, "p")
        expected = resolve_launch(rt.config.servers["p"], ws).fingerprint
        assert p["state"] == "awaiting_approval"
        assert p["fingerprint"] == expected
        assert f"--approve {expected}" in p["error"]
        assert "no approval channel" in p["error"]
        with pytest.raises(ServerNotReady):
            await rt.call_tool("p__echo", {"text": "x"})
    assert not plog.exists(), "a project stdio server started without approval"


async def test_a_channel_that_passes_is_no_approval(kxen_home, ws, tmp_path):
    plog = tmp_path / "project.log"
    write_project(ws, {"p": demo_entry(plog)})
    trust(kxen_home.path, ws)
    passing = Recorder(approved=None)
    async with Runtime(workspace=ws, pm=no_channel_pm(passing)) as rt:
        await settle(rt)
        assert state(rt, "p")["state"] == "awaiting_approval"
    assert [r.kind for r in passing.requests] == ["stdio_launch"]
    assert not plog.exists()


async def test_approved_fingerprint_starts_the_project_server(kxen_home, ws, tmp_path, capsys):
    plog = tmp_path / "project.log"
    write_project(ws, {"p": demo_entry(plog, env={"MODE": "fast"})})
    trust(kxen_home.path, ws)
    assert cli.main(["--workspace", str(ws), "mcp", "approvals", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["approvals"]
    assert [r["server"] for r in rows] == ["p"]
    fp = rows[0]["fingerprint"]
    assert fp == resolve_launch(load_config(None, ws).servers["p"], ws).fingerprint
    assert rows[0]["approved"] is False and rows[0]["trusted"] is True

    async with Runtime(workspace=ws, pm=no_channel_pm(), approve=[fp]) as rt:
        await settle(rt)
        p = state(rt, "p")
        assert (p["state"], p["scope"], p["fingerprint"]) == ("ready", "project", None)
    assert logged_methods(plog)[:2] == ["server/discover", "initialize"]  # the era probe, then the handshake


async def test_changing_one_env_value_changes_the_fingerprint_and_asks_again(kxen_home, ws, tmp_path):
    plog = tmp_path / "project.log"
    write_project(ws, {"p": demo_entry(plog, env={"MODE": "fast", "LEVEL": "1"})})
    trust(kxen_home.path, ws)
    old = resolve_launch(load_config(None, ws).servers["p"], ws).fingerprint

    write_project(ws, {"p": demo_entry(plog, env={"MODE": "fast", "LEVEL": "2"})})
    new = resolve_launch(load_config(None, ws).servers["p"], ws).fingerprint
    assert new != old

    channel = Recorder(approved=None)  # records the question, does not answer
    async with Runtime(workspace=ws, pm=no_channel_pm(channel), approve=[old]) as rt:
        await settle(rt)
        p = state(rt, "p")
        assert p["state"] == "awaiting_approval"
        assert p["fingerprint"] == new
    assert [r.fingerprint for r in channel.requests] == [new]
    assert not plog.exists(), "an approval of the old launch started the changed one"


@pytest.mark.parametrize(
    "change",
    [
        {"args": ["--tools", "1"]},
        {"env": {"MODE": "slow"}},
        {"env": {"MODE": "fast", "EXTRA": "1"}},
        {"cwd": "sub"},
    ],
    ids=["args", "env-value", "env-key", "cwd"],
)
async def test_every_part_of_the_launch_is_in_the_fingerprint(kxen_home, ws, change):
    (ws / "sub").mkdir()
    trust(kxen_home.path, ws)
    base = demo_entry(env={"MODE": "fast"})
    write_project(ws, {"p": base})
    before = resolve_launch(load_config(kxen_home.path, ws).servers["p"], ws)
    changed = dict(base)
    if "args" in change:
        changed["args"] = base["args"] + change["args"]
    else:
        changed.update(change)
    write_project(ws, {"p": changed})
    after = resolve_launch(load_config(kxen_home.path, ws).servers["p"], ws)
    assert after.fingerprint != before.fingerprint


async def test_reload_with_a_changed_launch_asks_again(kxen_home, ws, tmp_path):
    plog = tmp_path / "project.log"
    write_project(ws, {"p": demo_entry(plog, env={"LEVEL": "1"})})
    trust(kxen_home.path, ws)
    channel = Recorder(approved=True)
    async with Runtime(workspace=ws, pm=no_channel_pm(channel)) as rt:
        await settle(rt)
        assert state(rt, "p")["state"] == "ready"
        first = channel.requests[-1].fingerprint
        assert first in rt.approved
        write_project(ws, {"p": demo_entry(plog, env={"LEVEL": "2"})})
        channel.approved = False
        with anyio.fail_after(WAIT):
            await rt.reload()
        await settle(rt)
        p = state(rt, "p")
        assert p["state"] == "awaiting_approval"
        assert [r.fingerprint for r in channel.requests] == [first, p["fingerprint"]]
        assert p["fingerprint"] != first
    assert logged_methods(plog).count("initialize") == 1


async def test_an_approval_is_reused_in_process_and_asked_once(kxen_home, ws, tmp_path):
    write_project(ws, {"p": demo_entry(tmp_path / "p.log")})
    trust(kxen_home.path, ws)
    channel = Recorder(approved=True)
    async with Runtime(workspace=ws, pm=no_channel_pm(channel)) as rt:
        await settle(rt)
        assert state(rt, "p")["state"] == "ready"
        with anyio.fail_after(WAIT):
            await rt.stop_server("p")
            await rt.reload()  # same config: kept as it is, or started again without a new question
        await settle(rt)
        assert state(rt, "p")["state"] in ("ready", "stopped")
    assert [r.kind for r in channel.requests] == ["stdio_launch"]


# --- a project entry that may not start gives way to the user entry of the same name ---------


async def test_unapproved_project_entry_falls_back_to_the_user_entry(kxen_home, ws, tmp_path):
    plog, ulog = tmp_path / "project.log", tmp_path / "user.log"
    kxen_home.write_servers({"s": demo_entry(ulog)})
    write_project(ws, {"s": demo_entry(plog)})
    trust(kxen_home.path, ws)
    async with Runtime(workspace=ws, pm=no_channel_pm()) as rt:
        await settle(rt)
        s = state(rt, "s")
        assert (s["state"], s["scope"]) == ("ready", "user")
        assert "not approved" in s["note"] and "user entry" in s["note"]
    assert ulog.exists()
    assert not plog.exists()


async def test_declined_project_entry_falls_back_to_the_user_entry(kxen_home, ws, tmp_path):
    plog, ulog = tmp_path / "project.log", tmp_path / "user.log"
    kxen_home.write_servers({"s": demo_entry(ulog)})
    write_project(ws, {"s": demo_entry(plog)})
    trust(kxen_home.path, ws)
    async with Runtime(workspace=ws, pm=no_channel_pm(Recorder(approved=False))) as rt:
        await settle(rt)
        s = state(rt, "s")
        assert (s["state"], s["scope"]) == ("ready", "user")
        assert "test says no" in s["note"]
    assert ulog.exists() and not plog.exists()


async def test_untrusted_project_entry_falls_back_to_the_user_entry(kxen_home, ws, tmp_path):
    plog, ulog = tmp_path / "project.log", tmp_path / "user.log"
    kxen_home.write_servers({"s": demo_entry(ulog)})
    write_project(ws, {"s": demo_entry(plog)})
    async with Runtime(workspace=ws, pm=no_channel_pm()) as rt:
        await settle(rt)
        s = state(rt, "s")
        assert (s["state"], s["scope"]) == ("ready", "user")
        assert "trust" in s["note"] and "user entry" in s["note"]
    assert ulog.exists() and not plog.exists()


async def test_approved_project_entry_replaces_the_user_entry(kxen_home, ws, tmp_path):
    plog, ulog = tmp_path / "project.log", tmp_path / "user.log"
    kxen_home.write_servers({"s": demo_entry(ulog)})
    write_project(ws, {"s": demo_entry(plog)})
    trust(kxen_home.path, ws)
    async with Runtime(workspace=ws, pm=no_channel_pm(Recorder(approved=True))) as rt:
        await settle(rt)
        s = state(rt, "s")
        # never silently: the note names both entries
        command = rt.config.servers["s"].command
        note = f"the project entry (stdio {command!r}) replaces the user entry of this name (stdio {command!r})"
        assert (s["state"], s["scope"], s["note"]) == ("ready", "project", note)
    assert plog.exists() and not ulog.exists()


# --- kxen trust / kxen untrust ----------------------------------------------------------------


SETTINGS = """\
# my kxen settings -- keep this comment
[mcp]
remote_enabled = false  # not yet

[roles.reviewer]  # read only
allow = ["fs__read_*"]
"""


def test_trust_untrust_round_trip_keeps_other_content_and_comments(kxen_home, ws, capsys):
    path = kxen_home.write_settings(SETTINGS)
    assert cli.main(["trust", str(ws)]) == 0
    text = path.read_text()
    assert "# my kxen settings -- keep this comment" in text
    assert "# not yet" in text and "# read only" in text
    config = load_config(None, ws)
    assert config.trusted
    assert config.settings.trusted_workspaces == [str(ws)]
    assert config.settings.roles["reviewer"].allow == ["fs__read_*"]
    assert config.settings.mcp.remote_enabled is False

    assert cli.main(["trust", str(ws)]) == 0  # again: unchanged
    assert "unchanged" in capsys.readouterr().out.splitlines()[-1]
    assert load_config(None, ws).settings.trusted_workspaces == [str(ws)]

    assert cli.main(["untrust", str(ws)]) == 0
    after = path.read_text()
    assert not load_config(None, ws).trusted
    for line in SETTINGS.splitlines():
        assert line in after
    assert str(ws) not in after


def test_trust_keeps_other_trusted_workspaces(kxen_home, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    path = kxen_home.write_settings(f'# head\ntrusted_workspaces = [\n  "{a}",  # the first one\n]\n')
    assert trust(kxen_home.path, b) is True
    assert load_config(None, b).trusted and load_config(None, a).trusted
    assert "# the first one" in path.read_text()
    assert untrust(kxen_home.path, a) is True
    assert not load_config(None, a).trusted and load_config(None, b).trusted
    assert "# head" in path.read_text()


def test_trust_with_no_config_file_creates_it(kxen_home, ws):
    assert not (kxen_home.path / "config.toml").exists()
    assert cli.main(["trust", str(ws)]) == 0
    assert load_config(None, ws).trusted
    assert untrust(kxen_home.path, ws) is True
    assert untrust(kxen_home.path, ws) is False


def test_trust_defaults_to_the_workspace_option(kxen_home, ws, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["--workspace", str(ws), "trust"]) == 0
    assert load_config(None, ws).trusted
    assert not load_config(None, tmp_path).trusted


def test_trust_is_by_canonical_path(kxen_home, ws, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(ws, target_is_directory=True)
    assert cli.main(["trust", str(link)]) == 0
    assert load_config(None, ws).trusted
    assert load_config(None, link).trusted
    assert cli.main(["untrust", str(ws)]) == 0
    assert not load_config(None, link).trusted


def test_trusting_a_directory_does_not_trust_its_subdirectories(kxen_home, ws):
    sub = ws / "sub"
    sub.mkdir()
    trust(kxen_home.path, ws)
    assert load_config(None, ws).trusted
    assert not load_config(None, sub).trusted


def test_trust_refuses_a_missing_directory(kxen_home, tmp_path, capsys):
    assert cli.main(["trust", str(tmp_path / "nope")]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert not (kxen_home.path / "config.toml").exists()


def test_a_project_cannot_trust_itself(kxen_home, ws, tmp_path):
    """Trust lives only in user settings: a project file that names trust is rejected, not obeyed."""
    plog = tmp_path / "p.log"
    write_project(ws, {"p": demo_entry(plog)})
    (ws / ".kxen" / "config.toml").write_text(f'trusted_workspaces = ["{ws}"]\n')
    data = json.loads((ws / ".kxen" / "mcp.json").read_text())
    data["trusted_workspaces"] = [str(ws)]
    (ws / ".kxen" / "mcp.json").write_text(json.dumps(data))
    config = load_config(None, ws)
    assert not config.trusted
    assert config.project_problems and "p" not in config.servers


def test_trust_keeps_the_settings_file_mode(kxen_home, ws):
    path = kxen_home.write_settings("# private\n")
    os.chmod(path, 0o600)
    trust(kxen_home.path, ws)
    assert path.stat().st_mode & 0o777 == 0o600


async def test_trust_then_reload_asks_and_untrust_then_reload_stops(kxen_home, ws, tmp_path):
    plog = tmp_path / "project.log"
    write_project(ws, {"p": demo_entry(plog)})
    channel = Recorder(approved=True)
    async with Runtime(workspace=ws, pm=no_channel_pm(channel)) as rt:
        await settle(rt)
        assert state(rt, "p")["state"] == "awaiting_trust"
        assert cli.main(["trust", str(ws)]) == 0
        with anyio.fail_after(WAIT):
            await rt.reload()
        await settle(rt)
        assert state(rt, "p")["state"] == "ready"
        assert [r.kind for r in channel.requests] == ["stdio_launch"]

        assert cli.main(["untrust", str(ws)]) == 0
        with anyio.fail_after(WAIT):
            await rt.reload()
        await settle(rt)
        assert state(rt, "p")["state"] == "awaiting_trust"
        with pytest.raises(ServerNotReady):
            await rt.call_tool("p__echo", {"text": "x"})
    assert logged_methods(plog).count("initialize") == 1


@pytest.mark.parametrize("entry", [".", "", "workspace"])
def test_a_relative_trusted_workspace_entry_trusts_nothing(kxen_home, ws, monkeypatch, entry):
    kxen_home.write_settings(f"trusted_workspaces = [{json.dumps(entry)}]\n")
    monkeypatch.chdir(ws if entry != "workspace" else ws.parent)
    try:
        config = load_config(None, ws)
    except ConfigError as exc:  # refusing the entry outright is fine too
        assert "trusted_workspaces" in str(exc)
        return
    assert not config.trusted


# --- trust cannot be moved; settings files must be the user's own --------------------------------


def test_a_symlink_planted_at_a_trusted_path_does_not_move_trust(kxen_home, tmp_path):
    """Trust is the canonical path recorded at ``kxen trust`` time, compared as a string: replacing
    the trusted directory by a symlink to another directory does not trust that directory."""
    trusted, evil = tmp_path / "trusted", tmp_path / "evil"
    trusted.mkdir(), evil.mkdir()
    write_project(evil, {"p": demo_entry()})
    assert cli.main(["trust", str(trusted)]) == 0
    assert load_config(None, trusted).trusted
    trusted.rmdir()
    trusted.symlink_to(evil, target_is_directory=True)
    assert not load_config(None, evil).trusted
    assert not load_config(None, trusted).trusted  # the workspace resolves to evil
    # a hand-written entry that is itself a symlink trusts nothing but its own string
    link = tmp_path / "link"
    link.symlink_to(evil, target_is_directory=True)
    kxen_home.write_settings(f"trusted_workspaces = [{json.dumps(str(link))}]\n")
    assert not load_config(None, evil).trusted
    # untrust still finds an entry by what it resolves to, so the user can always remove trust
    assert untrust(kxen_home.path, evil) is True
    assert "trusted_workspaces = []" in (kxen_home.path / "config.toml").read_text().replace("\n", "")


def test_trust_does_not_count_a_symlinked_entry_as_already_trusting(kxen_home, ws, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(ws, target_is_directory=True)
    kxen_home.write_settings(f"trusted_workspaces = [{json.dumps(str(link))}]\n")
    assert not load_config(None, ws).trusted
    assert trust(kxen_home.path, ws) is True  # not "unchanged": the canonical path is recorded
    assert load_config(None, ws).trusted


@pytest.mark.parametrize("name", ["config.toml", "mcp.json"])
@pytest.mark.parametrize("mode", [0o666, 0o646, 0o602])
def test_user_files_writable_by_everyone_are_refused(kxen_home, ws, capsys, name, mode):
    path = kxen_home.path / name
    path.write_text("" if name == "config.toml" else '{"mcpServers": {}}')
    os.chmod(path, mode)
    with pytest.raises(ConfigError) as info:
        load_config(None, ws)
    assert info.value.problems == [
        f"{path}: (file): refused: writable by every user (mode {mode:04o}) (chmod go-w, or chown it to yourself)"
    ]
    if name == "config.toml":
        assert cli.main(["trust", str(ws)]) == 2
        assert f"{path}: (file): cannot be updated: refused: writable by every user" in capsys.readouterr().err
        assert path.read_text() == ""


needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")


@needs_root
def test_user_files_owned_by_another_user_or_writable_by_another_group_are_refused(kxen_home, ws):
    path = kxen_home.write_settings("")
    os.chown(path, 65534, -1)
    with pytest.raises(ConfigError, match=r"refused: owned by another user \(uid 65534\)"):
        load_config(None, ws)
    os.chown(path, 0, 65534)
    os.chmod(path, 0o664)
    with pytest.raises(ConfigError, match="refused: writable by group 65534, not your own group"):
        load_config(None, ws)
    os.chmod(path, 0o644)  # readable by the group is fine
    assert load_config(None, ws).settings is not None


def test_group_writable_by_the_users_own_group_is_allowed(kxen_home, ws):
    path = kxen_home.write_settings("")
    os.chmod(path, 0o664)
    assert load_config(None, ws).trusted is False


def test_a_project_file_writable_by_others_is_not_refused_for_that(kxen_home, ws):
    pfile = write_project(ws, {"p": demo_entry()})
    os.chmod(pfile, 0o666)  # a repository's own file: trust and approval guard it, not its mode
    assert load_config(None, ws).project_problems == ()


def test_kxen_trust_writes_through_a_symlinked_settings_file(kxen_home, ws, tmp_path):
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "kxen.toml"
    real.write_text("# kept in my dotfiles\n")
    os.chmod(real, 0o600)
    link = kxen_home.path / "config.toml"
    link.symlink_to(real)
    assert cli.main(["trust", str(ws)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(real), "the symlink was replaced by a regular file"
    assert "# kept in my dotfiles" in real.read_text() and str(ws) in real.read_text()
    assert real.stat().st_mode & 0o777 == 0o600
    assert load_config(None, ws).trusted
    assert [p.name for p in dotfiles.iterdir()] == ["kxen.toml"]  # no temp file left behind
    assert cli.main(["remote", "on"]) == 0
    assert link.is_symlink() and "remote_enabled = true" in real.read_text()


def test_kxen_trust_never_leaves_the_settings_file_writable_by_others(kxen_home, ws):
    path = kxen_home.write_settings("")
    os.chmod(path, 0o600)
    trust(kxen_home.path, ws)
    assert path.stat().st_mode & 0o022 == 0

"""Approvals people can use: a denial says how to approve (the exact --approve prefix, and the
toolPolicies line for a user server); a fingerprint prefix of 12 or more characters approves the one
launch or call it matches, and only one; a shorter or malformed --approve is a usage error."""

from __future__ import annotations

import json
import sys

import pytest
from support import demo_entry, settle, state, write_project

from kxen_core import hookimpl
from kxen_core.cli import command as cli
from kxen_core.config import load_config
from kxen_core.config.trust import trust
from kxen_core.errors import ApprovalDenied
from kxen_core.launch.resolve import resolve_launch
from kxen_core.plugins.manager import make_plugin_manager
from kxen_core.policy.approvals import MIN_PREFIX, Approvals
from kxen_core.runtime.workspace import Runtime

pytestmark = pytest.mark.anyio


async def test_a_denied_call_says_how_to_allow_it_and_the_prefix_works(kxen_home, ws):
    kxen_home.write_servers({"d": demo_entry()})  # defaultToolPolicy ask, no channel
    async with Runtime(workspace=ws, pm=make_plugin_manager(allow=["stdio"])) as rt:
        await settle(rt)
        with pytest.raises(ApprovalDenied) as info:
            await rt.call_tool("d__echo", {"text": "hi"})
    message = str(info.value)
    assert "no approval channel" in message and "None" not in message
    fp = message.split("(fingerprint ")[1].split(")")[0]
    assert f"kxen --approve {fp[:16]}" in message
    assert '"toolPolicies": {"echo": "allow"}' in message and str(kxen_home.path / "mcp.json") in message
    # the printed prefix approves exactly that call
    async with Runtime(workspace=ws, pm=make_plugin_manager(allow=["stdio"]), approve=[fp[:16]]) as rt:
        await settle(rt)
        result = await rt.call_tool("d__echo", {"text": "hi"})
        assert result["content"][0]["text"] == "hi"
        with pytest.raises(ApprovalDenied):  # other arguments: another call, another fingerprint
            await rt.call_tool("d__echo", {"text": "other"})


def test_a_project_server_denial_does_not_suggest_a_project_allow():
    from kxen_core.config import ServerConfig
    from kxen_core.policy import ToolCall
    from kxen_core.policy.approvals import how_to_allow

    call = ToolCall(server=ServerConfig(name="p", scope="project", command="x"), tool="t", arguments={})
    text = how_to_allow(call, "a" * 64)
    assert "kxen --approve aaaaaaaaaaaaaaaa" in text and "toolPolicies" not in text and "may not allow" in text


async def test_a_prefix_approves_a_project_launch(kxen_home, ws, tmp_path):
    plog = tmp_path / "p.log"
    write_project(ws, {"p": demo_entry(plog)})
    trust(kxen_home.path, ws)
    fp = resolve_launch(load_config(None, ws).servers["p"], ws).fingerprint
    async with Runtime(workspace=ws, approve=[fp[:MIN_PREFIX]]) as rt:
        await settle(rt)
        assert state(rt, "p")["state"] == "ready"


def test_a_prefix_stands_for_one_fingerprint_only():
    approvals = Approvals(make_plugin_manager(load_entrypoints=False), ["abcdef012345"])
    first, second = "abcdef012345" + "0" * 52, "abcdef012345" + "1" * 52
    assert approvals.is_approved(first) and approvals.is_approved(first)
    assert not approvals.is_approved(second)  # ambiguous: the prefix already stands for the first
    assert not approvals.is_approved("abcdef01234" + "5" * 53)  # does not start with it
    short = Approvals(make_plugin_manager(load_entrypoints=False), ["abcdef01"])  # too short to stand for anything
    assert not short.is_approved("abcdef01" + "0" * 56)


@pytest.mark.parametrize("value", ["abc", "abcdef01234", "not-hex-at-all-zz", "a" * 65, ""])
def test_a_short_or_malformed_approve_is_a_usage_error(value, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--approve", value, "mcp", "status"])
    assert info.value.code == 2 and "not a fingerprint" in capsys.readouterr().err


def test_the_approvals_command_takes_a_prefix(kxen_home, ws, capsys):
    write_project(ws, {"p": demo_entry()})
    trust(kxen_home.path, ws)
    fp = resolve_launch(load_config(None, ws).servers["p"], ws).fingerprint
    assert cli.main(["--workspace", str(ws), "mcp", "approvals", "--json", "--approve", fp[:20].upper()]) == 0
    (row,) = json.loads(capsys.readouterr().out)["approvals"]
    assert row["approved"] is True


def test_tools_shows_each_tools_policy(kx, kxen_home, fakes, monkeypatch):
    from kxen_testing import mem, text_result

    monkeypatch.setenv("COLUMNS", "250")  # the table unfolded

    fakes.add("f", tools={n: (lambda a: text_result("x")) for n in ("echo", "fail", "other")})
    kxen_home.write_servers({"m": mem("f", toolPolicies={"echo": "allow", "fail": "deny"})})  # default: ask
    code, out, err = kx("mcp", "tools", "--json", "--wait", "10")
    assert code == 0, err
    policies = {t["name"]: t["policy"] for t in json.loads(out)["tools"] if t["server"] == "m"}
    assert policies == {"echo": "allow", "other": "ask"}  # a denied tool is not shown to the model
    code, out, err = kx("mcp", "tools", "--all", "--json", "--wait", "10")
    policies = {t["name"]: (t["policy"], t["hidden"]) for t in json.loads(out)["tools"] if t["server"] == "m"}
    assert policies == {"echo": ("allow", False), "fail": ("deny", True), "other": ("ask", False)}
    code, out, err = kx("mcp", "tools", "--all", "--wait", "10")
    assert "need an approval for each call" in out and "not shown: why" in out and "denied by toolPolicies.fail" in out


class Answering:
    """An approval channel that says yes, remembered as ``remember``, and counts the questions."""

    def __init__(self, remember: str) -> None:
        self.remember = remember
        self.asked: list[object] = []

    @hookimpl
    def kxen_approval_prompt(self, request):
        from kxen_core.policy import ApprovalDecision

        self.asked.append(request)
        return ApprovalDecision(approved=True, channel="test", remember=self.remember)


def _pm(channel):
    pm = make_plugin_manager(allow=["stdio"])
    pm.register(channel, name="answering")
    return pm


@pytest.mark.parametrize(
    "remember, asked",
    [("once", 3), ("call", 2), ("tool", 1)],  # echo(a), echo(a), echo(b)
)
async def test_how_long_a_yes_holds(kxen_home, ws, remember, asked):
    kxen_home.write_servers({"d": demo_entry()})
    channel = Answering(remember)
    async with Runtime(workspace=ws, pm=_pm(channel)) as rt:
        await settle(rt)
        for text in ("a", "a", "b"):
            assert (await rt.call_tool("d__echo", {"text": text}))["content"][0]["text"] == text
    assert len(channel.asked) == asked


async def test_always_writes_the_users_tool_policy_and_the_next_start_does_not_ask(kxen_home, ws):
    kxen_home.write_servers({"d": demo_entry()})
    channel = Answering("always")
    async with Runtime(workspace=ws, pm=_pm(channel)) as rt:
        await settle(rt)
        await rt.call_tool("d__echo", {"text": "a"})
        await rt.call_tool("d__echo", {"text": "b"})  # the tool is allowed for the process at once
    assert len(channel.asked) == 1
    entry = json.loads((kxen_home.path / "mcp.json").read_text())["mcpServers"]["d"]
    assert entry["toolPolicies"] == {"echo": "allow"}
    assert (kxen_home.path / "mcp.json").stat().st_mode & 0o777 == 0o600
    async with Runtime(workspace=ws, pm=_pm(channel)) as rt:
        await settle(rt)
        await rt.call_tool("d__echo", {"text": "c"})
    assert len(channel.asked) == 1  # read from the config: not asked again


async def test_always_is_not_offered_for_a_project_server_and_nothing_is_written(kxen_home, ws):
    from kxen_core.launch.resolve import resolve_launch as resolve

    pfile = write_project(ws, {"p": demo_entry()})
    before = pfile.read_text()
    trust(kxen_home.path, ws)
    fp = resolve(load_config(None, ws).servers["p"], ws).fingerprint
    channel = Answering("always")
    async with Runtime(workspace=ws, pm=_pm(channel), approve=[fp]) as rt:
        await settle(rt)
        await rt.call_tool("p__echo", {"text": "a"})
        await rt.call_tool("p__echo", {"text": "a"})
        await rt.call_tool("p__echo", {"text": "b"})
    (first, *_), count = channel.asked, len(channel.asked)
    assert "always" not in first.remember_choices and count == 2  # held as "this exact call"
    assert pfile.read_text() == before and not (kxen_home.path / "mcp.json").exists()


def test_the_terminal_offers_what_the_request_allows():
    import io

    from kxen_approval_tty.hooks import ask_blocking, question

    from kxen_core.policy import ApprovalRequest

    call = ApprovalRequest(kind="tool_call", server="d", summary="s", fingerprint="f" * 64, tool_key="tool:x",
                           remember_choices=("once", "call", "tool", "always"))  # fmt: skip
    launch = ApprovalRequest(kind="stdio_launch", server="d", summary="s", fingerprint="f" * 64)
    assert "[a] always allow this tool" in question(call) and question(launch) == "Approve? [y/N] "
    for answer, remember in (("o", "once"), ("y", "call"), ("process", "tool"), ("a", "always")):
        decision = ask_blocking(call, io.StringIO(answer + "\n"), io.StringIO())
        assert decision.approved and decision.remember == remember
    assert not ask_blocking(launch, io.StringIO("a\n"), io.StringIO()).approved  # not offered: no
    assert not ask_blocking(call, io.StringIO("\n"), io.StringIO()).approved


def _project_tools_toml(ws, fp, tools='echo = "allow"', workspace=None):
    return (
        f'trusted_workspaces = ["{ws}"]\n\n[[project_tools]]\nworkspace = "{workspace or ws}"\nserver = "p"\n'
        f'launch = "{fp}"\ntools = {{ {tools} }}\n'
    )


async def test_the_user_allows_a_project_servers_tool_bound_to_its_launch(kxen_home, ws):
    write_project(ws, {"p": demo_entry()})
    trust(kxen_home.path, ws)
    fp = resolve_launch(load_config(None, ws).servers["p"], ws).fingerprint
    kxen_home.write_settings(_project_tools_toml(ws, fp))
    async with Runtime(workspace=ws, pm=make_plugin_manager(allow=["stdio"]), approve=[fp]) as rt:
        await settle(rt)
        assert (await rt.call_tool("p__echo", {"text": "hi"}))["content"][0]["text"] == "hi"  # no channel needed
        with pytest.raises(ApprovalDenied):
            await rt.call_tool("p__add", {"a": 1, "b": 2})  # not in the rule: the project default (ask)
        decision, reasons = await rt.tool_policy("p", "echo")
        assert decision == "allow" and "project_tools[0].tools.echo (user settings)" in reasons[-1]


async def test_the_rule_does_not_follow_a_changed_launch_or_another_workspace(kxen_home, ws, tmp_path):
    write_project(ws, {"p": demo_entry()})
    trust(kxen_home.path, ws)
    fp = resolve_launch(load_config(None, ws).servers["p"], ws).fingerprint
    kxen_home.write_settings(_project_tools_toml(ws, fp))
    write_project(ws, {"p": {**demo_entry(), "env": {"MODE": "changed"}}})
    new_fp = resolve_launch(load_config(None, ws).servers["p"], ws).fingerprint
    assert new_fp != fp
    async with Runtime(workspace=ws, pm=make_plugin_manager(allow=["stdio"]), approve=[new_fp]) as rt:
        await settle(rt)
        with pytest.raises(ApprovalDenied):
            await rt.call_tool("p__echo", {"text": "hi"})
    other = tmp_path / "other-ws"
    other.mkdir()
    write_project(ws, {"p": demo_entry()})
    kxen_home.write_settings(_project_tools_toml(ws, fp, workspace=other))
    async with Runtime(workspace=ws, pm=make_plugin_manager(allow=["stdio"]), approve=[fp]) as rt:
        await settle(rt)
        with pytest.raises(ApprovalDenied):
            await rt.call_tool("p__echo", {"text": "hi"})


async def test_a_projects_own_deny_still_wins(kxen_home, ws):
    from kxen_core.errors import PolicyDenied

    write_project(ws, {"p": {**demo_entry(), "toolPolicies": {"echo": "deny"}}})
    trust(kxen_home.path, ws)
    fp = resolve_launch(load_config(None, ws).servers["p"], ws).fingerprint
    kxen_home.write_settings(_project_tools_toml(ws, fp))
    async with Runtime(workspace=ws, pm=make_plugin_manager(allow=["stdio"]), approve=[fp]) as rt:
        await settle(rt)
        with pytest.raises(PolicyDenied):
            await rt.call_tool("p__echo", {"text": "hi"})


def test_a_bad_rule_is_a_config_error_with_its_key_path(kxen_home, ws):
    from kxen_core.errors import ConfigError

    kxen_home.write_settings(_project_tools_toml(ws, "abc"))
    with pytest.raises(ConfigError) as info:
        load_config(None, ws)
    assert any("project_tools[0].launch" in p and "64 hex" in p for p in info.value.problems), info.value.problems


def test_a_call_to_a_server_awaiting_its_launch_approval_names_both_fingerprints(kx, kxen_home, ws, monkeypatch):
    """A project server's launch waits for its approval and its tools are ``ask``: one denial gives
    both fingerprints, and approving both (prefixes, one run) runs the call -- no second round."""
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    write_project(ws, {"p": demo_entry()})
    trust(kxen_home.path, ws)
    code, out, err = kx("mcp", "call", "p", "echo", "--args", '{"text": "hi"}', "--wait", "20")
    assert code == 1, (out, err)
    launch = resolve_launch(load_config(kxen_home.path, ws).servers["p"], ws).fingerprint
    assert f"fingerprint {launch}" in err and "this call of p__echo needs approval too" in err, err
    prefixes = err.split("To allow both for one run: kxen ")[1].split()
    assert prefixes[0] == "--approve" and prefixes[2] == "--approve" and prefixes[1] == launch[:16], prefixes
    code, out, err = kx("mcp", "call", "p", "echo", "--args", '{"text": "hi"}', "--json", "--wait", "20")
    text = json.loads(out)["content"][0]["text"]
    assert text == "ApprovalDenied: p__echo was not run: its server's launch and the call need the user's approval"
    approve = ["--approve", prefixes[1], "--approve", prefixes[3]]
    code, out, err = kx(*approve, "mcp", "call", "p", "echo", "--args", '{"text": "hi"}', "--wait", "20")
    assert (code, out.strip()) == (0, "hi"), err


def test_file_identities_are_in_the_json_of_approvals_only(kx, kxen_home, ws, monkeypatch):
    import shutil

    from support import DEMO

    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    shutil.copy(DEMO, ws / "server.py")
    write_project(ws, {"p": {"command": sys.executable, "args": [str(ws / "server.py")]}})
    trust(kxen_home.path, ws)
    code, out, _ = kx("mcp", "approvals", "--json")
    (row,) = json.loads(out)["approvals"]
    files = row["launch"]["files"]
    assert code == 0 and str(ws / "server.py") in files and all(files.values())
    code, text, _ = kx("mcp", "approvals")
    assert code == 0 and str(ws / "server.py") in text
    assert not any(identity in text for identity in files.values()), text

"""The terminal approval channel: it passes (None) without a terminal, shows the whole request, says
yes only to "y"/"yes", and reads the answer off the event loop."""

from __future__ import annotations

import io
import json
import sys

import anyio
import pytest
from kxen_approval_tty import hooks
from kxen_approval_tty.hooks import ask_blocking, render
from kxen_testing.fake import text_result

from kxen_core.errors import ApprovalDenied
from kxen_core.launch.resolve import Launch
from kxen_core.plugins.manager import make_plugin_manager
from kxen_core.policy import ApprovalDecision, ApprovalRequest
from kxen_core.runtime.workspace import Runtime

pytestmark = pytest.mark.anyio

SECRET = "tok-SECRET-4242"
LAUNCH = Launch(
    command="/usr/bin/node", args=("server.js",), cwd="/work/repo", env={"API_TOKEN": SECRET, "MODE": "fast"}
)
REQUEST = ApprovalRequest(
    kind="stdio_launch",
    server="repo-tools",
    summary="start project MCP server 'repo-tools' from /work/repo/.kxen/mcp.json",
    details=LAUNCH.display(),
    fingerprint=LAUNCH.fingerprint,
)


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        if self.closed:
            raise ValueError("I/O operation on closed file")  # as a real closed file does
        return True


class NotTTY(io.StringIO):
    def isatty(self) -> bool:
        return False


# --- no terminal: pass --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stdin", "stderr"),
    [(NotTTY("y\n"), FakeTTY()), (FakeTTY("y\n"), NotTTY()), (None, FakeTTY()), (NotTTY("y\n"), NotTTY())],
    ids=["stdin-not-a-tty", "stderr-not-a-tty", "no-stdin", "neither"],
)
async def test_without_a_terminal_the_channel_passes(monkeypatch, stdin, stderr):
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stderr", stderr)
    with anyio.fail_after(5):
        assert await hooks.kxen_approval_prompt(REQUEST) is None
    if stdin is not None:
        assert stdin.tell() == 0  # nothing was read
    assert stderr.getvalue() == ""  # nothing was shown


async def test_a_closed_stdin_is_no_terminal(monkeypatch):
    closed = FakeTTY()
    closed.close()
    monkeypatch.setattr(sys, "stdin", closed)
    monkeypatch.setattr(sys, "stderr", FakeTTY())
    assert await hooks.kxen_approval_prompt(REQUEST) is None


# --- the answer ---------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", ["y\n", "yes\n", "Y\n", "YES\n", "  y  \n", "y"])
def test_y_approves(answer):
    out = io.StringIO()
    decision = ask_blocking(REQUEST, io.StringIO(answer), out)
    assert decision == ApprovalDecision(approved=True, reason="", channel="tty")
    assert out.getvalue().endswith("Approve? [y/N] ")


@pytest.mark.parametrize("answer", ["n\n", "\n", "", "no\n", "yes please\n", "yy\n", "ok\n", "1\n", "ja\n", "y es\n"])
def test_anything_else_declines(answer):
    decision = ask_blocking(REQUEST, io.StringIO(answer), io.StringIO())
    assert decision.approved is False
    assert decision.channel == "tty" and decision.reason == "declined on the terminal"


def test_one_answer_is_one_line():
    stdin = io.StringIO("n\ny\n")
    assert ask_blocking(REQUEST, stdin, io.StringIO()).approved is False
    assert stdin.read() == "y\n"


def test_the_rest_of_a_long_line_does_not_answer_the_next_question():
    stdin = io.StringIO("n" * 64 + "y\n")
    assert ask_blocking(REQUEST, stdin, io.StringIO()).approved is False
    other = ApprovalRequest(kind="tool_call", server="s", summary="call tool s__rm", fingerprint="f" * 64)
    assert ask_blocking(other, stdin, io.StringIO()).approved is False


# --- what it shows --------------------------------------------------------------------------------


def test_the_prompt_shows_the_whole_request_and_no_secret():
    out = io.StringIO()
    ask_blocking(REQUEST, io.StringIO("n\n"), out)
    text = out.getvalue()
    assert REQUEST.summary in text
    assert "stdio_launch" in text and "repo-tools" in text
    assert "/usr/bin/node" in text and "server.js" in text and "/work/repo" in text
    assert '"MODE": "fast"' in text
    assert LAUNCH.display()["env"]["API_TOKEN"] in text  # the digest
    assert SECRET not in text
    assert f"fingerprint: {REQUEST.fingerprint}" in text
    assert render(REQUEST) in text


def test_render_of_a_tool_call():
    request = ApprovalRequest(
        kind="tool_call",
        server="fs",
        summary="call tool fs__write",
        details={"tool": "write", "arguments": {"path": "a.txt", "text": "line1\nline2"}, "why": ["defaultToolPolicy"]},
        fingerprint="ab" * 32,
    )
    text = render(request)
    assert text.splitlines()[0] == "kxen: approval needed -- call tool fs__write"
    assert "tool: write" in text
    assert json.dumps("line1\nline2") in text  # newlines inside arguments stay escaped


def test_render_shows_control_characters_from_servers_as_escapes():
    evil = "rm\x1b[2K\rok\x07\x9b31m"
    request = ApprovalRequest(
        kind="tool_call",
        server="fs",
        summary=f"call tool fs__{evil}",
        details={"tool": evil, "arguments": {"p": "\x1b]0;title\x07"}, "why": []},
        fingerprint="cd" * 32,
    )
    text = render(request)
    assert not any(ch in text for ch in "\x1b\r\x07\x9b")
    assert "\\x1b[2K" in text  # shown, not obeyed


def test_render_does_not_let_newlines_fake_prompt_lines():
    evil = "rm\nkxen: approval needed -- call tool fs__read\n  fingerprint: " + "00" * 32
    request = ApprovalRequest(
        kind="tool_call",
        server="fs",
        summary=f"call tool fs__{evil}",
        details={"tool": evil, "arguments": {}, "why": []},
        fingerprint="cd" * 32,
    )
    lines = render(request).splitlines()
    assert sum(line.startswith("kxen: approval needed") for line in lines) == 1
    assert [line for line in lines if line.startswith("  fingerprint:")] == [f"  fingerprint: {'cd' * 32}"]


# --- wired into kxen --------------------------------------------------------------------------


def test_it_is_installed_as_the_tty_entry_point():
    pm = make_plugin_manager()
    info = {p.name: p for p in pm.infos()}["tty"]
    assert info.dist == "kxen-approval-tty" and info.source == "entry point"
    assert "kxen_approval_prompt" in info.hooks


@pytest.mark.parametrize(("answer", "sent"), [("y\n", True), ("n\n", False)])
async def test_a_terminal_answer_decides_a_tool_call(kxen_home, fakes, monkeypatch, answer, sent):
    kxen_home.write_servers({"srv": {"transport": "memory"}})  # defaultToolPolicy ask
    fake = fakes.add("srv", tools={"echo": lambda a: text_result("ok")})
    stdin, stderr = FakeTTY(answer), FakeTTY()
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stderr", stderr)
    pm = make_plugin_manager()  # the installed plugins: the memory transport and this channel ("tty")
    for impl in list(pm.hook.kxen_approval_prompt.get_hookimpls()):
        if impl.plugin is not hooks:
            pm.unregister(impl.plugin)
    assert pm.get_plugin("tty") is hooks
    async with Runtime(pm=pm) as rt:
        with anyio.fail_after(20):
            await rt.wait_ready()
            if sent:
                assert (await rt.call_tool("srv__echo", {"x": 1}))["content"][0]["text"] == "ok"
            else:
                with pytest.raises(ApprovalDenied, match="declined on the terminal"):
                    await rt.call_tool("srv__echo", {"x": 1})
    assert "call tool srv__echo" in stderr.getvalue()
    assert [m["params"]["name"] for m in fake.received if m.get("method") == "tools/call"] == (["echo"] if sent else [])


# --- the decision first ---------------------------------------------------------------------------


async def test_a_real_tool_call_request_leads_with_the_tool_and_its_arguments(kxen_home, tmp_path):
    """A request the core makes for a project server's tool (its launch approved up front): the
    prompt shows the tool and its arguments (bounded, escaped) first, then the server and its scope,
    then the launch, whose files are named without their identities (those are in --json)."""
    import shutil
    from pathlib import Path

    from kxen_testing import Channel

    from kxen_core.config import load_config
    from kxen_core.config.trust import trust
    from kxen_core.launch.resolve import resolve_launch

    ws = tmp_path / "ws"
    (ws / ".kxen").mkdir(parents=True)
    demo = Path(__file__).resolve().parents[3] / "demo" / "server.py"
    shutil.copy(demo, ws / "server.py")  # a file of the workspace: the launch names it and its identity
    entry = {"command": sys.executable, "args": [str(ws / "server.py")]}
    (ws / ".kxen" / "mcp.json").write_text(json.dumps({"mcpServers": {"p": entry}}))
    trust(kxen_home.path, ws)
    launch = resolve_launch(load_config(kxen_home.path, ws).servers["p"], ws)
    identities = list(launch.display()["files"].values())
    assert identities and str(ws / "server.py") in launch.display()["files"]
    channel = Channel(approved=False)
    pm = make_plugin_manager(allow=["stdio"], extra=[channel])
    async with Runtime(home=kxen_home.path, workspace=ws, pm=pm, approve=[launch.fingerprint]) as rt:
        with anyio.fail_after(30):
            assert await rt.wait_ready(30)
        with pytest.raises(ApprovalDenied):
            await rt.call_tool("p__echo", {"text": "\x1b[2Jhi" + "x" * 10_000})
    (request,) = [r for r in channel.requests if r.kind == "tool_call"]
    text = render(request)
    lines = text.splitlines()
    first = [
        next(i for i, line in enumerate(lines) if line.startswith(f"  {key}:"))
        for key in ("tool", "arguments", "server", "launch")
    ]
    assert first == sorted(first), text  # tool, arguments, server, launch: in that order
    assert lines[1] == "  tool: echo" and lines[first[2]].startswith("  server: p (project scope, stdio, ")
    assert "\x1b" not in text and "\\u001b[2Jhi" in text  # escaped
    arguments = "\n".join(lines[first[1] : first[2]])
    assert len(arguments) < 2200 and "[cut: " in arguments  # bounded
    (files,) = [line for line in lines if line.startswith("    files: ")]
    assert str(ws / "server.py") in files
    assert not any(identity in text for identity in identities), text
    assert request.details["launch"]["files"] == launch.display()["files"]  # the request keeps them

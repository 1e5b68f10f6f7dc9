"""What the model gets when a call is refused: a short reason without host paths, fingerprints or
command lines ("needs the user's approval", "denied by policy"), while the host API and the CLI keep
the next step (the --approve prefix, the toolPolicies line and the file it goes in)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from kxen_testing import mem, running, text_result

from kxen_core.errors import ApprovalDenied, PolicyDenied

pytestmark = pytest.mark.anyio


def assert_for_the_model(text: str, home: Path) -> None:
    """No path, no CLI advice, no fingerprint."""
    for leak in (str(home), "mcp.json", "--approve", "kxen ", "toolPolicies", "fingerprint"):
        assert leak not in text, f"{leak!r} reached the model: {text}"


async def test_the_model_gets_a_short_reason_and_the_host_the_next_step(kxen_home, ws, fakes):
    fakes.add("f", tools={"echo": lambda a: text_result("hi"), "rm": lambda a: text_result("gone")})
    servers = {"h": mem("f", toolPolicies={"rm": "deny"})}  # echo: ask (no channel), rm: deny
    async with running(kxen_home, ws, servers=servers) as rt:
        asked = await rt.agent_call("h__echo", {"text": "x"})
        denied = await rt.agent_call("h__rm", {})
        assert asked.is_error and asked.text == "ApprovalDenied: h__echo was not run: it needs the user's approval"
        assert denied.is_error and denied.text == "PolicyDenied: h__rm denied by policy"
        assert_for_the_model(asked.text, kxen_home.path)
        # the host's own surface keeps what a person does about it
        with pytest.raises(ApprovalDenied) as info:
            await rt.call_tool("h__echo", {"text": "x"})
        message = str(info.value)
        assert "kxen --approve " in message and str(kxen_home.path / "mcp.json") in message
        with pytest.raises(PolicyDenied) as denial:
            await rt.call_tool("h__rm", {})
        assert "toolPolicies" in str(denial.value)


def test_the_cli_keeps_the_next_step(kx, kxen_home, fakes):
    fakes.add("f", tools={"echo": lambda a: text_result("hi")})
    kxen_home.write_servers({"h": mem("f")})
    code, out, err = kx("mcp", "call", "h", "echo", "--wait", "10")
    assert code == 1 and "kxen --approve " in err and "toolPolicies" in err, err
    code, out, err = kx("mcp", "call", "h", "echo", "--json", "--wait", "10")  # what the agent gets
    assert code == 1
    text = json.loads(out)["content"][0]["text"]
    assert text == "ApprovalDenied: h__echo was not run: it needs the user's approval"


async def test_a_server_awaiting_the_user_is_said_so_without_its_next_step(kxen_home, ws, fakes):
    from kxen_core.config.trust import trust

    fakes.add("f", tools={"echo": lambda a: text_result("hi")})
    (ws / ".kxen").mkdir()
    (ws / ".kxen" / "mcp.json").write_text(json.dumps({"mcpServers": {"p": {"command": "sh", "args": ["-c", ":"]}}}))
    trust(kxen_home.path, ws)
    async with running(kxen_home, ws, allow=("memory", "stdio")) as rt:
        out = await rt.agent_call("p__anything", {})
        assert out.is_error and "awaiting_approval (its launch needs the user's approval)" in out.text, out.text
        assert_for_the_model(out.text, kxen_home.path)
        assert str(ws) not in out.text


async def test_server_everything_asked_without_a_channel(kxen_home, ws, everything_js):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    entry = {"command": node, "args": [everything_js, "stdio"], "toolPolicies": {"get-env": "deny"}}
    async with running(kxen_home, ws, servers={"ev": entry}, allow=("stdio",), wait=60) as rt:
        asked = await rt.agent_call("ev__echo", {"message": "hi"})
        denied = await rt.agent_call("ev__get-env", {})
    assert asked.text == "ApprovalDenied: ev__echo was not run: it needs the user's approval"
    assert denied.text == "PolicyDenied: ev__get-env denied by policy"

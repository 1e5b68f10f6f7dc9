"""Real-peer twins of tests/test_server_text_scrub.py: servers nobody on this project wrote echo what
kxen holds as secret, and neither the agent nor a terminal gets it.

* server-everything (npm) over stdio: ``get-env`` answers with the child's environment (a value a
  ``${VAR}`` supplied, a sensitive env value), ``echo`` with the message it was given (terminal
  escapes around a secret);
* the OAuth peer (tests/peers/auth_peer.py ``--leaky``, the official SDK's authorization server and a
  protected MCP server): after a real sign-in through kxen-oauth, ``leak`` answers and ``leak_error``
  fails with the caller's access token and every refresh token of its client.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import anyio
import pytest
from kxen_testing import running
from oauth_support import OAUTH_PLUGINS, Follower, auth_peer, stored
from remote_support import remote, remote_on, status_of

pytestmark = pytest.mark.anyio

VAR_SECRET = "expanded-var-secret-4242"
ENV_SECRET = "env-pa55word-value-31"
ATTACK = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[H\u202e"
WAIT = 60


@pytest.fixture
def everything(everything_js: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    monkeypatch.setenv("KXEN_TEST_VAR_SECRET", VAR_SECRET)
    return {
        "command": node,
        "args": [everything_js, "stdio"],
        "env": {"API_TOKEN": "${KXEN_TEST_VAR_SECRET}", "SERVICE_PASSWORD": ENV_SECRET},
        "defaultToolPolicy": "allow",
        "timeouts": {"requestSeconds": 30},
        "egressGuard": "off",  # it sends the secret on purpose: what comes back is scrubbed
    }


async def test_server_everything_echoing_secrets_to_the_agent(kxen_home, tmp_path, everything):
    async with running(kxen_home, tmp_path, servers={"ev": everything}, allow=("stdio",), wait=WAIT) as rt:
        out = await rt.agent_call("ev__get-env", {})
        assert not out.is_error, out.text
        env = json.loads(out.text)
        # the child got both values; the agent sees neither
        assert (env["API_TOKEN"], env["SERVICE_PASSWORD"]) == ("***", "***"), out.text
        out = await rt.agent_call("ev__echo", {"message": f"{ATTACK} {VAR_SECRET} {ENV_SECRET}"})
        assert VAR_SECRET not in out.text and ENV_SECRET not in out.text and "*** ***" in out.text, out.text


def test_server_everything_echo_on_the_terminal(kx, kxen_home, monkeypatch, everything):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    kxen_home.write_servers({"ev": everything})
    message = json.dumps({"message": f"{ATTACK} {VAR_SECRET} {ENV_SECRET}"})
    for extra in ((), ("--json",)):
        code, out, err = kx("mcp", "call", "ev", "echo", "--args", message, *extra, "--wait", str(WAIT))
        assert code == 0, err
        for raw in ("\x1b", "\x07", "\u202e"):
            assert raw not in out + err, (out, err)
        assert VAR_SECRET not in out + err and ENV_SECRET not in out + err, (out, err)
        assert "*** ***" in out


def stored_tokens() -> list[str]:
    doc = stored()
    values = [t.get(k) for t in doc.get("tokens", []) for k in ("accessToken", "refreshToken")]
    return [v for v in values if isinstance(v, str) and len(v) >= 8]


async def test_oauth_tokens_a_server_echoes_never_reach_the_agent(kxen_home, ws, start_peer):
    url, _ = auth_peer(start_peer, "--leaky")
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        started = await rt.login_start("r")
        with anyio.fail_after(30):
            await Follower().follow(started.url)  # the person, in a browser
            while rt.login_poll(started.flow_id).state == "pending":
                await anyio.sleep(0.02)
            assert await rt.wait_ready(30)
        assert status_of(rt, "r")["state"] == "ready", status_of(rt, "r")
        tokens = stored_tokens()
        assert len(tokens) == 2, "an access and a refresh token are stored"
        raw = await rt.call_tool("r__leak", {})  # the host's own view: what the server sent
        assert all(t in raw["content"][0]["text"] for t in tokens), "the peer echoes both tokens"
        texts = []
        for name in ("r__leak", "r__leak_error"):
            out = await rt.agent_call(name, {})
            texts.append(out.text)
            for token in tokens:
                assert token not in out.text, f"{name}: a stored token reached the agent: {out.text}"
        assert texts[0] == "access=*** refresh=***", texts[0]
        assert "access=*** refresh=***" in texts[1], texts[1]
        shown = json.dumps(rt.status())
        assert not any(t in shown for t in tokens)


def test_sdk_server_log_message_on_the_terminal(kxen_home, tmp_path, monkeypatch):
    """The official Python SDK server sends a log message (warning) with what it was given: the
    ``kxen`` command, as a process of its own, prints it escaped and with the secret scrubbed."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK (a dev dependency) is not installed")
    sdk = Path(__file__).resolve().parent / "peers" / "sdk_server.py"
    entry = {
        "command": sys.executable,
        "args": [str(sdk), "stdio", "--log-tools"],
        "env": {"API_TOKEN": "${KXEN_TEST_VAR_SECRET}"},
        "defaultToolPolicy": "allow",
        "protocolEra": "legacy",  # logging is deprecated in the 2026-07-28 revision: the SDK sends none there
        "egressGuard": "off",  # it sends the secret on purpose: what comes back is scrubbed
    }
    kxen_home.write_servers({"s": entry})
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, "KXEN_TEST_VAR_SECRET": VAR_SECRET}
    env.pop("KXEN_LOAD_PLUGINS", None)
    argv = [sys.executable, "-m", "kxen_core.cli", "--home", str(kxen_home.path), "--workspace", str(ws)]
    text = json.dumps({"text": f"{ATTACK} {VAR_SECRET}"})
    proc = subprocess.run(
        [*argv, "mcp", "call", "s", "shout", "--args", text, "--wait", str(WAIT)],
        capture_output=True,
        env=env,
        timeout=120,
    )
    out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, (out, err)
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw not in out + err, (out, err)
    assert VAR_SECRET not in out + err, (out, err)
    assert "\\x1b]52;c;" in err and "***" in err, err  # the log line was printed, escaped and scrubbed


def test_oauth_tokens_a_server_echoes_never_reach_the_terminal(kx, kxen_home, start_peer, monkeypatch):
    import webbrowser

    import kxen_oauth.hooks
    from test_auth_oauth_twin import follow_sync

    monkeypatch.setenv("KXEN_LOAD_PLUGINS", ",".join(OAUTH_PLUGINS))
    url, _ = auth_peer(start_peer, "--leaky")
    kxen_home.write_settings(remote_on(url))
    kxen_home.write_servers({"r": remote(url)})
    monkeypatch.setattr(webbrowser, "open", follow_sync)
    code, out, err = kx("mcp", "login", "r", "--timeout", "60")
    assert code == 0, (out, err)
    tokens = stored_tokens()
    assert len(tokens) == 2
    monkeypatch.setattr(kxen_oauth.hooks, "_engine", None)  # as a new kxen process: nothing held yet
    runs = [
        kx("mcp", "call", "r", "leak", "--wait", "30"),
        kx("mcp", "call", "r", "leak", "--json", "--wait", "30"),
        kx("mcp", "call", "r", "leak_error", "--wait", "30"),
        kx("mcp", "call", "r", "leak_error", "--json", "--wait", "30"),
    ]
    assert [code for code, _, _ in runs] == [0, 0, 1, 1], runs
    for _code, out, err in runs:
        for token in tokens:
            assert token not in out + err, (out, err)
    assert runs[0][1].strip() == "access=*** refresh=***", runs[0]
    assert json.loads(runs[3][1])["content"][0]["text"].endswith("access=*** refresh=***"), runs[3]

"""The remote-MCP confirmation: before a remote server runs, the user confirms its operator, data
retention and access scope; the confirmation is recorded per canonical URL in the user's
config.toml, and a server added later or whose URL changed stays off until it is confirmed.
``kxen remote on`` asks on a terminal, takes ``--yes`` without one, and refuses otherwise."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import anyio
import pytest
from kxen_testing import Channel, running
from remote_support import REMOTE_OFF, REMOTE_PLUGINS, SDK_TOOLS, WAIT, remote, status_of

from kxen_core.cli.command import main as kxen_main
from kxen_core.config import load_config
from kxen_core.runtime.remote_ack import ACKNOWLEDGE_STEP, NOT_ACKNOWLEDGED

pytestmark = pytest.mark.anyio

UNUSED = "http://127.0.0.1:9"  # nothing here is dialled: kxen remote on contacts no server


def _acknowledged(kxen_home, ws):
    return load_config(kxen_home.path, ws).settings.mcp.remote_acknowledged


def test_remote_on_without_a_terminal_refuses_and_writes_nothing(kxen_home, ws, capsys):
    kxen_home.write_settings(REMOTE_OFF)
    kxen_home.write_servers({"r": remote(f"{UNUSED}/mcp")})
    before = (kxen_home.path / "config.toml").read_bytes()
    assert kxen_main(["--home", str(kxen_home.path), "--workspace", str(ws), "remote", "on"]) == 2
    out, err = capsys.readouterr()
    assert "remote MCP stays off" in err and "kxen remote on --yes" in err and "operator" in err
    assert "r" in out and "127.0.0.1" in out  # the server that needs the confirmation is listed
    assert (kxen_home.path / "config.toml").read_bytes() == before


def test_remote_on_yes_records_each_canonical_url(kxen_home, ws, capsys):
    kxen_home.write_settings(REMOTE_OFF)
    kxen_home.write_servers(
        {
            "r": remote("HTTP://127.0.0.1:9/mcp#frag"),  # recorded in its canonical form
            "q": remote(f"{UNUSED}/mcp?key=s3cr3t-value"),  # a query may hold a secret: a digest
        }
    )
    assert kxen_main(["--home", str(kxen_home.path), "--workspace", str(ws), "remote", "on", "--yes"]) == 0
    assert "remote MCP is on" in capsys.readouterr().out
    keys = _acknowledged(kxen_home, ws)
    assert "http://127.0.0.1:9/mcp" in keys
    assert len(keys) == 2 and any(k.startswith("sha256:") for k in keys)
    assert "s3cr3t-value" not in (kxen_home.path / "config.toml").read_text()
    assert load_config(kxen_home.path, ws).settings.mcp.remote_enabled is True


def test_remote_on_asks_each_server_on_a_terminal(kxen_home, ws):
    """On a real terminal (a pty): each remote server is asked about; a yes records it, a no leaves
    it off, and the switch is on."""
    import pty

    kxen_home.write_settings(REMOTE_OFF)
    kxen_home.write_servers({"a": remote(f"{UNUSED}/a"), "b": remote(f"{UNUSED}/b")})
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "200"}
    argv = [sys.executable, "-m", "kxen_core.cli", "--home", str(kxen_home.path), "--workspace", str(ws)]
    proc = subprocess.Popen([*argv, "remote", "on"], stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    seen = b""

    def read_until(marker: bytes, seconds: float = 60) -> None:
        nonlocal seen
        end = time.monotonic() + seconds
        while time.monotonic() < end and marker not in seen:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                seen += chunk

    try:
        read_until(b"[y/N] ")
        assert b"a (http://127.0.0.1:9/a)" in seen and b"operates" in seen, seen[-2000:]
        os.write(master, b"y\n")
        read_until(b"b (http://127.0.0.1:9/b)")
        read_until(b"[y/N] ", 10)
        os.write(master, b"n\n")
        read_until(b"stays off")
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        os.close(master)
    assert proc.returncode == 0, seen[-2000:]
    assert b"remote MCP is on" in seen and b"b: stays off (not confirmed)" in seen
    assert _acknowledged(kxen_home, ws) == ["http://127.0.0.1:9/a"]


@pytest.mark.peer
async def test_a_changed_or_added_server_waits_for_its_confirmation(kxen_home, ws, peers):
    """Real SDK peer on loopback: confirmed through the switch it runs; a URL change, or a second
    server added later, stays off with the reason and next step until acknowledge_remote; turning
    remote off stops them at once."""
    url, kind = peers.sdk("stateful")
    kxen_home.write_settings(REMOTE_OFF)
    kxen_home.write_servers({"r": remote(url, kind)})
    yes = Channel(approved=True)
    async with running(kxen_home, ws, yes, allow=REMOTE_PLUGINS) as rt:
        with anyio.fail_after(WAIT):
            assert await rt.set_remote_enabled(True) is True
            assert await rt.wait_ready()
        assert status_of(rt, "r")["tools"] == len(SDK_TOOLS)
        assert [s["acknowledged"] for s in rt.remote_servers()] == [True]

        changed = url.replace("127.0.0.1", "localhost")  # the same peer, another canonical URL
        kxen_home.write_servers({"r": remote(changed, kind), "later": remote(url, kind)})
        with anyio.fail_after(WAIT):
            await rt.reload()
            assert await rt.wait_ready()
        r, later = status_of(rt, "r"), status_of(rt, "later")
        assert (r["state"], r["error"], r["next"]) == ("disabled", NOT_ACKNOWLEDGED, ACKNOWLEDGE_STEP)
        assert later["state"] == "ready"  # its URL is the confirmed one

        with anyio.fail_after(WAIT):
            await rt.acknowledge_remote(["r"])
            assert await rt.wait_ready()
            result = await rt.call_tool("r__add", {"a": 20, "b": 22})
        assert status_of(rt, "r")["state"] == "ready" and result["structuredContent"] == {"result": 42}
        assert [r.kind for r in yes.requests] == ["remote_enable", "remote_enable"]

        with anyio.fail_after(WAIT):
            assert await rt.set_remote_enabled(False) is False
        assert {status_of(rt, n)["state"] for n in ("r", "later")} == {"disabled"}


async def test_a_denied_confirmation_writes_nothing(kxen_home, ws):
    kxen_home.write_settings(REMOTE_OFF.replace("[mcp]", "[mcp]\nremote_enabled = true\nremote_acknowledged = []"))
    kxen_home.write_servers({"r": remote(f"{UNUSED}/mcp")})
    before = (kxen_home.path / "config.toml").read_bytes()
    no = Channel(approved=False, reason="not today")
    async with running(kxen_home, ws, no, allow=REMOTE_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert (s["state"], s["error"], s["next"]) == ("disabled", NOT_ACKNOWLEDGED, ACKNOWLEDGE_STEP)
        with anyio.fail_after(WAIT), pytest.raises(Exception, match="stay off: not today"):
            await rt.acknowledge_remote(["r"])
        with pytest.raises(Exception, match="not configured remote servers: nope"):
            await rt.acknowledge_remote(["nope"])
    assert (kxen_home.path / "config.toml").read_bytes() == before


def test_mcp_status_names_the_unconfirmed_server_and_its_next_step(kxen_home, ws, capsys):
    kxen_home.write_settings(REMOTE_OFF.replace("[mcp]", "[mcp]\nremote_enabled = true\nremote_acknowledged = []"))
    kxen_home.write_servers({"r": remote(f"{UNUSED}/mcp")})
    kxen_main(["--home", str(kxen_home.path), "--workspace", str(ws), "mcp", "status", "--wait", "10"])
    out = capsys.readouterr().out
    assert "not confirmed" in out and "kxen remote on" in out


def test_a_bad_acknowledgement_names_the_file_and_key(kxen_home, ws):
    kxen_home.write_settings('[mcp]\nremote_acknowledged = ["ftp://x"]\n')
    with pytest.raises(Exception, match=r"config\.toml.*remote_acknowledged\[0\].*canonical URL"):
        load_config(kxen_home.path, ws)


def test_config_set_does_not_turn_remote_on_around_the_confirmation(kx, kxen_home):
    kxen_home.write_settings(REMOTE_OFF)
    before = (kxen_home.path / "config.toml").read_bytes()
    code, _, err = kx("config", "set", "mcp.remote_enabled", "true")
    assert code == 2 and "mcp.remote_enabled" in err and "kxen remote on" in err
    assert (kxen_home.path / "config.toml").read_bytes() == before
    code, _, _ = kx("config", "set", "mcp.remote_enabled", "false")
    assert code == 0


def test_mcp_plan_names_the_unconfirmed_server_and_its_next_step(kx, kxen_home, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "http")
    kxen_home.write_settings(REMOTE_OFF.replace("[mcp]", "[mcp]\nremote_enabled = true\nremote_acknowledged = []"))
    kxen_home.write_servers({"r": remote(f"{UNUSED}/mcp")})
    code, out, _ = kx("mcp", "plan", "--json")
    (row,) = json.loads(out)["servers"]
    assert code == 0 and (row["start"], row["state"]) == (False, "disabled")
    assert row["reason"] == f"{NOT_ACKNOWLEDGED}; next: {ACKNOWLEDGE_STEP}"

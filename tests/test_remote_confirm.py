"""The remote-MCP confirmation: before a remote server runs, the user confirms its operator, data
retention and access scope; the confirmation is recorded per canonical URL in the user's
config.toml, and a server added later or whose URL changed stays off until it is confirmed.
``kxen remote on`` asks on a terminal, takes ``--yes`` without one, and refuses otherwise. A switch
written by hand (``remote_enabled = true`` and no ``remote_acknowledged`` key) confirms nothing."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import anyio
import pytest
from kxen_testing import Channel, mem, running
from remote_support import (
    REMOTE_OFF,
    REMOTE_ON,
    REMOTE_PLUGINS,
    SDK_TOOLS,
    WAIT,
    local_http,
    remote,
    status_of,
    streamable_responder,
    text_of,
)

from kxen_core.cli.command import main as kxen_main
from kxen_core.config import load_config
from kxen_core.errors import ServerNotReady
from kxen_core.runtime.admission import admit
from kxen_core.runtime.remote_ack import ACKNOWLEDGE_STEP, NOT_ACKNOWLEDGED, acknowledged, remote_servers
from kxen_core.runtime.states import State

pytestmark = pytest.mark.anyio

UNUSED = "http://127.0.0.1:9"  # nothing here is dialled: kxen remote on contacts no server
#: the switch on and nothing confirmed: written by hand (no ``remote_acknowledged`` key), or an empty list
UNCONFIRMED = {"hand-written": REMOTE_ON, "empty list": REMOTE_ON + "remote_acknowledged = []\n"}


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


@pytest.mark.parametrize("settings", UNCONFIRMED.values(), ids=UNCONFIRMED.keys())
def test_mcp_status_names_the_unconfirmed_server_and_its_next_step(kx, kxen_home, monkeypatch, settings):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "http")
    kxen_home.write_settings(settings)
    kxen_home.write_servers({"r": remote(f"{UNUSED}/mcp")})
    code, out, _ = kx("mcp", "status", "--wait", "10")
    assert code == 0 and "not confirmed" in out and f"next: {ACKNOWLEDGE_STEP}" in out
    code, out, _ = kx("mcp", "status", "--json", "--wait", "10")
    (row,) = json.loads(out)["servers"]
    assert code == 0 and (row["state"], row["error"], row["next"]) == ("disabled", NOT_ACKNOWLEDGED, ACKNOWLEDGE_STEP)
    assert "kxen remote on" in row["next"]  # a step a person can run


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


@pytest.mark.parametrize("settings", UNCONFIRMED.values(), ids=UNCONFIRMED.keys())
def test_mcp_plan_names_the_unconfirmed_server_and_its_next_step(kx, kxen_home, monkeypatch, settings):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "http")
    kxen_home.write_settings(settings)
    kxen_home.write_servers({"r": remote(f"{UNUSED}/mcp")})
    code, out, _ = kx("mcp", "plan", "--json")
    (row,) = json.loads(out)["servers"]
    assert code == 0 and (row["start"], row["state"]) == (False, "disabled")
    assert row["reason"] == f"{NOT_ACKNOWLEDGED}; next: {ACKNOWLEDGE_STEP}"


# --- a switch written by hand confirms nothing (fail closed) -------------------------------------------


def test_a_hand_written_switch_confirms_no_remote_server(kxen_home, ws, fakes):
    """``remote_enabled = true`` and no ``remote_acknowledged`` key at all: no remote server is
    confirmed, as with an empty list (a local server needs no confirmation)."""
    fakes.add("f", tools={})
    kxen_home.write_settings(REMOTE_ON)
    kxen_home.write_servers({"r": remote(f"{UNUSED}/mcp"), "q": remote(f"{UNUSED}/mcp?k=v"), "local": mem("f")})
    config = load_config(kxen_home.path, ws)
    assert config.settings.mcp.remote_acknowledged is None
    assert [acknowledged(config, config.servers[n]) for n in ("r", "q", "local")] == [False, False, True]
    assert [(r["name"], r["acknowledged"]) for r in remote_servers(config)] == [("q", False), ("r", False)]
    refused = admit(config, config.servers["r"])
    assert (refused.run, refused.state, refused.error) == (None, State.DISABLED, NOT_ACKNOWLEDGED)
    assert admit(config, config.servers["local"]).run is config.servers["local"]


async def test_a_hand_written_switch_runs_a_remote_server_only_once_it_is_confirmed(kxen_home, ws):
    """A real MCP server on 127.0.0.1 behind a switch written by hand: it stays disabled with the
    reason and the next step and is never contacted; ``set_remote_enabled(True)`` has nothing to do
    (the switch is on); ``acknowledge_remote`` through an approving channel confirms it and it runs."""
    yes = Channel(approved=True)
    async with local_http(streamable_responder("never", 500, False)) as server:
        url = f"{server.base}/mcp"
        kxen_home.write_settings(REMOTE_ON)
        kxen_home.write_servers({"r": remote(url)})
        async with running(kxen_home, ws, yes, allow=REMOTE_PLUGINS) as rt:
            s = status_of(rt, "r")
            assert (s["state"], s["error"], s["next"]) == ("disabled", NOT_ACKNOWLEDGED, ACKNOWLEDGE_STEP)
            with pytest.raises(ServerNotReady) as refused:
                await rt.call_tool("ping_tool", {}, server="r")
            assert refused.value.state == "disabled" and "kxen remote on" in (refused.value.reason or "")
            with anyio.fail_after(WAIT):
                assert await rt.set_remote_enabled(True) is True  # already on: nothing asked, nothing confirmed
            assert status_of(rt, "r")["state"] == "disabled" and yes.requests == []
            assert server.accepted == 0  # nothing was sent to it

            with anyio.fail_after(WAIT):
                assert await rt.acknowledge_remote(["r"]) == [url]
                assert await rt.wait_ready()
                result = await rt.call_tool("ping_tool", {}, server="r")
            assert status_of(rt, "r")["state"] == "ready" and text_of(result) == "pong"
            assert [r.kind for r in yes.requests] == ["remote_enable"]
        assert server.accepted > 0
    assert load_config(kxen_home.path, ws).settings.mcp.remote_acknowledged == [url]


def test_kxen_remote_on_yes_confirms_the_servers_of_a_hand_written_switch(kx, kxen_home, sdk_peer, monkeypatch):
    """The real SDK server on loopback, through the commands a person runs: ``kxen mcp status``
    shows it disabled with the reason and ``kxen remote on``; after ``kxen remote on --yes`` it is ready."""
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "http")
    url = sdk_peer("stateful")
    kxen_home.write_settings(REMOTE_ON)
    kxen_home.write_servers({"r": remote(url)})
    code, out, _ = kx("mcp", "status", "--json", "--wait", "10")
    (row,) = json.loads(out)["servers"]
    assert code == 0 and (row["state"], row["error"], row["next"]) == ("disabled", NOT_ACKNOWLEDGED, ACKNOWLEDGE_STEP)

    code, out, _ = kx("remote", "on", "--yes")
    assert code == 0 and "remote MCP is on" in out and url in out  # the server it confirmed is listed
    assert load_config(kxen_home.path, kxen_home.path).settings.mcp.remote_acknowledged == [url]
    code, out, _ = kx("mcp", "status", "--json", "--wait", str(WAIT))
    (row,) = json.loads(out)["servers"]
    assert code == 0 and (row["state"], row["tools"]) == ("ready", len(SDK_TOOLS)), row

"""The token store's edges through the Runtime and the CLI against the OAuth peer
(tests/peers/auth_peer.py): a store readable by others is repaired and the person is told so
(`kxen mcp status`, `kxen mcp login`, the server's note and diagnostics), and a store directory
others can write is refused with the reason and the next step. The twins of
plugins/oauth/tests/test_oauth_store.py and test_oauth_engine.py's store cases."""

from __future__ import annotations

import json
import os
import stat

import pytest
from kxen_testing import running
from oauth_support import OAUTH_PLUGINS, Follower, auth_peer, peer_stats, store_file
from remote_support import remote, remote_on, status_of
from test_auth_oauth_twin import follow_sync

pytestmark = pytest.mark.anyio


async def sign_in(kxen_home, ws, url: str) -> None:
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, Follower(), servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready", status_of(rt, "r").get("error")


async def test_a_store_readable_by_others_is_repaired_and_the_status_says_so(kxen_home, ws, start_peer):
    url, _ = auth_peer(start_peer)
    await sign_in(kxen_home, ws, url)
    os.chmod(store_file(), 0o644)
    async with running(kxen_home, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert s["state"] == "ready", s
        assert "was open to others (mode 0644): kxen set it to 0600" in (s["note"] or ""), s
        assert any("0644" in d for d in s["diagnostics"]), s
    assert stat.S_IMODE(store_file().stat().st_mode) == 0o600


@pytest.fixture
def cli_oauth(kx, kxen_home, monkeypatch, start_peer):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", ",".join(OAUTH_PLUGINS))
    url, _ = auth_peer(start_peer)
    kxen_home.write_settings(remote_on(url))
    kxen_home.write_servers({"r": remote(url)})
    return kx, url


def test_kxen_mcp_status_and_login_tell_the_repair(cli_oauth, monkeypatch):
    import webbrowser

    kx, url = cli_oauth
    monkeypatch.setattr(webbrowser, "open", follow_sync)
    code, out, err = kx("mcp", "login", "r", "--timeout", "60")
    assert code == 0 and "signed in to r" in out, (out, err)
    assert "note:" not in out + err  # nothing was repaired
    os.chmod(store_file(), 0o644)
    code, out, err = kx("mcp", "status", "--wait", "30")
    assert code == 0, (out, err)
    assert "note: the OAuth token store" in out and "(mode 0644): kxen set it to 0600" in out, out
    os.chmod(store_file(), 0o640)
    code, out, err = kx("mcp", "login", "r", "--timeout", "60")
    assert code == 0, (out, err)
    assert "kxen: note: the OAuth token store" in err and "(mode 0640): kxen set it to 0600" in err, err
    assert peer_stats(url)["authorizations"] == 2


def test_a_store_directory_others_can_write_is_refused_with_the_next_step(cli_oauth, _kxen_data_dir):
    kx, url = cli_oauth
    os.chmod(_kxen_data_dir, 0o777)
    try:
        code, out, err = kx("mcp", "status", "--json", "--wait", "30")
        (row,) = json.loads(out)["servers"]
        assert (code, row["state"]) == (1, "needs_login"), row
        assert str(_kxen_data_dir) in row["error"] and "can be written by others (mode 0777): refused" in row["error"]
        assert "KXEN_DATA_DIR" in row["next"], row
        code, out, err = kx("mcp", "login", "r", "--no-browser", "--timeout", "5")
        assert code == 1 and "can be written by others" in err, (out, err)
    finally:
        os.chmod(_kxen_data_dir, 0o700)
    assert not store_file().exists()  # nothing was written there
    assert peer_stats(url)["registrations"] == 0

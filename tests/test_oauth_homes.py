"""kxen-oauth against the OAuth peer (tests/peers/auth_peer.py) with more than one kxen home and a
token endpoint that fails for a while: the twins of plugins/oauth/tests/test_oauth_engine.py's home
binding and plugins/oauth/tests/test_oauth_refresh.py's transient failures."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from kxen_testing import running
from kxen_testing.pytest_plugin import Home
from oauth_support import OAUTH_PLUGINS, Follower, auth_peer, peer_stats, store_file, stored
from remote_support import remote, remote_on, status_of

pytestmark = pytest.mark.anyio


async def sign_in(home: Home, ws, url: str) -> None:
    home.write_settings(remote_on(url))
    async with running(home, ws, Follower(), servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready", status_of(rt, "r").get("error")


async def test_a_demo_home_never_reads_the_real_homes_sign_in(kxen_home, ws, start_peer, tmp_path):
    url, _ = auth_peer(start_peer)
    await sign_in(kxen_home, ws, url)
    demo = Home(tmp_path / "demo-home")  # kxen --home /tmp/demo, with the same data directory
    demo.path.mkdir()
    demo.write_settings(remote_on(url))
    async with running(demo, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert (s["state"], s["next"]) == ("needs_login", "kxen mcp login r"), s
        assert await rt.logout("r") is False  # nothing of the demo home's to sign out
    assert peer_stats(url)["authorizations"] == 1  # the demo home got no token of its own either
    async with running(kxen_home, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready"  # the real home's sign-in is still there
    # the demo home signs in on its own: two entries, one per home
    await sign_in(demo, ws, url)
    homes = sorted(t["home"] for t in stored()["tokens"])
    assert homes == sorted([str(kxen_home.path.resolve()), str(demo.path.resolve())])


def outage(url: str, n: int) -> None:
    base = url.rsplit("/", 1)[0]
    request = urllib.request.Request(f"{base}/_peer/outage?n={n}", method="POST", data=b"")
    with urllib.request.urlopen(request, timeout=10):  # 127.0.0.1 only
        pass


async def test_a_token_endpoint_that_fails_keeps_the_refresh_token(kxen_home, ws, start_peer):
    url, _ = auth_peer(start_peer)
    await sign_in(kxen_home, ws, url)
    doc = stored()
    refresh_token = doc["tokens"][0]["refreshToken"]
    doc["tokens"][0]["expiresAt"] = time.time() - 5
    store_file().write_text(json.dumps(doc))
    outage(url, 1)
    async with running(kxen_home, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert s["state"] == "needs_login" and "HTTP 503" in s["error"], s
        assert "the refresh token is kept" in s["error"], s
    assert peer_stats(url)["outages"] == 1
    assert stored()["tokens"][0]["refreshToken"] == refresh_token  # kept through the outage
    async with running(kxen_home, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready", status_of(rt, "r")  # refreshed with it, no sign-in
    stats = peer_stats(url)
    assert (stats["authorizations"], stats["refreshes"]) == (1, 1)

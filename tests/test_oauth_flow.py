"""kxen-oauth end to end against the OAuth peer (tests/peers/auth_peer.py: the official SDK's
authorization server and a protected MCP server), through the Runtime and the http transport."""

from __future__ import annotations

import json
import stat
import time

import pytest

from kxen_testing import running
from oauth_support import OAUTH_PLUGINS, SETTINGS, Follower, auth_peer, peer_stats, store_file, stored, token_hash
from remote_support import remote, status_of

pytestmark = pytest.mark.anyio


def text_of(result: dict) -> str:
    return "".join(c.get("text", "") for c in result.get("content", []))


async def test_first_call_discovers_registers_signs_in_and_succeeds(kxen_home, ws, start_peer):
    url, _ = auth_peer(start_peer)
    kxen_home.write_settings(SETTINGS)
    follower = Follower()
    async with running(kxen_home, ws, follower, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert s["state"] == "ready", (s.get("error"), s.get("next"))
        assert text_of(await rt.call_tool("r__whoami", {})) == "signed in"
    stats = peer_stats(url)
    assert (stats["registrations"], stats["authorizations"], stats["exchanges"], stats["refreshes"]) == (1, 1, 1, 0)
    assert len(follower.urls) == 1 and "code_challenge_method=S256" in follower.urls[0]
    assert "resource=http%3A%2F%2F127.0.0.1%3A" in follower.urls[0]
    assert follower.landed[0].startswith("http://127.0.0.1:") and "/callback?" in follower.landed[0]
    mode = stat.S_IMODE(store_file().stat().st_mode)
    assert mode == 0o600, oct(mode)
    doc = stored()
    (token,) = doc["tokens"]
    assert (token["configScope"], token["server"], token["resource"]) == ("user", "r", url)
    assert token["expiresAt"] > time.time() + 3000  # absolute time
    assert token_hash(token["accessToken"]) in stats["bearers"]
    assert [c["issuer"] for c in doc["clients"]] == [url.rsplit("/", 1)[0] + "/"]


async def test_without_an_authorize_url_taker_the_server_needs_login(kxen_home, ws, start_peer):
    url, _ = auth_peer(start_peer)
    kxen_home.write_settings(SETTINGS)
    async with running(kxen_home, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert (s["state"], s["next"]) == ("needs_login", "kxen mcp login r"), s
        assert "sign-in is needed" in s["error"], s
    assert peer_stats(url)["authorizations"] == 0

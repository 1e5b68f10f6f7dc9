"""kxen-oauth end to end against the OAuth peer (tests/peers/auth_peer.py: the official SDK's
authorization server and a protected MCP server), through the Runtime and the http transport."""

from __future__ import annotations

import json
import stat
import time

import pytest
from kxen_testing import running
from oauth_support import OAUTH_PLUGINS, Follower, auth_peer, peer_stats, store_file, stored, token_hash
from remote_support import remote, remote_on, status_of

pytestmark = pytest.mark.anyio


def text_of(result: dict) -> str:
    return "".join(c.get("text", "") for c in result.get("content", []))


async def test_first_call_discovers_registers_signs_in_and_succeeds(kxen_home, ws, start_peer):
    url, _ = auth_peer(start_peer)
    kxen_home.write_settings(remote_on(url))
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
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert (s["state"], s["next"]) == ("needs_login", "kxen mcp login r"), s
        assert "sign-in is needed" in s["error"], s
    assert peer_stats(url)["authorizations"] == 0


async def signed_in(kxen_home, ws, url: str) -> dict:
    """Sign in once through a Runtime with the follower; the stored token record."""
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, Follower(), servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready", status_of(rt, "r").get("error")
    (token,) = stored()["tokens"]
    return token


def force_expiry() -> None:
    """Mark the stored token expired (as if its lifetime had passed)."""
    doc = stored()
    doc["tokens"][0]["expiresAt"] = time.time() - 5
    store_file().write_text(json.dumps(doc))
    store_file().chmod(0o600)


async def test_a_forced_expiry_refreshes_without_a_login_and_keeps_the_rotated_token(kxen_home, ws, start_peer):
    url, _ = auth_peer(start_peer)
    first = await signed_in(kxen_home, ws, url)
    force_expiry()
    async with running(kxen_home, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:  # nobody to sign in
        assert status_of(rt, "r")["state"] == "ready", status_of(rt, "r").get("error")
        assert text_of(await rt.call_tool("r__whoami", {})) == "signed in"
    stats = peer_stats(url)
    assert (stats["authorizations"], stats["refreshes"]) == (1, 1)
    (now,) = stored()["tokens"]
    assert now["accessToken"] != first["accessToken"]
    assert now["refreshToken"] != first["refreshToken"]  # the peer rotates: the new one is stored
    assert now["expiresAt"] > time.time() + 3000


async def test_a_401_for_a_token_the_server_dropped_refreshes_once(kxen_home, ws, start_peer):
    from oauth_support import peer_expire

    url, _ = auth_peer(start_peer)
    await signed_in(kxen_home, ws, url)
    async with running(kxen_home, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready"
        peer_expire(url)  # the server forgets every access token: the next request gets 401
        assert text_of(await rt.call_tool("r__whoami", {})) == "signed in"
    stats = peer_stats(url)
    assert (stats["authorizations"], stats["refreshes"]) == (1, 1)


async def test_a_refused_refresh_needs_login_with_the_reason(kxen_home, ws, start_peer):
    url, _ = auth_peer(start_peer)
    await signed_in(kxen_home, ws, url)
    doc = stored()
    doc["tokens"][0]["expiresAt"] = time.time() - 5
    doc["tokens"][0]["refreshToken"] = "not-a-refresh-token-the-peer-knows"
    store_file().write_text(json.dumps(doc))
    async with running(kxen_home, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert (s["state"], s["next"]) == ("needs_login", "kxen mcp login r"), s
        assert "refresh" in s["error"] and "invalid_grant" in s["error"], s
        assert "not-a-refresh-token" not in json.dumps(rt.status())
    assert stored()["tokens"] == []  # a refused refresh token is dropped, not tried again


async def test_an_older_shape_entry_is_never_used_and_says_why(kxen_home, ws, start_peer):
    url, _ = auth_peer(start_peer)
    old = "OLD-SHAPE-TOKEN-5b1e7c"
    origin = url.rsplit("/", 1)[0]
    store_file().parent.mkdir(parents=True, exist_ok=True)
    store_file().write_text(json.dumps({"r": {"access_token": old}, origin: {"access_token": old}}))
    store_file().chmod(0o600)
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, servers={"r": remote(url, oauth={})}, allow=OAUTH_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert (s["state"], s["next"]) == ("needs_login", "kxen mcp login r"), s
        assert "older shape" in s["error"] and old not in json.dumps(rt.status()), s
    assert token_hash(old) not in peer_stats(url)["bearers"]  # never sent
    # a sign-in replaces it with an entry bound to the exact URL
    async with running(kxen_home, ws, Follower(), servers={"r": remote(url, oauth={})}, allow=OAUTH_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready", status_of(rt, "r").get("error")
    (token,) = stored()["tokens"]
    assert token["resource"] == url and token["accessToken"] != old


async def test_the_split_peer_with_a_path_prefixed_issuer_and_a_login_form(kxen_home, ws, start_peer):
    url, as_port = auth_peer(start_peer, split=True)
    kxen_home.write_settings(remote_on(url))
    follower = Follower()
    async with running(kxen_home, ws, follower, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready", status_of(rt, "r").get("error")
        assert text_of(await rt.call_tool("r__add", {"a": 2, "b": 3})) == "5"
    assert follower.urls[0].startswith(f"http://127.0.0.1:{as_port}/tenant/authorize?")
    doc = stored()
    assert [c["issuer"] for c in doc["clients"]] == [f"http://127.0.0.1:{as_port}/tenant"]


async def test_a_wrong_password_at_the_login_form_leaves_the_server_waiting_for_a_login(kxen_home, ws, start_peer):
    url, _ = auth_peer(start_peer, split=True)
    kxen_home.write_settings(remote_on(url))
    follower = Follower(password="wrong")
    async with running(kxen_home, ws, follower, servers={"r": remote(url)}, allow=OAUTH_PLUGINS, wait=60) as rt:
        s = status_of(rt, "r")
        assert (s["state"], s["next"]) == ("needs_login", "kxen mcp login r"), s
        assert "the sign-in through plugin" in s["error"], s
    assert stored().get("tokens", []) == []


class Flooder(Follower):
    """A browser that comes back only after 300 forged answers (another ``state``) and other
    requests reached the flow's listener: none of them may end the sign-in."""

    async def follow(self, url: str) -> None:
        from urllib.parse import parse_qs, urlsplit

        import anyio

        redirect = parse_qs(urlsplit(url).query)["redirect_uri"][0]
        port = urlsplit(redirect).port

        def flood() -> list[int]:
            import http.client

            codes = []
            for i in range(300):
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                try:
                    conn.request("GET", "/callback?state=forged&code=evil" if i % 2 else "/favicon.ico")
                    codes.append(conn.getresponse().status)
                finally:
                    conn.close()
            return codes

        self.flood_codes = await anyio.to_thread.run_sync(flood)
        await super().follow(url)


async def test_a_flood_at_the_listener_does_not_end_the_sign_in(kxen_home, ws, start_peer):
    url, _ = auth_peer(start_peer)
    kxen_home.write_settings(remote_on(url))
    flooder = Flooder()
    async with running(kxen_home, ws, flooder, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert s["state"] == "ready", (s.get("error"), s.get("next"))
        assert text_of(await rt.call_tool("r__whoami", {})) == "signed in"
    assert sorted(set(flooder.flood_codes)) == [400, 404]
    stats = peer_stats(url)
    assert (stats["authorizations"], stats["exchanges"]) == (1, 1)

"""The twin of plugins/oauth/tests/test_oauth_reuse.py against the OAuth peer (tests/peers/auth_peer.py):
a running Runtime sends its stored token without asking the engine while nothing changed, and on the
next request sees what did: a token another process refreshed, the token falling due by the clock,
a 401 for a token the server stopped taking, the environment pointing at another token store."""

from __future__ import annotations

import json
import time

import anyio
import pytest
from kxen_oauth import hooks
from kxen_oauth.refresh import REFRESH_AHEAD
from kxen_testing import running
from oauth_support import (
    OAUTH_PLUGINS,
    auth_peer,
    peer_expire,
    peer_stats,
    run_second_process,
    store_file,
    stored,
    token_hash,
)
from remote_support import remote, status_of, until
from test_oauth_processes import finish, sign_in

from kxen_core.errors import AuthRequired

pytestmark = pytest.mark.anyio


async def whoami(rt, n: int) -> None:
    for _ in range(n):
        with anyio.fail_after(30):
            result = await rt.call_tool("r__whoami", {})
        assert result["content"][0]["text"] == "signed in"


def token() -> str:
    (record,) = stored()["tokens"]
    return record["accessToken"]


def bearers(url: str) -> list[str]:
    return peer_stats(url)["bearers"]


def asks(monkeypatch) -> list[object]:
    """Every ask of the engine from now on (the transport asks it only when its answer's check failed)."""
    seen: list[object] = []
    engine = hooks.engine()
    lookup = engine.lookup

    async def counted(server, request):
        seen.append(request)
        return await lookup(server, request)

    monkeypatch.setattr(engine, "lookup", counted)
    return seen


async def test_the_stored_token_is_sent_unasked_and_a_refresh_by_another_process_is_seen(
    kxen_home, ws, start_peer, monkeypatch
):
    url, _ = auth_peer(start_peer)
    await sign_in(kxen_home, ws, {"r": remote(url)})
    first = token()
    async with running(kxen_home, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        seen = asks(monkeypatch)
        await whoami(rt, 10)
        assert seen == []  # held since the connection's first request: the engine was not asked per call
        doc = stored()
        doc["tokens"][0]["expiresAt"] = time.time() - 5
        store_file().write_text(json.dumps(doc))  # due: the second process refreshes it
        code, out = await finish(run_second_process(kxen_home.path, ws, "r", "whoami"))
        assert (code, out["text"]) == (0, "signed in"), out
        second = token()
        assert second != first
        before = len(bearers(url))
        await whoami(rt, 5)
        assert len(seen) == 1  # the file changed: asked once, then held again
    sent = bearers(url)[before:]
    assert len(sent) >= 5 and set(sent) == {token_hash(second)}  # never the old token after the refresh
    assert peer_stats(url)["refreshes"] == 1  # the second process's alone


async def test_a_token_falling_due_by_the_clock_is_refreshed_before_it_is_sent(kxen_home, ws, start_peer, monkeypatch):
    url, _ = auth_peer(start_peer)
    await sign_in(kxen_home, ws, {"r": remote(url)})
    first = token()
    (record,) = stored()["tokens"]
    async with running(kxen_home, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        await whoami(rt, 3)
        stamp = store_file().stat().st_mtime_ns
        real = time.time
        ahead = record["expiresAt"] - REFRESH_AHEAD + 1 - real()  # the clock moves into the refresh window
        monkeypatch.setattr(time, "time", lambda: real() + ahead)
        before = len(bearers(url))
        await whoami(rt, 3)
    assert stamp != store_file().stat().st_mtime_ns  # the refresh stored a new token; nothing else wrote
    assert peer_stats(url)["refreshes"] == 1
    second = token()
    assert second != first
    sent = bearers(url)[before:]
    assert len(sent) >= 3 and set(sent) == {token_hash(second)}


async def test_a_401_for_the_held_token_refreshes_and_the_new_one_is_held(kxen_home, ws, start_peer, monkeypatch):
    url, _ = auth_peer(start_peer)
    await sign_in(kxen_home, ws, {"r": remote(url)})
    first = token()
    async with running(kxen_home, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        await whoami(rt, 3)
        peer_expire(url)  # the server stops taking every token it issued
        before = len(bearers(url))
        seen = asks(monkeypatch)
        await whoami(rt, 6)
        assert [r.challenge is not None for r in seen] == [True, False]  # the challenge, then held again
    second = token()
    assert second != first and peer_stats(url)["refreshes"] == 1
    sent = bearers(url)[before:]
    assert sent[0] == token_hash(first) and len(sent) >= 7 and set(sent[1:]) == {token_hash(second)}


async def test_another_token_store_in_the_environment_is_seen_on_the_next_request(
    kxen_home, ws, start_peer, monkeypatch, tmp_path
):
    url, _ = auth_peer(start_peer)
    await sign_in(kxen_home, ws, {"r": remote(url)})
    async with running(kxen_home, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        await whoami(rt, 3)
        before = len(bearers(url))
        monkeypatch.setenv("KXEN_DATA_DIR", str(tmp_path / "empty"))  # a store with no token in it
        with pytest.raises(AuthRequired), anyio.fail_after(30):
            await rt.call_tool("r__whoami", {})
        await until(lambda: status_of(rt, "r")["state"] == "needs_login", 30)
    assert len(bearers(url)) == before  # the token of the other store was not sent

"""kxen-oauth across processes, against the OAuth peer: a second process reuses the stored token,
two processes refreshing at once make one refresh and both keep working, and a token is never sent
to another resource (another port or path) than the one it was got for."""

from __future__ import annotations

import json
import time

import anyio
import pytest
from kxen_testing import running
from oauth_support import (
    OAUTH_PLUGINS,
    Follower,
    auth_peer,
    peer_stats,
    run_second_process,
    store_file,
    stored,
    token_hash,
)
from remote_support import REMOTE_ON, remote, remote_on, status_of

pytestmark = pytest.mark.anyio


async def sign_in(kxen_home, ws, servers: dict, name: str = "r") -> None:
    kxen_home.write_settings(remote_on(*servers.values()))
    async with running(kxen_home, ws, Follower(), servers=servers, allow=OAUTH_PLUGINS) as rt:
        assert status_of(rt, name)["state"] == "ready", status_of(rt, name).get("error")


async def finish(proc, timeout: float = 90) -> tuple[int, dict]:
    def wait() -> tuple[int, bytes, bytes]:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err

    code, out, err = await anyio.to_thread.run_sync(wait)
    lines = out.decode().strip().splitlines()
    assert lines, err.decode()[-3000:]
    return code, json.loads(lines[-1])


async def test_a_second_process_reuses_the_stored_token(kxen_home, ws, start_peer):
    url, _ = auth_peer(start_peer)
    await sign_in(kxen_home, ws, {"r": remote(url)})
    code, out = await finish(run_second_process(kxen_home.path, ws, "r", "add", '{"a": 2, "b": 40}'))
    assert (code, out["state"], out["text"]) == (0, "ready", "42"), out
    stats = peer_stats(url)
    assert (stats["registrations"], stats["authorizations"], stats["refreshes"]) == (1, 1, 0)


async def test_two_processes_refreshing_at_once_make_one_refresh_and_both_work(kxen_home, ws, start_peer):
    url, _ = auth_peer(start_peer)
    await sign_in(kxen_home, ws, {"r": remote(url)})
    doc = stored()
    doc["tokens"][0]["expiresAt"] = time.time() - 5  # both find it due
    store_file().write_text(json.dumps(doc))
    procs = [run_second_process(kxen_home.path, ws, "r", "whoami") for _ in range(2)]
    results = [await finish(p) for p in procs]
    assert [(c, o["text"]) for c, o in results] == [(0, "signed in"), (0, "signed in")], results
    stats = peer_stats(url)
    assert (stats["authorizations"], stats["refreshes"]) == (1, 1), stats
    (token,) = stored()["tokens"]
    assert token["expiresAt"] > time.time() + 3000


@pytest.mark.parametrize("change", ["port", "query"])
async def test_a_token_is_never_sent_to_another_resource(kxen_home, ws, start_peer, change):
    url_a, _ = auth_peer(start_peer)
    await sign_in(kxen_home, ws, {"r": remote(url_a)})
    (token,) = stored()["tokens"]
    if change == "port":
        url_b, _ = auth_peer(start_peer)  # the same name, another server
    else:
        url_b = url_a + "?tenant=2"  # the same server with a query: another resource
    kxen_home.write_settings(remote_on(url_b))
    async with running(kxen_home, ws, servers={"r": remote(url_b)}, allow=OAUTH_PLUGINS) as rt:
        s = status_of(rt, "r")
        # nobody to sign in: the token bound to url_a is not used for url_b
        assert (s["state"], s["next"]) == ("needs_login", "kxen mcp login r"), (s["state"], s["phase"], s["error"])
    seen = peer_stats(url_b)["bearers"]
    if change == "port":
        assert token_hash(token["accessToken"]) not in seen and seen == []
    else:
        assert seen.count(token_hash(token["accessToken"])) == peer_stats(url_a)["bearers"].count(
            token_hash(token["accessToken"])
        )


async def test_a_project_server_of_the_same_name_never_gets_the_users_token(kxen_home, ws, start_peer):
    from remote_support import write_project

    url, _ = auth_peer(start_peer)
    await sign_in(kxen_home, ws, {"r": remote(url)})
    before = peer_stats(url)["bearers"]
    kxen_home.write_settings(remote_on(url, settings=f"trusted_workspaces = [{json.dumps(str(ws))}]\n" + REMOTE_ON))
    write_project(ws, {"mcpServers": {"r": {"url": url, "transport": "http"}}})
    async with running(kxen_home, ws, servers={}, allow=OAUTH_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert s["scope"] == "project", s
        assert s["state"] == "needs_login", s
    assert peer_stats(url)["bearers"] == before  # nothing more sent: no token reached it

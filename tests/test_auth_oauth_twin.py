"""The login API, the CLI and the status of a server that needs a sign-in, through the real
kxen-oauth plugin against its OAuth peer (tests/peers/auth_peer.py: the official SDK's
authorization server and a protected MCP server): the twins of test_auth_login / test_auth_cli,
whose sign-in plugin is a fake. The browser is a follower that GETs the authorization URL and
follows its redirects (filling the split peer's login form) to the flow's loopback listener."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from kxen_testing import running
from oauth_support import _FORM, OAUTH_PLUGINS, Follower, auth_peer, peer_stats, stored
from remote_support import remote, remote_on, status_of

from kxen_core import LoginStatus

pytestmark = pytest.mark.anyio


def secrets_of_the_store() -> list[str]:
    """Every token and client secret kxen-oauth stored: none may ever be printed or shown."""
    doc = stored()
    values = [t.get(k) for t in doc.get("tokens", []) for k in ("accessToken", "refreshToken")]
    values += [c.get("clientSecret") for c in doc.get("clients", [])]
    return [v for v in values if isinstance(v, str) and len(v) >= 8]


def assert_no_secret(where: str, text: str, secrets: list[str]) -> None:
    assert secrets, "the store holds no secret: the check would check nothing"
    for value in secrets:
        assert value not in text, f"a stored secret leaked into {where}"


@pytest.mark.parametrize("split", [False, True], ids=["one-port", "split"])
async def test_login_api_signs_in_and_the_server_goes_ready(kxen_home, ws, start_peer, split):
    url, _ = auth_peer(start_peer, split=split)
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert (s["state"], s["phase"], s["next"]) == ("needs_login", "auth", "kxen mcp login r"), s
        started = await rt.login_start("r")
        assert started.server == "r" and "code_challenge_method=S256" in started.url
        assert rt.login_poll(started.flow_id) == LoginStatus("pending")
        with anyio.fail_after(30):
            await Follower().follow(started.url)  # the person, in a browser
            while rt.login_poll(started.flow_id).state == "pending":
                await anyio.sleep(0.02)
        assert rt.login_poll(started.flow_id) == LoginStatus("complete")
        with anyio.fail_after(30):
            assert await rt.wait_ready(30)
        assert status_of(rt, "r")["state"] == "ready", status_of(rt, "r")
        result = await rt.call_tool("r__whoami", {})
        assert result["content"][0]["text"] == "signed in"
        assert_no_secret("status()", json.dumps(rt.status()), secrets_of_the_store())
    assert peer_stats(url)["authorizations"] == 1


async def test_login_api_cancel_stops_the_listener(kxen_home, ws, start_peer):
    url, _ = auth_peer(start_peer)
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, servers={"r": remote(url)}, allow=OAUTH_PLUGINS) as rt:
        started = await rt.login_start("r")
        await rt.login_cancel(started.flow_id)
        assert rt.login_poll(started.flow_id).state == "cancelled"
        # the person comes back too late: the redirect finds no listener, nothing is stored
        with anyio.fail_after(30), pytest.raises(httpx.ConnectError):
            await Follower().follow(started.url)
        assert status_of(rt, "r")["state"] == "needs_login"
    assert stored().get("tokens", []) == []


def follow_sync(url: str) -> bool:
    """What a browser does with the URL (in the worker thread ``webbrowser.open`` runs in)."""
    with httpx.Client(follow_redirects=True, max_redirects=10, timeout=20) as client:
        response = client.get(url)
        form = _FORM.search(response.text)
        if form:
            client.post(
                str(response.url.join(form.group(1))),
                data={"tx": form.group(2), "user": "alice", "password": "wonderland"},
            )
    return True


def test_cli_login_status_and_logout(kx, kxen_home, start_peer, monkeypatch):
    import webbrowser

    monkeypatch.setenv("KXEN_LOAD_PLUGINS", ",".join(OAUTH_PLUGINS))
    url, _ = auth_peer(start_peer, split=True)
    kxen_home.write_settings(remote_on(url))
    kxen_home.write_servers({"r": remote(url)})
    outputs: list[str] = []

    code, out, err = kx("mcp", "status", "--json", "--wait", "30")
    outputs.append(out + err)
    (row,) = json.loads(out)["servers"]
    assert (code, row["state"], row["next"]) == (1, "needs_login", "kxen mcp login r"), row

    monkeypatch.setattr(webbrowser, "open", follow_sync)
    code, out, err = kx("mcp", "login", "r", "--timeout", "60")
    outputs.append(out + err)
    assert code == 0, (out, err)
    assert "To sign in to r, open this URL in a browser:" in out and "signed in to r" in out
    assert "r is ready: 2 tool(s)" in out, out
    secrets = secrets_of_the_store()

    code, out, err = kx("mcp", "call", "r", "whoami", "--wait", "30")
    outputs.append(out + err)
    assert (code, out.strip()) == (0, "signed in"), err
    code, out, err = kx("mcp", "status", "--wait", "30")
    outputs.append(out + err)
    assert code == 0 and "ready" in out, (out, err)

    code, out, err = kx("mcp", "logout", "r")
    outputs.append(out + err)
    assert (code, out.strip()) == (0, "signed out of r: its stored tokens were removed"), err
    assert stored().get("tokens", []) == []
    code, out, err = kx("mcp", "status", "--json", "--wait", "30")
    outputs.append(out + err)
    assert json.loads(out)["servers"][0]["state"] == "needs_login"
    assert_no_secret("the CLI's output", "\n".join(outputs), secrets)

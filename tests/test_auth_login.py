"""The Runtime's login API (login_start / login_poll / login_cancel / logout) with a fake sign-in
flow, against the real SDK server behind a Bearer gate (tests/peers/gated_server.py): a completed
sign-in restarts the server, which goes ready with the new token; cancelling stops the flow; a new
start cancels the old one; a failed sign-in says why."""

from __future__ import annotations

import json

import anyio
import pytest
from auth_support import GOOD, Credentials, SignIn, assert_no_token, gated
from kxen_testing import mem, running, text_result
from remote_support import REMOTE_OFF, REMOTE_PLUGINS, WAIT, remote, remote_on, status_of

from kxen_core import LoginStarted, LoginStatus
from kxen_core.errors import AuthRequired, InvalidArguments, PluginHookError, UnknownTool, Unsupported

pytestmark = pytest.mark.anyio


async def settled(rt, flow_id: str) -> LoginStatus:
    with anyio.fail_after(WAIT):
        while (status := rt.login_poll(flow_id)).state == "pending":
            await anyio.sleep(0.02)
    return status


@pytest.mark.parametrize("mode", ["stateful", "sse"])
async def test_a_completed_sign_in_restarts_the_server_and_it_goes_ready(kxen_home, ws, start_peer, mode):
    url = gated(start_peer, mode)
    creds = Credentials(first=None)
    sign_in = SignIn(creds)
    kxen_home.write_settings(remote_on(url))
    servers = {"r": remote(url, "sse" if mode == "sse" else "http")}
    async with running(kxen_home, ws, creds, sign_in, servers=servers, allow=REMOTE_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert (s["state"], s["next"]) == ("needs_login", "kxen mcp login r"), s
        started = await rt.login_start("r", scopes=["extra"], open_browser=True)
        assert started == LoginStarted(flow_id=started.flow_id, url=sign_in.url, server="r")
        (flow,) = sign_in.flows
        assert (flow.request.scopes, flow.request.open_browser, flow.request.pm) == (("extra",), True, rt.pm)
        assert flow.request.home == kxen_home.path and flow.request.settings is rt.config.settings
        assert rt.login_poll(started.flow_id) == LoginStatus("pending")
        flow.release.set()
        assert await settled(rt, started.flow_id) == LoginStatus("complete")
        assert flow.finished and flow.closed == 1
        with anyio.fail_after(WAIT):
            assert await rt.wait_ready(WAIT)
        assert status_of(rt, "r")["state"] == "ready", status_of(rt, "r")
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("r__echo", {"text": "signed in"})
        assert result["content"][0]["text"] == "signed in"
        assert_no_token("status()", json.dumps(rt.status()))


async def test_cancel_stops_the_flow_and_the_server_keeps_waiting(kxen_home, ws, start_peer):
    url = gated(start_peer)
    creds = Credentials(first=None)
    sign_in = SignIn(creds)
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, creds, sign_in, servers={"r": remote(url)}, allow=REMOTE_PLUGINS) as rt:
        started = await rt.login_start("r")
        await rt.login_cancel(started.flow_id)
        assert rt.login_poll(started.flow_id) == LoginStatus("cancelled", "cancelled")
        (flow,) = sign_in.flows
        assert flow.closed == 1 and not flow.finished
        await rt.login_cancel(started.flow_id)  # again: nothing more happens
        assert flow.closed == 1
        assert status_of(rt, "r")["state"] == "needs_login"


async def test_a_new_start_cancels_the_old_one(kxen_home, ws, start_peer):
    url = gated(start_peer)
    creds = Credentials(first=None)
    sign_in = SignIn(creds)
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, creds, sign_in, servers={"r": remote(url)}, allow=REMOTE_PLUGINS) as rt:
        first = await rt.login_start("r")
        second = await rt.login_start("r")
        assert first.flow_id != second.flow_id
        assert rt.login_poll(first.flow_id) == LoginStatus("cancelled", "a new sign-in was started")
        old, new = sign_in.flows
        assert old.closed == 1 and new.closed == 0
        new.release.set()
        assert (await settled(rt, second.flow_id)).state == "complete"
        assert old.closed == 1 and not old.finished


async def test_a_declined_sign_in_fails_with_its_reason(kxen_home, ws, start_peer):
    url = gated(start_peer)
    creds = Credentials(first=None)
    sign_in = SignIn(creds, deny=True, auto=True)
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, creds, sign_in, servers={"r": remote(url)}, allow=REMOTE_PLUGINS) as rt:
        started = await rt.login_start("r")
        status = await settled(rt, started.flow_id)
        assert status == LoginStatus("failed", "the person declined the sign-in (access_denied)")
        assert sign_in.flows[0].closed == 1
        assert status_of(rt, "r")["state"] == "needs_login"


async def test_logout_forgets_and_restarts_the_server(kxen_home, ws, start_peer):
    url = gated(start_peer)
    creds = Credentials(first=GOOD)
    sign_in = SignIn(creds)
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, creds, sign_in, servers={"r": remote(url)}, allow=REMOTE_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready"
        assert await rt.logout("r", forget_client=True) is True
        assert sign_in.logouts[0].forget_client is True
        with anyio.fail_after(WAIT):
            assert await rt.wait_ready(WAIT)
        assert status_of(rt, "r")["state"] == "needs_login"
        assert await rt.logout("r") is False  # nothing stored any more


async def test_closing_the_runtime_closes_a_pending_sign_in(kxen_home, ws, start_peer):
    url = gated(start_peer)
    creds = Credentials(first=None)
    sign_in = SignIn(creds)
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, creds, sign_in, servers={"r": remote(url)}, allow=REMOTE_PLUGINS) as rt:
        started = await rt.login_start("r")
    assert sign_in.flows[0].closed == 1
    assert rt.login_poll(started.flow_id) == LoginStatus("cancelled", "the runtime closed")


async def test_refusals_before_anything_starts(kxen_home, ws, fakes):
    fakes.add("f", tools={"echo": lambda a: text_result("x")})
    async with running(kxen_home, ws, servers={"m": mem("f")}) as rt:
        with pytest.raises(Unsupported, match="no installed plugin can sign in to server 'm'"):
            await rt.login_start("m")
        with pytest.raises(UnknownTool):
            await rt.login_start("nope")
        with pytest.raises(InvalidArguments):
            rt.login_poll("login-1-000000000000")
        with pytest.raises(InvalidArguments):
            await rt.login_cancel("login-1-000000000000")
        assert await rt.logout("m") is False  # no sign-out plugin: nothing removed


async def test_a_flow_that_cannot_start_is_closed_and_says_why(kxen_home, ws):
    """start() refuses (AuthRequired passes as it is) or breaks (a PluginHookError): closed either way."""
    creds = Credentials(first=None)
    sign_in = SignIn(creds)
    # remote MCP is off: the server is disabled, yet a sign-in can be prepared for it
    kxen_home.write_settings(REMOTE_OFF)
    async with running(
        kxen_home, ws, creds, sign_in, servers={"r": remote("https://mcp.example/mcp")}, allow=REMOTE_PLUGINS
    ) as rt:
        assert status_of(rt, "r")["state"] == "disabled"
        for raised, expected in [
            (AuthRequired("the authorization server does not offer PKCE S256"), AuthRequired),
            (RuntimeError("discovery broke"), PluginHookError),
        ]:
            before = len(sign_in.flows)
            sign_in.start_error = raised
            with pytest.raises(expected) as info:
                await rt.login_start("r")
            assert len(sign_in.flows) == before + 1 and sign_in.flows[-1].closed == 1
            assert "discovery broke" in str(info.value) or "PKCE S256" in str(info.value)


async def test_what_a_sign_in_plugin_notices_reaches_the_login_status_and_a_server_note(kxen_home, ws, start_peer):
    """``LoginRequest.notice`` (a sign-in's repair) comes back in ``LoginStatus.notes``, escaped
    and bounded; ``TransportContext.notice`` (a credential lookup's) becomes the server's note,
    shown even while it is ready. (The real plugin's: tests/test_oauth_store_edges.py.)"""
    from kxen_core import hookimpl

    url = gated(start_peer, "stateful")
    creds = Credentials(first=GOOD)

    class Noticing:
        @hookimpl(tryfirst=True)
        async def kxen_credential_lookup(self, server, request):
            request.context.notice("the token store was open to others: set to 0600")
            return None  # the credential plugin below answers

    sign_in = SignIn(creds, auto=True)
    kxen_home.write_settings(remote_on(url))
    async with running(
        kxen_home, ws, creds, Noticing(), sign_in, servers={"r": remote(url)}, allow=REMOTE_PLUGINS
    ) as rt:
        s = status_of(rt, "r")
        assert s["state"] == "ready", s
        assert s["note"] == "the token store was open to others: set to 0600", s
        assert "the token store was open to others: set to 0600" in s["diagnostics"]
        started = await rt.login_start("r")
        (flow,) = sign_in.flows
        for _ in range(20):  # bounded, deduplicated
            flow.request.notice("repaired \x1b[2Jsomething")
        flow.request.notice("a second repair")
        status = await settled(rt, started.flow_id)
        assert status.state == "complete"
        assert status.notes == ("repaired \\x1b[2Jsomething", "a second repair"), status.notes


async def test_closing_the_runtime_while_a_sign_in_waits_ends_the_sign_in(kxen_home, ws, start_peer):
    # the close cancels the runtime's tasks only while one still runs: a sign-in waiting for its
    # browser is one, so the close ends it (and does not wait for it) instead of hanging
    url = gated(start_peer)
    creds = Credentials(first=None)
    sign_in = SignIn(creds)
    kxen_home.write_settings(remote_on(url))
    with anyio.fail_after(WAIT):
        async with running(kxen_home, ws, creds, sign_in, servers={"r": remote(url)}, allow=REMOTE_PLUGINS) as rt:
            started = await rt.login_start("r")
            assert rt.login_poll(started.flow_id) == LoginStatus("pending")
    assert rt.login_poll(started.flow_id) == LoginStatus("cancelled", "the runtime closed")
    (flow,) = sign_in.flows
    assert flow.closed == 1 and not flow.finished

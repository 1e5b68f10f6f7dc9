"""A remote server that refuses kxen's credentials, against the real SDK server behind a Bearer gate
(tests/peers/gated_server.py), over Streamable HTTP and legacy SSE: the credential plugin is asked
again with the challenge and the request sent once more when that helps; otherwise the server
waits in ``needs_login`` with the next step, at whatever phase the 401/403 came."""

from __future__ import annotations

import json
import logging

import anyio
import pytest
from auth_support import GOOD, STALE, Credentials, LoginPlugin, Refuses, assert_no_token, gate_stats, gated
from kxen_testing import running
from remote_support import REMOTE_PLUGINS, WAIT, remote, remote_on, status_of

from kxen_core import hookimpl
from kxen_core.errors import AuthRequired, ServerNotReady

pytestmark = pytest.mark.anyio

KINDS = ["stateful", "sse"]


def entry(url: str, mode: str, era: str = "legacy") -> dict:
    """These tests count the handshake era's requests (initialize, the GET stream): the era is
    pinned; the stateless era's twin is test_the_stateless_era_meets_the_challenge_the_same_way."""
    return remote(url, "sse" if mode == "sse" else "http", protocolEra=era)


def initializes(stats: dict[str, int], outcome: str) -> int:
    """How many initialize POSTs the gate answered with ``outcome`` ("ok", "401"...)."""
    return sum(n for key, n in stats.items() if key.startswith(f"{outcome} POST initialize "))


@pytest.mark.parametrize("mode", KINDS)
async def test_401_at_initialize_without_a_credential_plugin_needs_login(kxen_home, ws, start_peer, caplog, mode):
    caplog.set_level(logging.DEBUG)
    url = gated(start_peer, mode)
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, servers={"r": entry(url, mode)}, allow=REMOTE_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert (s["state"], s["phase"]) == ("needs_login", "auth"), s
        assert s["error"].startswith("HTTP 401 Unauthorized from http://127.0.0.1:"), s
        assert "invalid_token: no valid token" in s["error"], s
        assert s["next"] == "add credentials (headers) in user config or install kxen-oauth", s
        assert rt.servers["r"].done.is_set()  # settled for good: no reconnection
        with pytest.raises(ServerNotReady, match="needs_login") as info:
            await rt.call_tool("r__echo", {"text": "x"})
        assert info.value.state == "needs_login" and info.value.phase == "auth"
        assert str(info.value).endswith("; next: add credentials (headers) in user config or install kxen-oauth)"), (
            info.value
        )


@pytest.mark.parametrize("mode", KINDS)
async def test_the_next_step_is_a_login_when_a_sign_in_plugin_is_installed(kxen_home, ws, start_peer, mode):
    url = gated(start_peer, mode)
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, LoginPlugin(), servers={"r": entry(url, mode)}, allow=REMOTE_PLUGINS) as rt:
        s = status_of(rt, "r")
        # the error and the diagnostics whole: pytest shortens a long dict (one failure in a full run, not reproduced)
        why = (s["state"], s["error"], s["diagnostics"])
        assert (s["state"], s["next"]) == ("needs_login", "kxen mcp login r"), why


@pytest.mark.parametrize("mode", KINDS)
async def test_a_better_token_on_the_challenge_is_sent_once_and_works(kxen_home, ws, start_peer, caplog, mode):
    caplog.set_level(logging.DEBUG)
    url = gated(start_peer, mode)
    creds = Credentials(first=STALE, on_challenge=GOOD)
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, creds, servers={"r": entry(url, mode)}, allow=REMOTE_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready", status_of(rt, "r")
        # the first request met the challenge; the plugin saw it, with the server's own words
        first = creds.challenges[0]
        assert first.status == 401 and 'error="invalid_token"' in first.www_authenticate
        assert all(r.context is not None and r.context.pm is rt.pm for r in creds.asked)
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("r__echo", {"text": "through"})
        assert result["content"][0]["text"] == "through"
        stats = await gate_stats(url)
        assert stats.get(f"401 {'GET /sse' if mode == 'sse' else 'POST initialize'} {STALE}") == 1, stats
        assert_no_token("status()", json.dumps(rt.status()))
    assert_no_token("the log", caplog.text)


@pytest.mark.parametrize("mode", KINDS)
@pytest.mark.parametrize("again", [None, STALE], ids=["none", "same"])
async def test_no_better_credential_on_the_challenge_needs_login_without_a_resend(
    kxen_home, ws, start_peer, caplog, mode, again
):
    caplog.set_level(logging.DEBUG)
    url = gated(start_peer, mode)
    creds = Credentials(first=STALE, on_challenge=again)
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, creds, servers={"r": entry(url, mode)}, allow=REMOTE_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert (s["state"], s["phase"]) == ("needs_login", "auth"), s
        assert len(creds.challenges) == 1
        stats = await gate_stats(url)
        first = "GET /sse" if mode == "sse" else "POST initialize"
        assert stats == {f"401 {first} {STALE}": 1}, stats  # asked once, not sent again
        assert_no_token("status()", json.dumps(rt.status()))
    assert_no_token("the log", caplog.text)


@pytest.mark.parametrize("mode", KINDS)
async def test_a_401_on_tools_list_after_initialize_needs_login_not_an_exception_group(kxen_home, ws, start_peer, mode):
    url = gated(start_peer, mode, "--deny", "tools/list")
    kxen_home.write_settings(remote_on(url))
    async with running(
        kxen_home, ws, Credentials(), LoginPlugin(), servers={"r": entry(url, mode)}, allow=REMOTE_PLUGINS
    ) as rt:
        s = status_of(rt, "r")
        assert (s["state"], s["phase"], s["next"]) == ("needs_login", "auth", "kxen mcp login r"), s
        assert "ExceptionGroup" not in s["error"] and "TaskGroup" not in s["error"], s
        assert "token expired" in s["error"], s
        assert initializes(await gate_stats(url), "ok") == 1


@pytest.mark.parametrize("mode", KINDS)
async def test_a_call_refused_for_good_fails_with_auth_required_and_the_server_needs_login(
    kxen_home, ws, start_peer, caplog, mode
):
    caplog.set_level(logging.DEBUG)
    url = gated(start_peer, mode, "--deny", "tools/call")
    kxen_home.write_settings(remote_on(url))
    async with running(
        kxen_home, ws, Credentials(), LoginPlugin(), servers={"r": entry(url, mode)}, allow=REMOTE_PLUGINS
    ) as rt:
        assert status_of(rt, "r")["state"] == "ready"
        with anyio.fail_after(WAIT), pytest.raises(AuthRequired) as info:
            await rt.call_tool("r__echo", {"text": "x"})
        assert info.value.status == 401 and info.value.next_step == "kxen mcp login r"
        assert "token expired" in str(info.value)
        with anyio.fail_after(WAIT):
            await rt.wait_ready()
            while status_of(rt, "r")["state"] != "needs_login":
                await anyio.sleep(0.02)
        assert status_of(rt, "r")["next"] == "kxen mcp login r"
        assert_no_token("the error", repr(info.value) + str(info.value))
        assert_no_token("status()", json.dumps(rt.status()))
    assert_no_token("the log", caplog.text)


@pytest.mark.parametrize("mode", KINDS)
async def test_the_agent_is_told_what_a_person_does_about_a_refused_call(kxen_home, ws, start_peer, caplog, mode):
    caplog.set_level(logging.DEBUG)
    url = gated(start_peer, mode, "--deny", "tools/call")
    kxen_home.write_settings(remote_on(url))
    servers = {"r": {**entry(url, mode), "defaultToolPolicy": "allow"}}
    async with running(kxen_home, ws, Credentials(), LoginPlugin(), servers=servers, allow=REMOTE_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready"
        with anyio.fail_after(WAIT):
            out = await rt.agent_call("r__echo", {"text": "x"})
        assert out.is_error and out.text.startswith("AuthRequired: "), out.text
        assert "token expired" in out.text and out.text.endswith(" (next: kxen mcp login r)"), out.text
        assert_no_token("the agent's view", out.text)
    assert_no_token("the log", caplog.text)


@pytest.mark.parametrize("mode", KINDS)
async def test_a_403_insufficient_scope_shows_the_missing_scope(kxen_home, ws, start_peer, mode):
    url = gated(start_peer, mode, "--need", "tools/call=admin")
    kxen_home.write_settings(remote_on(url))
    async with running(
        kxen_home, ws, Credentials(), LoginPlugin(), servers={"r": entry(url, mode)}, allow=REMOTE_PLUGINS
    ) as rt:
        with anyio.fail_after(WAIT), pytest.raises(AuthRequired) as info:
            await rt.call_tool("r__echo", {"text": "x"})
        assert (info.value.status, info.value.scopes) == (403, ("admin",))
        assert info.value.next_step == "kxen mcp login r --scope admin"
        with anyio.fail_after(WAIT):
            while status_of(rt, "r")["state"] != "needs_login":
                await anyio.sleep(0.02)
        s = status_of(rt, "r")
        assert (s["scopes"], s["next"]) == (["admin"], "kxen mcp login r --scope admin"), s
        assert s["error"].startswith("HTTP 403 Forbidden from "), s


@pytest.mark.parametrize("mode", KINDS)
async def test_a_step_up_token_on_a_403_is_sent_once_and_the_call_succeeds(kxen_home, ws, start_peer, mode):
    url = gated(start_peer, mode, "--need", "tools/call=admin")
    creds = Credentials(scoped={'scope="admin"': f"{GOOD}:admin"})
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, creds, servers={"r": entry(url, mode)}, allow=REMOTE_PLUGINS) as rt:
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("r__echo", {"text": "scoped"})
        assert result["content"][0]["text"] == "scoped"
        assert [c.status for c in creds.challenges] == [403]
        assert status_of(rt, "r")["state"] == "ready"


async def test_a_401_on_the_get_stream_needs_login(kxen_home, ws, start_peer):
    url = gated(start_peer, "stateful", "--deny-get")
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, Credentials(), servers={"r": entry(url, "stateful")}, allow=REMOTE_PLUGINS) as rt:
        with anyio.fail_after(WAIT):
            while status_of(rt, "r")["state"] != "needs_login":
                await anyio.sleep(0.02)
        s = status_of(rt, "r")
        assert s["phase"] == "auth" and "no streams" in s["error"], s


@pytest.mark.parametrize("mode", KINDS)
async def test_a_credential_plugin_that_raises_auth_required_settles_needs_login(kxen_home, ws, start_peer, mode):
    url = gated(start_peer, mode)
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, Refuses(), servers={"r": entry(url, mode)}, allow=REMOTE_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert (s["state"], s["phase"]) == ("needs_login", "auth"), s
        assert (s["error"], s["next"]) == ("no token stored for this server; sign in first", "kxen mcp login r"), s
        assert await gate_stats(url) == {}  # nothing was sent without a credential


async def test_a_plugin_with_ever_new_bad_tokens_gets_one_resend_only(kxen_home, ws, start_peer):
    class Rotating:
        def __init__(self) -> None:
            self.n = 0

        @hookimpl
        def kxen_credential_lookup(self, server, request):
            self.n += 1
            return {"Authorization": f"Bearer {STALE}-{self.n}"}

    url = gated(start_peer)
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, Rotating(), servers={"r": entry(url, "stateful")}, allow=REMOTE_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "needs_login"
        stats = await gate_stats(url)
        assert stats == {f"401 POST initialize {STALE}-1": 1, f"401 POST initialize {STALE}-2": 1}, stats


@pytest.mark.parametrize("mode", KINDS)
async def test_a_broken_credential_plugin_fails_in_phase_auth_with_what_to_do(kxen_home, ws, start_peer, mode):
    class Broken:
        @hookimpl
        def kxen_credential_lookup(self, server, request):
            raise RuntimeError("the vault is unreachable")

    url = gated(start_peer, mode)
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, Broken(), servers={"r": entry(url, mode)}, allow=REMOTE_PLUGINS) as rt:
        s = status_of(rt, "r")
        assert (s["state"], s["phase"]) == ("failed", "auth"), s
        assert "raised in kxen_credential_lookup" in s["error"] and "the vault is unreachable" in s["error"], s
        assert s["next"].startswith("fix or remove the credential plugin"), s
        assert rt.servers["r"].done.is_set()  # not reconnected: the plugin must be fixed first


async def test_calls_in_flight_when_the_server_refuses_all_fail_with_auth_required(kxen_home, ws, start_peer):
    """Whether a call met the 401 itself or found the transport already ended by it, it fails
    with AuthRequired and the next step."""
    url = gated(start_peer, "stateful", "--deny", "tools/call")
    kxen_home.write_settings(remote_on(url))
    errors: list[BaseException] = []

    async def call(rt, text: str) -> None:
        try:
            await rt.call_tool("r__echo", {"text": text})
        except Exception as exc:
            errors.append(exc)

    async with running(
        kxen_home, ws, Credentials(), LoginPlugin(), servers={"r": entry(url, "stateful")}, allow=REMOTE_PLUGINS
    ) as rt:
        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as tg:
                for i in range(8):
                    tg.start_soon(call, rt, f"c{i}")
    assert len(errors) == 8
    assert all(isinstance(e, AuthRequired) and e.next_step == "kxen mcp login r" for e in errors), errors


async def test_the_stateless_era_meets_the_challenge_the_same_way(kxen_home, ws, start_peer):
    """Probed, the SDK server behind the gate speaks the stateless era: the probe meets the 401,
    the plugin's better token is sent once, and the server is ready; with no better token it needs a
    login after that one request, no initialize ever sent."""
    url = gated(start_peer, "stateful")
    creds = Credentials(first=STALE, on_challenge=GOOD)
    kxen_home.write_settings(remote_on(url))
    async with running(kxen_home, ws, creds, servers={"r": entry(url, "stateful", "auto")}, allow=REMOTE_PLUGINS) as rt:
        row = status_of(rt, "r")
        assert (row["state"], row["era"]) == ("ready", "modern"), row
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("r__echo", {"text": "through"})
        assert result["content"][0]["text"] == "through"
        stats = await gate_stats(url)
        assert (
            stats.get(f"401 POST server/discover {STALE}") == 1 and stats.get(f"ok POST server/discover {GOOD}") == 1
        ), stats
        assert not any(" POST initialize " in key for key in stats), stats
    url = gated(start_peer, "stateful")
    kxen_home.write_settings(remote_on(url))  # another peer: its own confirmation
    async with running(
        kxen_home, ws, Credentials(first=STALE), servers={"r": entry(url, "stateful", "auto")}, allow=REMOTE_PLUGINS
    ) as rt:
        s = status_of(rt, "r")
        assert (s["state"], s["phase"]) == ("needs_login", "auth"), s
        assert await gate_stats(url) == {f"401 POST server/discover {STALE}": 1}

"""A ``kxen_credential_lookup`` answer that is a :class:`kxen_core.ReusableHeaders` is sent again
without asking while its own check passes (asked before each request instead of the hook), for the
requests of one connection to the same URL with the same plugins; a failed check, a 401/403 or
another URL asks the hook again. The memo alone (CredentialMemo), then against real peers: the SDK
server behind a Bearer gate (tests/peers/gated_server.py) over Streamable HTTP and legacy SSE."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from auth_support import GOOD, STALE, gate_stats, gated
from kxen_testing import running
from kxen_transport_http.plumbing import CredentialMemo, Redactor, request_headers
from remote_support import REMOTE_PLUGINS, WAIT, remote, remote_on, status_of

from kxen_core import AuthChallenge, ReusableHeaders, ServerConfig, TransportContext, hookimpl
from kxen_core.plugins import make_plugin_manager

pytestmark = pytest.mark.anyio

CALLS = 12
URL = "https://mcp.example.com/mcp"


class Vouches:
    """Answers ``Bearer <token>`` as a ReusableHeaders whose check is ``valid`` (counted);
    after a challenge the token is ``on_challenge``."""

    def __init__(self, token: str = GOOD, on_challenge: str = GOOD) -> None:
        self.token, self.on_challenge = token, on_challenge
        self.valid = True
        self.asked: list[Any] = []
        self.checks = 0

    def check(self) -> bool:
        self.checks += 1
        return self.valid

    @hookimpl
    async def kxen_credential_lookup(self, server: Any, request: Any) -> dict[str, str] | None:
        self.asked.append(request)
        if request.challenge is not None:
            self.token = self.on_challenge
        return ReusableHeaders({"Authorization": f"Bearer {self.token}"}, self.check)


def context_of(*plugins: Any) -> TransportContext:
    pm = make_plugin_manager()
    for plugin in plugins:
        pm.register(plugin)
    return TransportContext(workspace=Path.cwd(), pm=pm)


SERVER = ServerConfig(name="r", url=URL, transport="http")


async def headers_of(context: TransportContext, memo: CredentialMemo, redact: Redactor, url: str = URL, **kw) -> str:
    return (await request_headers(SERVER, context, "POST", url, redact, memo=memo, **kw))["Authorization"]


async def test_the_memo_holds_a_vouched_answer_while_its_check_passes():
    plugin = Vouches()
    context, memo, redact = context_of(plugin), CredentialMemo(), Redactor()
    for _ in range(5):
        assert await headers_of(context, memo, redact) == f"Bearer {GOOD}"
    assert (len(plugin.asked), plugin.checks) == (1, 4)
    plugin.valid = False  # the plugin says its answer no longer holds: asked, every request
    for _ in range(3):
        await headers_of(context, memo, redact)
    assert len(plugin.asked) == 4
    plugin.valid = True
    await headers_of(context, memo, redact)
    assert len(plugin.asked) == 4  # the last answer asked for holds again


async def test_another_url_other_plugins_or_a_forgetting_redactor_ask_again():
    plugin = Vouches()
    context, memo, redact = context_of(plugin), CredentialMemo(), Redactor()
    await headers_of(context, memo, redact)
    await headers_of(context, memo, redact, url=URL + "/other")  # another URL: asked
    assert len(plugin.asked) == 2 and plugin.asked[1].url == URL + "/other"
    await headers_of(context, memo, redact, url=URL)  # held for the last URL asked alone
    assert len(plugin.asked) == 3
    assert context.pm is not None
    context.pm.register(object(), name="another")  # the plugins changed: one may go first now
    await headers_of(context, memo, redact)
    assert len(plugin.asked) == 4
    redact.remember(f"value-{i}" for i in range(Redactor.MAX_VALUES + 1))  # it forgot the token
    await headers_of(context, memo, redact)
    assert len(plugin.asked) == 5
    assert redact(f"x Bearer {GOOD} y") == "x *** y"  # remembered again: still scrubbed


async def test_a_challenge_drops_it_and_a_broken_check_asks_again():
    plugin = Vouches(token=STALE)
    context, memo, redact = context_of(plugin), CredentialMemo(), Redactor()
    await headers_of(context, memo, redact)
    fresh = await headers_of(context, memo, redact, challenge=AuthChallenge(status=401))
    assert fresh == f"Bearer {GOOD}" and memo.held is None  # a challenge's answer is not held
    await headers_of(context, memo, redact)
    assert len(plugin.asked) == 3 and memo.held is not None

    def broken() -> bool:
        raise RuntimeError("the check broke")

    memo.held.still_valid = broken
    assert await headers_of(context, memo, redact) == f"Bearer {GOOD}"
    assert len(plugin.asked) == 4


async def test_a_challenge_the_plugin_fails_to_answer_still_drops_it():
    class Fails(Vouches):
        @hookimpl
        async def kxen_credential_lookup(self, server: Any, request: Any) -> dict[str, str] | None:
            if request.challenge is not None:
                raise RuntimeError("the sign-in service is down")
            return await super().kxen_credential_lookup(server, request)

    from kxen_core.errors import PluginHookError

    plugin = Fails()
    context, memo, redact = context_of(plugin), CredentialMemo(), Redactor()
    await headers_of(context, memo, redact)
    assert memo.held is not None
    with pytest.raises(PluginHookError):
        await headers_of(context, memo, redact, challenge=AuthChallenge(status=401))
    assert memo.held is None  # the refused answer is not sent again unasked


async def test_a_plain_dict_or_a_bad_pair_is_never_held():
    class Plain:
        @hookimpl
        async def kxen_credential_lookup(self, server: Any, request: Any) -> dict[str, str] | None:
            return {"Authorization": "Bearer plain-1"}

    memo = CredentialMemo()
    await request_headers(SERVER, context_of(Plain()), "POST", URL, Redactor(), memo=memo)
    assert memo.held is None and not memo.nothing
    bad = ReusableHeaders({"Authorization": "Bearer x-1"}, lambda: True)
    bad[1] = "not a name"  # type: ignore[index]
    memo.learn(bad, None, context_of(), URL, Redactor())
    assert memo.held is None


async def echo_many(rt: Any, n: int) -> None:
    for i in range(n):
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("r__echo", {"text": f"m{i}"})
        assert result["content"][0]["text"] == f"m{i}"


@pytest.mark.parametrize(("mode", "era"), [("stateful", "legacy"), ("stateful", "auto"), ("sse", "auto")])
async def test_a_vouched_answer_is_asked_once_per_url_against_the_gate(kxen_home, ws, start_peer, mode, era):
    url = gated(start_peer, mode)
    creds = Vouches()
    kxen_home.write_settings(remote_on(url))
    entry = remote(url, "sse" if mode == "sse" else "http", **({"protocolEra": era} if era != "auto" else {}))
    async with running(kxen_home, ws, creds, servers={"r": entry}, allow=REMOTE_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready", status_of(rt, "r")
        await echo_many(rt, CALLS)
        # one ask per URL (SSE: its stream's, then the endpoint the stream named), none per call
        assert len({r.url for r in creds.asked}) == len(creds.asked) <= 2, [(r.method, r.url) for r in creds.asked]
        assert creds.checks >= CALLS
        creds.valid = False
        asked = len(creds.asked)
        await echo_many(rt, 3)
        assert len(creds.asked) >= asked + 3  # the check failed: every request asked again
        creds.valid = True
        asked = len(creds.asked)
        await echo_many(rt, CALLS)
        assert len(creds.asked) <= asked + 1
        stats = await gate_stats(url)
    assert not [key for key in stats if not key.startswith("ok ") or not key.endswith(GOOD)], stats


@pytest.mark.parametrize("mode", ["stateful", "sse"])
async def test_a_401_drops_the_held_answer_against_the_gate(kxen_home, ws, start_peer, mode):
    url = gated(start_peer, mode)
    creds = Vouches(token=STALE, on_challenge=GOOD)  # it vouches for a token the server refuses
    kxen_home.write_settings(remote_on(url))
    entry = remote(url, "sse" if mode == "sse" else "http", protocolEra="legacy")
    async with running(kxen_home, ws, creds, servers={"r": entry}, allow=REMOTE_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready", status_of(rt, "r")
        await echo_many(rt, CALLS)
        stats = await gate_stats(url)
    # the refused token went out once: the 401 dropped it (its check still passes), the challenge got the good one
    assert [key for key in stats if not key.startswith("ok ")] == [next(k for k in stats if k.startswith("401 "))]
    assert sum(n for key, n in stats.items() if key.startswith("401 ")) == 1, stats
    assert sum(1 for r in creds.asked if r.challenge is not None) == 1
    assert not [key for key in stats if key.startswith("ok ") and not key.endswith(GOOD)], stats

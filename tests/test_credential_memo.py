"""``kxen_credential_lookup`` answering ``None`` holds for the transport that asked (see the
hookspec): a server that needs no credentials costs the hook one call per connection, not one per
request, and a server that starts asking for them (401/403) gets them asked per request again.
Against real peers: the SDK server over Streamable HTTP (both eras) and legacy SSE, and the same
server behind a Bearer gate (tests/peers/gated_server.py)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from auth_support import GOOD, gate_stats, gated
from kxen_testing import running
from remote_support import REMOTE_PLUGINS, WAIT, remote, remote_on, status_of, until

from kxen_core import hookimpl

pytestmark = pytest.mark.anyio

CALLS = 12


class Nothing:
    """A credential plugin with nothing for any server; counts how often it is asked."""

    def __init__(self) -> None:
        self.asked: list[Any] = []

    @hookimpl
    async def kxen_credential_lookup(self, server: Any, request: Any) -> dict[str, str] | None:
        self.asked.append(request)
        return None


class Learns:
    """Nothing until the server asks (a challenge); from then on a token for every request."""

    def __init__(self) -> None:
        self.token: str | None = None
        self.plain = 0  # asked without a challenge
        self.challenged = 0

    @hookimpl
    async def kxen_credential_lookup(self, server: Any, request: Any) -> dict[str, str] | None:
        if request.challenge is not None:
            self.challenged += 1
            self.token = GOOD
        else:
            self.plain += 1
        return {"Authorization": f"Bearer {self.token}"} if self.token else None


async def echo_many(rt: Any, n: int) -> None:
    for i in range(n):
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("r__echo", {"text": f"m{i}"})
        assert result["content"][0]["text"] == f"m{i}"


@pytest.mark.parametrize(
    ("mode", "era"), [("stateful", "legacy"), ("stateful", "auto"), ("stateless", "auto"), ("sse", "auto")]
)
async def test_a_lookup_with_nothing_is_asked_once_per_connection(kxen_home, ws, peers, mode, era):
    url, kind = peers.sdk(mode)
    creds = Nothing()
    kxen_home.write_settings(remote_on(url))
    entry = {**remote(url, kind, defaultToolPolicy="allow"), **({"protocolEra": era} if era != "auto" else {})}
    async with running(kxen_home, ws, creds, servers={"r": entry}, allow=REMOTE_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready", status_of(rt, "r")
        await echo_many(rt, CALLS)
        # the first request of the connection asked (initialize, the probe, or the SSE stream's GET);
        # none of the dozen calls, the catalog listing or the GET stream asked again
        assert len(creds.asked) == 1, [(r.method, r.url) for r in creds.asked]
        assert creds.asked[0].challenge is None and creds.asked[0].context.pm is rt.pm
        with anyio.fail_after(WAIT):
            await rt.restart("r")
            await until(lambda: status_of(rt, "r")["state"] == "ready", WAIT)
        await echo_many(rt, 2)
        assert len(creds.asked) == 2  # a new transport asks again, once


@pytest.mark.parametrize("mode", ["stateful", "sse"])
async def test_a_server_that_asks_for_credentials_later_gets_them_per_request(kxen_home, ws, start_peer, mode):
    url = gated(start_peer, mode)
    creds = Learns()
    kxen_home.write_settings(remote_on(url))
    entry = remote(url, "sse" if mode == "sse" else "http", defaultToolPolicy="allow", protocolEra="legacy")
    async with running(kxen_home, ws, creds, servers={"r": entry}, allow=REMOTE_PLUGINS) as rt:
        assert status_of(rt, "r")["state"] == "ready", status_of(rt, "r")
        before = creds.plain
        await echo_many(rt, CALLS)
        stats = await gate_stats(url)
    # one refusal, for the first request: it asked with nothing, met the challenge, and got the token
    assert creds.challenged == 1, creds.challenged
    assert sum(n for key, n in stats.items() if key.startswith("401 ")) == 1, stats
    assert not [key for key in stats if key.startswith("ok ") and not key.endswith(GOOD)], stats
    # from the challenge on, every request asked again (the plugin's answer may change per request)
    assert creds.plain - before >= CALLS, (before, creds.plain)

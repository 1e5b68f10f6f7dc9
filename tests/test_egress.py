"""SSRF and DNS rebinding: every connection of kxen's HTTP clients (the transports and the OAuth
plugin) is checked after its name was resolved. Link-local and metadata addresses are never
reached, loopback only with ``allow_loopback_http``, private ranges only when config.toml allows
them; each new connection resolves again and redirects are checked the same way.

Names are resolved by a resolver the test controls; every connection that is made goes to
127.0.0.1. A refused address is refused before any connection, so nothing is ever sent elsewhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import anyio
import httpcore
import httpx
import pytest
from kxen_testing import running
from kxen_transport_http.plumbing import EgressRefused, GuardedBackend, GuardedTransport, _guard
from remote_support import Response, local_http, remote, remote_on

from kxen_core import EgressPolicy, using_egress
from kxen_core.config import load_config
from kxen_core.config.models import ServerConfig, Settings
from kxen_core.config.settings import McpSettings, PrivateNetwork
from kxen_core.errors import ConfigError
from kxen_core.policy.egress import ALWAYS_RULE, LOOPBACK_RULE, PRIVATE_RULE, classify, egress_for

WAIT = 30
LOOPBACK = EgressPolicy(server="s", allow_loopback=True)


class Names:
    """A resolver the test controls: each name's answers, one list per lookup (the last repeats)."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        queue = self.answers.get(host)
        if queue is None:
            raise OSError(f"{host}: not a name of this test")
        return queue.pop(0) if len(queue) > 1 else queue[0]


@pytest.fixture
def names(monkeypatch):
    """Install a :class:`Names` as the resolver of every guarded client (no real DNS)."""

    def install(answers: dict[str, list[list[str]]]) -> Names:
        resolver = Names(answers)
        monkeypatch.setattr(_guard, "resolve_host", resolver)
        return resolver

    return install


# --- the rules --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("169.254.169.254", "always"),
        ("169.254.0.1", "always"),
        ("fe80::1", "always"),
        ("fe80::1%eth0", "always"),
        ("fd00:ec2::254", "always"),
        ("100.100.100.200", "always"),
        ("::ffff:169.254.169.254", "always"),  # IPv4-mapped
        ("64:ff9b::a9fe:a9fe", "always"),  # NAT64 of 169.254.169.254
        ("2002:a9fe:a9fe::1", "always"),  # 6to4 of 169.254.169.254
        ("127.0.0.1", "loopback"),
        ("127.9.9.9", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "private"),
        ("fd12:3456::1", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("0.0.0.0", "reserved"),
        ("::", "reserved"),
        ("224.0.0.1", "reserved"),
        ("ff02::1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("240.0.0.1", "reserved"),
        ("not an address", "reserved"),
        ("8.8.8.8", "public"),
        ("172.32.0.1", "public"),
        ("2606:4700:4700::1111", "public"),
    ],
)
def test_each_address_is_classified(address, kind):
    assert classify(address) == kind


def test_a_refusal_names_the_address_the_name_the_rule_and_the_setting():
    strict = EgressPolicy(server="api")
    assert strict.refusal("169.254.169.254", "meta.test") == (
        f"connection to 169.254.169.254 (resolved from meta.test) for server 'api' refused: {ALWAYS_RULE}"
    )
    assert strict.refusal("127.0.0.1", "127.0.0.1").endswith(LOOPBACK_RULE)
    assert "allow_loopback_http" in LOOPBACK_RULE
    assert strict.refusal("10.0.0.5", "corp.test").endswith(PRIVATE_RULE)
    assert "[mcp.private_network] allow = true" in PRIVATE_RULE and "[mcp.private_network] servers" in PRIVATE_RULE
    assert strict.refusal("8.8.8.8") is None
    everything = EgressPolicy(allow_loopback=True, allow_private=True)
    assert everything.refusal("127.0.0.1") is None and everything.refusal("10.0.0.5") is None
    assert everything.refusal("169.254.169.254") is not None and everything.refusal("fd00:ec2::254") is not None


def test_the_settings_allow_private_addresses_globally_or_per_user_server():
    user = ServerConfig(name="corp", scope="user", url="https://corp.test/mcp")
    project = ServerConfig(name="corp", scope="project", url="https://corp.test/mcp")
    other = ServerConfig(name="other", scope="user", url="https://o.test/mcp")
    named = Settings(mcp=McpSettings(private_network=PrivateNetwork(servers=["corp"])))
    assert egress_for(user, named).allow_private and not egress_for(other, named).allow_private
    assert not egress_for(project, named).allow_private  # a repository's entry of that name: not allowed
    everywhere = Settings(mcp=McpSettings(private_network=PrivateNetwork(allow=True), allow_loopback_http=True))
    assert egress_for(project, everywhere) == EgressPolicy(server="corp", allow_loopback=True, allow_private=True)
    # a context built by hand in code (no user settings): loopback, which the code named, but nothing private
    assert egress_for(user, None) == EgressPolicy(server="corp", allow_loopback=True)


def test_a_bad_server_name_in_the_setting_names_the_key(kxen_home, ws):
    kxen_home.write_settings('[mcp.private_network]\nservers = ["ok", "no spaces"]\n')
    with pytest.raises(ConfigError) as info:
        load_config(kxen_home.path, ws)
    [problem] = info.value.problems
    assert problem.endswith(
        "config.toml: mcp.private_network.servers: servers[1] must be a server name: 1-32 characters of A-Z a-z 0-9 _ -"
    ), problem


# --- at connect time ----------------------------------------------------------------------------------


async def ok(_request: Any) -> Response:
    return Response(200, b"{}", "application/json")


@pytest.mark.anyio
async def test_a_loopback_name_connects_only_when_loopback_is_allowed(names):
    names({"api.test": [["127.0.0.1"]]})
    async with local_http(ok) as server:
        async with httpx.AsyncClient(transport=GuardedTransport(LOOPBACK)) as client:
            assert (await client.get(f"http://api.test:{server.port}/")).status_code == 200
        async with httpx.AsyncClient(transport=GuardedTransport(EgressPolicy())) as client:
            with pytest.raises(httpx.ConnectError, match="resolved from api.test.*needs \\[mcp\\] allow_loopback_http"):
                await client.get(f"http://api.test:{server.port}/")
    assert server.accepted == 1


@pytest.mark.anyio
async def test_a_name_that_now_resolves_to_a_metadata_address_is_refused(names):
    """DNS rebinding: the first connection goes to loopback, the next lookup answers the metadata
    address and the next connection is refused, whatever the name resolved to before."""
    resolver = names({"rebind.test": [["127.0.0.1"], ["169.254.169.254"]]})
    async with local_http(ok) as server:
        async with httpx.AsyncClient(transport=GuardedTransport(LOOPBACK)) as client:
            assert (await client.get(f"http://rebind.test:{server.port}/")).status_code == 200
            with pytest.raises(httpx.ConnectError, match="169.254.169.254 \\(resolved from rebind.test\\)"):
                await client.get(f"http://rebind.test:{server.port}/")  # the server closed: a new connection
    assert server.accepted == 1 and resolver.asked == ["rebind.test", "rebind.test"]


@pytest.mark.anyio
async def test_one_refused_address_among_the_answers_refuses_the_name(names):
    names({"mixed.test": [["127.0.0.1", "169.254.169.254"]]})
    async with local_http(ok) as server:
        async with httpx.AsyncClient(transport=GuardedTransport(LOOPBACK)) as client:
            with pytest.raises(httpx.ConnectError, match="never reached"):
                await client.get(f"http://mixed.test:{server.port}/")
    assert server.accepted == 0


@pytest.mark.anyio
async def test_a_redirect_is_checked_the_same_way(names):
    names({"meta.test": [["169.254.169.254"]]})

    async def found(_request: Any) -> Response:
        return Response(302)

    async with local_http(found) as server:
        target = f"http://meta.test:{server.port}/latest/meta-data/"

        async def to_metadata(response: httpx.Response) -> None:  # the server's Location header
            if response.status_code == 302:
                response.headers["Location"] = target

        hooks = {"response": [to_metadata]}
        async with httpx.AsyncClient(
            transport=GuardedTransport(LOOPBACK), follow_redirects=True, event_hooks=hooks
        ) as client:
            with pytest.raises(httpx.ConnectError, match="169.254.169.254 \\(resolved from meta.test\\)"):
                await client.get(f"http://127.0.0.1:{server.port}/")
    assert server.accepted == 1


class Recording(httpcore.AsyncNetworkBackend):
    """An inner network that records where it was asked to connect and connects nowhere."""

    def __init__(self) -> None:
        self.hosts: list[str] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.hosts.append(host)
        raise httpcore.ConnectError("recorded, not connected")

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


@pytest.mark.anyio
async def test_a_private_address_is_reached_only_when_allowed_and_by_the_checked_address():
    async def resolver(host: str, port: int) -> list[str]:
        return ["10.0.0.5"]

    inner = Recording()
    refused = GuardedBackend(EgressPolicy(server="corp"), resolver=resolver, inner=inner)
    with pytest.raises(
        EgressRefused, match="10.0.0.5 \\(resolved from corp.test\\) for server 'corp' refused: a private"
    ):
        await refused.connect_tcp("corp.test", 443)
    assert inner.hosts == []  # nothing was tried
    allowed = GuardedBackend(EgressPolicy(server="corp", allow_private=True), resolver=resolver, inner=inner)
    with pytest.raises(httpcore.ConnectError, match="recorded"):
        await allowed.connect_tcp("corp.test", 443)
    assert inner.hosts == ["10.0.0.5"]  # the address that was checked, never the name again


@pytest.mark.anyio
async def test_without_a_policy_the_one_the_core_set_for_the_task_is_used(names):
    names({"api.test": [["127.0.0.1"]]})
    async with local_http(ok) as server:
        async with httpx.AsyncClient(transport=GuardedTransport()) as client:
            with pytest.raises(httpx.ConnectError, match="allow_loopback_http"):
                await client.get(f"http://api.test:{server.port}/")  # none set: the strictest
            with using_egress(LOOPBACK):
                assert (await client.get(f"http://api.test:{server.port}/")).status_code == 200


# --- the OAuth plugin's requests ------------------------------------------------------------------


@pytest.mark.anyio
async def test_oauth_requests_are_checked_and_say_the_rule(names):
    from kxen_oauth._fetch import OAuthHttpError, make_client, request_json

    names({"as.test": [["127.0.0.1"], ["169.254.169.254"]]})
    async with local_http(ok) as server:
        url = f"http://as.test:{server.port}/.well-known/oauth-authorization-server"
        with using_egress(LOOPBACK):
            async with make_client() as client:
                assert (await request_json(client, "GET", url)) == (200, {})
                with pytest.raises(OAuthHttpError, match="refused: a link-local or cloud metadata address"):
                    await request_json(client, "GET", url)
    assert server.accepted == 1


# --- through the runtime: a remote server ----------------------------------------------------------


def _settings(kxen_home, url: str, loopback: bool = True) -> None:
    kxen_home.write_settings(remote_on(url, settings=f"[mcp]\nallow_loopback_http = {str(loopback).lower()}\n"))


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("answer", "rule"),
    [
        (["169.254.169.254"], "169.254.169.254 (resolved from localhost) for server 'r' refused: a link-local"),
        (["10.0.0.5"], "10.0.0.5 (resolved from localhost) for server 'r' refused: a private address"),
    ],
)
async def test_a_remote_server_whose_name_resolves_to_a_refused_address_fails_with_the_rule(
    kxen_home, ws, names, answer, rule
):
    names({"localhost": [answer]})
    async with local_http(ok) as server:
        _settings(kxen_home, f"http://localhost:{server.port}/mcp")
        async with running(
            kxen_home, ws, servers={"r": remote(f"http://localhost:{server.port}/mcp")}, allow=["http"]
        ) as rt:
            row = next(r for r in rt.status() if r["name"] == "r")
        assert server.accepted == 0
    assert row["state"] == "failed" and row["phase"] in ("transport", "initialize"), (
        row
    )  # http connects on its first POST
    assert rule in row["error"], row["error"]


@pytest.mark.anyio
async def test_https_to_a_loopback_address_needs_allow_loopback_http(kxen_home, ws, names):
    names({"mcp.test": [["127.0.0.1"]]})
    async with local_http(ok) as server:
        entry = remote(f"https://mcp.test:{server.port}/mcp")
        _settings(kxen_home, entry["url"], loopback=False)
        async with running(kxen_home, ws, servers={"r": entry}, allow=["http"]) as rt:
            row = next(r for r in rt.status() if r["name"] == "r")
        assert server.accepted == 0
    assert "127.0.0.1 (resolved from mcp.test) for server 'r' refused: a loopback address" in row["error"], row
    assert "allow_loopback_http" in row["error"]


@pytest.mark.anyio
async def test_a_private_server_allowed_by_name_in_config_toml_gets_past_the_guard(kxen_home, ws, names, monkeypatch):
    """The allowance reaches the transport: the connection is attempted to the checked address
    (the inner network records it; nothing is sent to a private address)."""
    inner = Recording()
    monkeypatch.setattr(httpcore, "AnyIOBackend", lambda: inner)  # the guard's inner network
    servers = {"corp": remote("https://corp.test/mcp"), "other": remote("https://other.test/mcp")}
    kxen_home.write_settings(remote_on(*servers.values(), settings='[mcp.private_network]\nservers = ["corp"]\n'))
    names({"corp.test": [["10.0.0.5"]], "other.test": [["10.0.0.6"]]})
    async with running(kxen_home, ws, servers=servers, allow=["http"]) as rt:
        rows = {r["name"]: r for r in rt.status()}
    assert "recorded, not connected" in rows["corp"]["error"], rows["corp"]
    assert "10.0.0.6 (resolved from other.test) for server 'other' refused: a private address" in rows["other"]["error"]
    assert inner.hosts and set(inner.hosts) == {"10.0.0.5"}


# --- the real-peer twin: the official Python SDK server over Streamable HTTP ------------------------


@pytest.mark.anyio
async def test_sdk_peer_reached_by_a_loopback_name_and_refused_when_it_rebinds(kxen_home, ws, peers, names):
    url, kind = peers.sdk("stateful")
    port = httpx.URL(url).port
    resolver = names({"localhost": [["127.0.0.1"]]})
    entry = {**remote(f"http://localhost:{port}/mcp", kind), "defaultToolPolicy": "allow"}
    _settings(kxen_home, entry["url"])
    async with running(kxen_home, ws, servers={"sdk": entry}, allow=["http"], wait=60) as rt:
        assert rt.servers["sdk"].state == "ready", rt.servers["sdk"].snapshot()
        with anyio.fail_after(WAIT):
            added = await rt.call_tool("sdk__add", {"a": 2, "b": 40})
        assert "42" in json.dumps(added)
        assert "localhost" in resolver.asked
        resolver.answers["localhost"] = [["169.254.169.254"]]
        await rt.restart("sdk")
        with anyio.fail_after(WAIT):
            assert await rt.wait_ready()
        row = next(r for r in rt.status() if r["name"] == "sdk")
    assert row["state"] == "failed" and "169.254.169.254 (resolved from localhost)" in row["error"], row


@pytest.mark.anyio
async def test_every_address_is_tried_in_turn_within_one_connect_timeout():
    async def resolver(host: str, port: int) -> list[str]:
        return ["8.8.8.8", "8.8.4.4"]  # public: allowed; the recording network connects nowhere

    inner = Recording()
    backend = GuardedBackend(EgressPolicy(), resolver=resolver, inner=inner)
    with pytest.raises(httpcore.ConnectError, match="recorded"):
        await backend.connect_tcp("two.test", 443, timeout=5)
    assert inner.hosts == ["8.8.8.8", "8.8.4.4"]
    with pytest.raises(httpcore.ConnectTimeout):
        await backend.connect_tcp("two.test", 443, timeout=0)  # no time left: nothing tried
    assert inner.hosts == ["8.8.8.8", "8.8.4.4"]

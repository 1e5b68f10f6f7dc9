"""Discovery, URLs and the challenge parser, on scripted HTTP (httpx.MockTransport).

Each rule here also has a real-peer twin: tests/test_oauth_flow.py against the SDK's
authorization server, and the conformance harness's auth scenarios (metadata variants, resource
mismatch, issuer mismatch) in tests/test_conformance*.py.
"""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kxen_oauth._challenge import MAX_CHARS, parse_bearer, parse_challenges
from kxen_oauth._urls import UrlRefused, as_metadata_urls, canonical_resource, check_endpoint, prm_urls
from kxen_oauth.discovery import DiscoveryError, discover
from kxen_oauth.flow import choose_scopes

pytestmark = pytest.mark.anyio

S256 = {"code_challenge_methods_supported": ["S256"]}


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("HTTPS://MCP.Example.COM/mcp", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp"),
        ("http://127.0.0.1:80/a", "http://127.0.0.1/a"),
        ("https://mcp.example.com:8443", "https://mcp.example.com:8443"),
        ("https://mcp.example.com/Path/?Q=A#frag", "https://mcp.example.com/Path/?Q=A"),
        ("https://[::1]:9000/x", "https://[::1]:9000/x"),
    ],
)
def test_canonical_resource(url, canonical):
    assert canonical_resource(url) == canonical


@pytest.mark.parametrize("url", ["mcp.example.com", "ftp://x/y", "https://u:p@x/y", "https:///nohost"])
def test_canonical_resource_refuses(url):
    with pytest.raises(UrlRefused):
        canonical_resource(url)


def test_well_known_orders():
    assert prm_urls("https://x.example/public/mcp") == [
        "https://x.example/.well-known/oauth-protected-resource/public/mcp",
        "https://x.example/.well-known/oauth-protected-resource",
    ]
    assert prm_urls("https://x.example") == ["https://x.example/.well-known/oauth-protected-resource"]
    assert as_metadata_urls("https://a.example/tenant1") == [
        "https://a.example/.well-known/oauth-authorization-server/tenant1",
        "https://a.example/.well-known/openid-configuration/tenant1",
        "https://a.example/tenant1/.well-known/openid-configuration",
    ]
    assert as_metadata_urls("https://a.example/") == [
        "https://a.example/.well-known/oauth-authorization-server",
        "https://a.example/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize(
    ("url", "loopback", "rule"),
    [
        ("http://auth.example/token", True, "plaintext http to a public host"),
        ("http://127.0.0.1:9/token", False, "allow_loopback_http"),
        ("javascript:alert(1)", True, "must have a host"),
        ("https://a.example/t#x", True, "fragment"),
    ],
)
def test_endpoints_are_checked(url, loopback, rule):
    with pytest.raises(UrlRefused, match=rule):
        check_endpoint(url, "token_endpoint", allow_loopback_http=loopback)
    assert check_endpoint("http://127.0.0.1:9/t", "x", allow_loopback_http=True)


def test_bearer_challenges():
    b = parse_bearer('Basic realm="x", Bearer error="insufficient_scope", scope="a b", resource_metadata="https://r/m"')
    assert (b.error, b.scope, b.resource_metadata, b.insufficient_scope) == (
        "insufficient_scope",
        ("a", "b"),
        "https://r/m",
        True,
    )
    assert parse_bearer('Bearer realm="a\\"b", scope=token') == parse_bearer("Bearer scope=token")
    assert parse_bearer("Negotiate abc==") == parse_bearer("")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=MAX_CHARS * 2))
def test_the_challenge_parser_is_total_and_bounded(value):
    challenges = parse_challenges(value)
    assert len(challenges) <= MAX_CHARS
    b = parse_bearer(value)
    assert len(b.scope) <= 100 and len(b.resource_metadata) <= 2048


class AS:
    """A scripted protected resource + authorization server; records every URL asked."""

    def __init__(self, docs: dict[str, object]) -> None:
        self.docs = docs
        self.asked: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        self.asked.append(url)
        doc = self.docs.get(url)
        if doc is None:
            return httpx.Response(404)
        if isinstance(doc, httpx.Response):
            return doc
        return httpx.Response(200, content=json.dumps(doc).encode(), headers={"content-type": "application/json"})


def as_doc(issuer: str, **extra: object) -> dict:
    return {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        **S256,
        **extra,
    }


async def run(app: AS, url: str, **kw) -> object:
    async with httpx.AsyncClient(transport=httpx.MockTransport(app)) as client:
        return await discover(client, url, **kw)


async def test_prm_from_the_challenge_then_path_inserted_rfc8414():
    app = AS(
        {
            "https://rs.example/custom/prm.json": {
                "resource": "https://rs.example/mcp",
                "authorization_servers": ["https://as.example/tenant1"],
                "scopes_supported": ["a"],
            },
            "https://as.example/tenant1/.well-known/openid-configuration": as_doc("https://as.example/tenant1"),
        }
    )
    d = await run(app, "https://RS.example/mcp", resource_metadata="https://rs.example/custom/prm.json")
    assert d.server.issuer == "https://as.example/tenant1" and d.resource == "https://rs.example/mcp"
    assert app.asked == [
        "https://rs.example/custom/prm.json",
        "https://as.example/.well-known/oauth-authorization-server/tenant1",
        "https://as.example/.well-known/openid-configuration/tenant1",
        "https://as.example/tenant1/.well-known/openid-configuration",
    ]


async def test_a_prm_for_another_resource_is_refused():
    app = AS(
        {
            "https://rs.example/.well-known/oauth-protected-resource/mcp": {
                "resource": "https://evil.example/mcp",
                "authorization_servers": ["https://as.example"],
            }
        }
    )
    with pytest.raises(DiscoveryError, match="not this server"):
        await run(app, "https://rs.example/mcp")
    assert not any("as.example" in u for u in app.asked)  # no authorization server was even asked


async def test_metadata_whose_issuer_differs_is_refused():
    app = AS(
        {
            "https://rs.example/.well-known/oauth-protected-resource": {
                "resource": "https://rs.example",
                "authorization_servers": ["https://as.example"],
            },
            "https://as.example/.well-known/oauth-authorization-server": as_doc("https://other.example"),
        }
    )
    with pytest.raises(DiscoveryError, match="RFC 8414"):
        await run(app, "https://rs.example")


async def test_plaintext_public_endpoints_are_refused():
    app = AS(
        {
            "https://rs.example/.well-known/oauth-protected-resource": {
                "resource": "https://rs.example",
                "authorization_servers": ["https://as.example"],
            },
            "https://as.example/.well-known/oauth-authorization-server": {
                **as_doc("https://as.example"),
                "token_endpoint": "http://as.example/token",
            },
        }
    )
    with pytest.raises(DiscoveryError, match="plaintext http to a public host"):
        await run(app, "https://rs.example")


async def test_2025_03_26_fallbacks():
    app = AS({})
    d = await run(app, "https://rs.example/mcp")
    assert (d.prm, d.server.synthesised, d.server.token_endpoint) == (None, True, "https://rs.example/token")
    assert app.asked == [
        "https://rs.example/.well-known/oauth-protected-resource/mcp",
        "https://rs.example/.well-known/oauth-protected-resource",
        "https://rs.example/.well-known/oauth-authorization-server",
    ]


async def test_cross_origin_redirects_of_metadata_are_not_followed():
    app = AS(
        {
            "https://rs.example/.well-known/oauth-protected-resource": httpx.Response(
                302, headers={"location": "https://elsewhere.example/prm"}
            ),
        }
    )
    with pytest.raises(DiscoveryError, match="another origin"):
        await run(app, "https://rs.example")
    assert "https://elsewhere.example/prm" not in app.asked


async def test_an_oversized_metadata_answer_is_refused():
    big = httpx.Response(200, content=b"{" + b" " * (300 * 1024) + b"}")
    app = AS({"https://rs.example/.well-known/oauth-protected-resource": big})
    with pytest.raises(DiscoveryError, match="more than"):
        await run(app, "https://rs.example")


async def test_scope_selection_order():
    app = AS(
        {
            "https://rs.example/.well-known/oauth-protected-resource": {
                "resource": "https://rs.example",
                "authorization_servers": ["https://as.example"],
                "scopes_supported": ["r1", "r2"],
            },
            "https://as.example/.well-known/oauth-authorization-server": as_doc(
                "https://as.example", scopes_supported=["r1", "offline_access"]
            ),
        }
    )
    d = await run(app, "https://rs.example")
    assert choose_scopes(("c",), ("u",), d, ()) == "c offline_access"
    assert choose_scopes((), ("u",), d, ()) == "u offline_access"
    assert choose_scopes((), (), d, ("x",)) == "r1 r2 x offline_access"
    bare = type(d)(
        canonical=d.canonical,
        resource=d.resource,
        prm=None,
        server=type(d.server)(issuer="i", authorization_endpoint=None, token_endpoint="t"),
    )
    assert choose_scopes((), (), bare, ()) is None

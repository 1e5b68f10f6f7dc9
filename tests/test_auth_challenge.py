"""The challenge of a refused request, read by the HTTP plumbing: bounded, parsed without trusting
it, and turned into an AuthRequired whose text is safe; a credential plugin that always has another
token gets the request sent again once, never more (a server that answers 401 forever cannot loop)."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kxen_transport_http.plumbing import Redactor, auth_required, challenge_of, challenge_params, refused_for_auth
from kxen_transport_http.plumbing._auth import nonce_challenge
from kxen_transport_http.streamable import open_streamable_http

from kxen_core import AuthChallenge, CredentialRequest, hookimpl
from kxen_core.config.models import ServerConfig
from kxen_core.errors import AuthRequired, ClosedError
from kxen_core.plugins.manager import KxenPluginManager
from kxen_core.protocol.session import Session
from kxen_core.transport import CHALLENGE_MAX_CHARS, TransportContext

SERVER = ServerConfig(name="r", url="https://mcp.example/mcp", transport="http")


def response(status: int, *challenges: str) -> httpx.Response:
    return httpx.Response(status, headers=[("WWW-Authenticate", c) for c in challenges])


def test_a_challenge_is_every_value_joined_and_bounded():
    assert (
        challenge_of(response(401, 'Bearer realm="a"', 'DPoP algs="ES256"')).www_authenticate
        == 'Bearer realm="a", DPoP algs="ES256"'
    )
    huge = challenge_of(response(401, *["Bearer " + "x" * 5000] * 100))
    assert len(huge.www_authenticate) <= CHALLENGE_MAX_CHARS
    assert AuthChallenge(status=401, www_authenticate="y" * 100_000).www_authenticate == "y" * CHALLENGE_MAX_CHARS
    assert challenge_of(response(403)).www_authenticate == ""


def test_which_answers_ask_for_credentials():
    assert refused_for_auth(response(401)) and refused_for_auth(response(403, 'Bearer error="insufficient_scope"'))
    assert not refused_for_auth(response(403))  # a refused Origin, say: no sign-in helps
    assert not refused_for_auth(response(404)) and not refused_for_auth(response(200, "Bearer"))


def test_the_params_of_a_challenge():
    challenge = AuthChallenge(
        status=403,
        www_authenticate='Bearer error="insufficient_scope", scope="files:read files:write", '
        'resource_metadata="https://mcp.example/.well-known/oauth-protected-resource", '
        'error_description="say \\"hi\\""',
    )
    params = challenge_params(challenge)
    assert params["error"] == "insufficient_scope" and params["scope"] == "files:read files:write"
    assert (
        params["resource_metadata"].endswith("/oauth-protected-resource") and params["error_description"] == 'say "hi"'
    )
    assert challenge_params(AuthChallenge(status=401, www_authenticate="Bearer ERROR=invalid_token")) == {
        "error": "invalid_token"
    }


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=CHALLENGE_MAX_CHARS))
def test_any_challenge_text_parses_to_safe_one_line_reasons(text):
    challenge = AuthChallenge(status=401, www_authenticate=text)
    assert isinstance(challenge_params(challenge), dict)
    error = auth_required(
        SERVER, TransportContext(workspace=Path(".")), challenge, "https://mcp.example/mcp", Redactor()
    )
    assert str(error).startswith("HTTP 401 Unauthorized from https://mcp.example/mcp")
    assert all(c.isprintable() for c in str(error)) and len(str(error)) < 1000


def test_the_reason_escapes_and_redacts_the_servers_words():
    redact = Redactor()
    redact.remember(["Bearer tok-SECRET-1234"])
    challenge = AuthChallenge(
        status=403,
        www_authenticate='Bearer error="insufficient_scope", scope="admin", '
        'error_description="bad tok-SECRET-1234\x1b[2J\n[bold]x[/bold]"',
    )
    error = auth_required(SERVER, TransportContext(workspace=Path(".")), challenge, "https://mcp.example/mcp", redact)
    assert "tok-SECRET-1234" not in str(error) and "***" in str(error)
    assert "\x1b" not in str(error) and "\n" not in str(error)
    assert (error.status, error.scopes) == (403, ("admin",))
    assert error.next_step == "add credentials (headers) in user config or install kxen-oauth"


@pytest.mark.anyio
async def test_a_plugin_with_ever_new_tokens_gets_one_resend_only():
    class Rotating:
        def __init__(self) -> None:
            self.asked: list[CredentialRequest] = []

        @hookimpl
        def kxen_credential_lookup(self, server, request):
            self.asked.append(request)
            return {"Authorization": f"Bearer tok-{len(self.asked)}"}

    plugin = Rotating()
    pm = KxenPluginManager()
    pm.register(plugin)
    posts: list[str] = []

    def always_401(request: httpx.Request) -> httpx.Response:
        posts.append(request.headers["authorization"])
        return httpx.Response(401, headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})

    context = TransportContext(workspace=Path("."), pm=pm)
    with anyio.fail_after(10):
        async with open_streamable_http(SERVER, context, http_transport=httpx.MockTransport(always_401)) as stream:
            async with Session(stream, server="r") as session:
                with pytest.raises(AuthRequired) as info:
                    await session.initialize()
                with pytest.raises(ClosedError):
                    await session.request("tools/list")
    assert posts == ["Bearer tok-1", "Bearer tok-2"]  # the request and one resend, nothing more
    assert [r.challenge.status if r.challenge else None for r in plugin.asked] == [None, 401]
    assert str(info.value) == "HTTP 401 Unauthorized from https://mcp.example/mcp: invalid_token"


def test_a_dpop_nonce_is_read_from_the_answer_when_it_is_sane():
    asked = httpx.Response(401, headers={"WWW-Authenticate": 'DPoP error="use_dpop_nonce"', "DPoP-Nonce": "n-1"})
    assert challenge_of(asked).dpop_nonce == "n-1" and nonce_challenge(challenge_of(asked))
    bad = httpx.Response(401, headers={"WWW-Authenticate": 'DPoP error="use_dpop_nonce"', "DPoP-Nonce": 'a "b"'})
    assert challenge_of(bad).dpop_nonce == "" and not nonce_challenge(challenge_of(bad))
    other = httpx.Response(401, headers={"WWW-Authenticate": 'DPoP error="invalid_token"', "DPoP-Nonce": "n-1"})
    assert not nonce_challenge(challenge_of(other))


@pytest.mark.anyio
async def test_a_dpop_nonce_challenge_gets_one_more_resend_only():
    """RFC 9449 §9: the resource server's nonce answered once beyond the one resend every
    challenge gets (a sign-in, then the nonce), and a server that asks for a nonce forever gets
    no third resend."""

    class Signing:
        def __init__(self) -> None:
            self.asked: list[CredentialRequest] = []

        @hookimpl
        def kxen_credential_lookup(self, server, request):
            self.asked.append(request)
            return {"Authorization": "DPoP tok", "DPoP": f"proof-{len(self.asked)}"}

    plugin = Signing()
    pm = KxenPluginManager()
    pm.register(plugin)
    proofs: list[str] = []

    def nonce_forever(request: httpx.Request) -> httpx.Response:
        proofs.append(request.headers["dpop"])
        headers = {"WWW-Authenticate": 'DPoP error="use_dpop_nonce"', "DPoP-Nonce": f"n-{len(proofs)}"}
        return httpx.Response(401, headers=headers)

    context = TransportContext(workspace=Path("."), pm=pm)
    with anyio.fail_after(10):
        async with open_streamable_http(SERVER, context, http_transport=httpx.MockTransport(nonce_forever)) as stream:
            async with Session(stream, server="r") as session:
                with pytest.raises(AuthRequired) as info:
                    await session.initialize()
    assert proofs == ["proof-1", "proof-2"]  # a nonce challenge first: one resend, as any challenge
    assert [r.challenge.dpop_nonce if r.challenge else None for r in plugin.asked] == [None, "n-1"]
    assert "use_dpop_nonce" in str(info.value)


@pytest.mark.anyio
async def test_after_a_sign_in_a_dpop_nonce_gets_one_more_resend():
    class Signing:
        def __init__(self) -> None:
            self.asked: list[CredentialRequest] = []

        @hookimpl
        def kxen_credential_lookup(self, server, request):
            self.asked.append(request)
            return {"Authorization": "DPoP tok", "DPoP": f"proof-{len(self.asked)}"}

    plugin = Signing()
    pm = KxenPluginManager()
    pm.register(plugin)
    proofs: list[str] = []

    def sign_in_then_nonce_forever(request: httpx.Request) -> httpx.Response:
        proofs.append(request.headers["dpop"])
        if len(proofs) == 1:
            return httpx.Response(401, headers={"WWW-Authenticate": 'DPoP resource_metadata="https://x/"'})
        headers = {"WWW-Authenticate": 'DPoP error="use_dpop_nonce"', "DPoP-Nonce": f"n-{len(proofs)}"}
        return httpx.Response(401, headers=headers)

    context = TransportContext(workspace=Path("."), pm=pm)
    transport = httpx.MockTransport(sign_in_then_nonce_forever)
    with anyio.fail_after(10):
        async with open_streamable_http(SERVER, context, http_transport=transport) as stream:
            async with Session(stream, server="r") as session:
                with pytest.raises(AuthRequired):
                    await session.initialize()
    assert proofs == ["proof-1", "proof-2", "proof-3"]  # the request, after the sign-in, with the nonce
    assert [r.challenge.dpop_nonce if r.challenge else None for r in plugin.asked] == [None, "", "n-2"]

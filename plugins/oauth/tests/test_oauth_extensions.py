"""Workload identity, enterprise-managed authorization and DPoP, against an authorization server,
an IdP and a resource server's challenges faked with httpx's mock transport: the grants' requests
field by field, their errors as the user sees them, the DPoP proofs, the nonce retries (one each),
and the key that stays in the 0600 store. (The real twins: the harness's `auth/wif-jwt-bearer`,
`auth/enterprise-managed-authorization`, `auth/dpop` and `auth/dpop-nonce` rows of
docs/conformance.md, run by tests/test_conformance.py.)"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey
from kxen_oauth.engine import OAuthEngine
from kxen_oauth.store import TokenStore

from kxen_core import ServerConfig
from kxen_core.config.models import OAuthConfig
from kxen_core.errors import AuthRequired
from kxen_core.transport import AuthChallenge, CredentialRequest

pytestmark = pytest.mark.anyio

URL = "https://mcp.example.com/mcp"
AS = "https://as.example.com"
IDP_TOKEN = "https://idp.example.com/token"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
#: a JWT-shaped platform token (the fake server does not verify it; the harness's does)
PLATFORM = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ3b3JrbG9hZCJ9.c2lnLXBsYXRmb3JtLTE"
ID_TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ1c2VyIn0.c2lnLWlkLXRva2Vu"
JAG = "eyJ0eXAiOiJvYXV0aC1pZC1qYWcrand0In0.eyJzdWIiOiJ1c2VyIn0.c2lnLWphZw"


class Fake:
    """The protected resource's metadata, the authorization server (and an IdP); ``answers`` are
    the token endpoint's next answers (status, body, headers), the last one repeated."""

    def __init__(self, *, dpop: bool = False, answers: list[tuple[int, dict[str, Any], dict[str, str]]] | None = None):
        self.dpop = dpop
        self.issuer = AS
        self.answers = answers or [(200, {"access_token": "AT-ext-1", "token_type": "Bearer", "expires_in": 3600}, {})]
        self.token_requests: list[httpx.Request] = []
        self.idp_requests: list[httpx.Request] = []
        self.idp_answer: tuple[int, dict[str, Any]] = (
            200,
            {"access_token": JAG, "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag", "token_type": "N_A"},
        )

    def __call__(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        if "oauth-protected-resource" in url:
            return httpx.Response(200, json={"resource": URL, "authorization_servers": [self.issuer]})
        if "oauth-authorization-server" in url or "openid-configuration" in url:
            meta: dict[str, Any] = {
                "issuer": self.issuer,
                "token_endpoint": f"{self.issuer}/token",
                "grant_types_supported": [JWT_BEARER],
            }
            if self.dpop:
                meta["dpop_signing_alg_values_supported"] = ["ES256"]
            return httpx.Response(200, json=meta)
        if url == IDP_TOKEN:
            self.idp_requests.append(request)
            return httpx.Response(self.idp_answer[0], json=self.idp_answer[1])
        if url == f"{self.issuer}/token":
            self.token_requests.append(request)
            status, body, headers = self.answers[min(len(self.token_requests), len(self.answers)) - 1]
            return httpx.Response(status, json=body, headers=headers)
        return httpx.Response(404)


def form(request: httpx.Request) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(request.content.decode()).items()}


def wif_server(path: Path, name: str = "w", **kw: Any) -> ServerConfig:
    oauth = OAuthConfig(grant="workload_identity", workloadTokenFile=str(path), **kw)
    return ServerConfig(name=name, url=URL, transport="http", oauth=oauth)


def token_file(tmp_path: Path, text: str = PLATFORM) -> Path:
    path = tmp_path / "platform-token"
    path.write_text(text + "\n")
    return path


def ask(url: str = URL, challenge: AuthChallenge | None = None, method: str = "POST") -> CredentialRequest:
    return CredentialRequest(method=method, url=url, challenge=challenge)


def verify_proof(proof: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The proof's header and claims, its signature checked with the public key it carries."""
    header = json.loads(base64.urlsafe_b64decode(proof.split(".")[0] + "=="))
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256"
    assert "d" not in header["jwk"]  # the public key only
    token = jwt.decode(proof, ECKey.import_key(header["jwk"]), algorithms=["ES256"])
    return token.header, dict(token.claims)


# -- workload identity ------------------------------------------------------------------------


async def test_workload_identity_sends_the_file_token_in_the_jwt_bearer_grant(_kxen_data_dir, tmp_path):
    fake = Fake()
    engine = OAuthEngine(http_transport=httpx.MockTransport(fake))
    path = token_file(tmp_path)
    assert await engine.lookup(wif_server(path), ask()) == {"Authorization": "Bearer AT-ext-1"}
    [sent] = fake.token_requests
    body = form(sent)
    assert body["grant_type"] == JWT_BEARER and body["assertion"] == PLATFORM
    assert body["resource"] == URL
    assert "client_id" not in body and "authorization" not in sent.headers  # no client, no secret
    assert "dpop" not in sent.headers  # the server lists no DPoP algorithm


async def test_workload_identity_reads_the_file_again_at_each_grant(_kxen_data_dir, tmp_path):
    fake = Fake()
    engine = OAuthEngine(http_transport=httpx.MockTransport(fake))
    path = token_file(tmp_path)
    server = wif_server(path, clientId="wl-1")
    await engine.lookup(server, ask())
    rotated = PLATFORM.replace("LTE", "LTI")
    path.write_text(rotated)  # the platform rotated it
    challenge = AuthChallenge(status=401, www_authenticate=f'Bearer resource_metadata="{URL}"')
    fake.answers = [(200, {"access_token": "AT-ext-2", "token_type": "Bearer"}, {})]
    assert await engine.lookup(server, ask(challenge=challenge)) == {"Authorization": "Bearer AT-ext-2"}
    assert [form(r)["assertion"] for r in fake.token_requests] == [PLATFORM, rotated]
    assert form(fake.token_requests[1])["client_id"] == "wl-1"


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda tmp: tmp / "missing-token", "cannot be read"),
        (lambda tmp: tmp, "cannot be read"),  # a directory, not a file
        (lambda tmp: token_file(tmp, "not-a-jwt-SECRETISH"), "does not hold one JWT"),
        (lambda tmp: token_file(tmp, ""), "does not hold one JWT"),
    ],
)
async def test_a_workload_token_file_that_cannot_be_used_is_a_clear_error(_kxen_data_dir, tmp_path, make, said):
    fake = Fake()
    engine = OAuthEngine(http_transport=httpx.MockTransport(fake))
    path = make(tmp_path)
    with pytest.raises(AuthRequired) as caught:
        await engine.lookup(wif_server(path), ask())
    text = str(caught.value)
    assert f"oauth.workloadTokenFile {path}" in text and said in text, text
    assert "SECRETISH" not in text  # never the file's content
    assert fake.token_requests == []  # nothing sent


async def test_a_refused_jwt_bearer_grant_reaches_the_user_and_is_not_retried(_kxen_data_dir, tmp_path):
    refused = (400, {"error": "invalid_grant", "error_description": "JWT assertion is expired"}, {})
    fake = Fake(answers=[refused])
    engine = OAuthEngine(http_transport=httpx.MockTransport(fake))
    with pytest.raises(AuthRequired) as caught:
        await engine.lookup(wif_server(token_file(tmp_path)), ask())
    text = str(caught.value)
    assert "workload-identity (jwt-bearer) grant for 'w' failed" in text
    assert "invalid_grant (JWT assertion is expired)" in text
    assert PLATFORM not in text
    assert len(fake.token_requests) == 1  # no retry, no other grant


async def test_the_platform_token_goes_to_no_other_authorization_server(_kxen_data_dir, tmp_path):
    """It could be replayed at the server it was made for: bound to the first issuer, as a secret is."""
    fake = Fake()
    path = token_file(tmp_path)
    await OAuthEngine(http_transport=httpx.MockTransport(fake)).lookup(wif_server(path), ask())
    fake.issuer = "https://elsewhere.example.com"  # the MCP server now names another one
    fake.token_requests.clear()
    await TokenStore().drop_tokens("user", "w", "")
    with pytest.raises(AuthRequired) as caught:
        await OAuthEngine(http_transport=httpx.MockTransport(fake)).lookup(wif_server(path), ask())
    assert "nothing was sent there" in str(caught.value)
    assert fake.token_requests == []


# -- enterprise-managed authorization ---------------------------------------------------------------


def enterprise_server(tmp_path: Path) -> ServerConfig:
    id_file = tmp_path / "id-token"
    id_file.write_text(ID_TOKEN)
    oauth = OAuthConfig(
        grant="enterprise_managed",
        clientId="mcp-client",
        clientSecret="mcp-secret",
        idpTokenEndpoint=IDP_TOKEN,
        idpClientId="idp-client",
        idTokenFile=str(id_file),
    )
    return ServerConfig(name="e", url=URL, transport="http", oauth=oauth)


async def test_enterprise_managed_exchanges_the_id_token_then_presents_the_id_jag(_kxen_data_dir, tmp_path):
    fake = Fake()
    engine = OAuthEngine(http_transport=httpx.MockTransport(fake))
    assert await engine.lookup(enterprise_server(tmp_path), ask()) == {"Authorization": "Bearer AT-ext-1"}
    [exchange] = fake.idp_requests
    body = form(exchange)
    assert body["grant_type"] == "urn:ietf:params:oauth:grant-type:token-exchange"
    assert body["subject_token"] == ID_TOKEN
    assert body["subject_token_type"] == "urn:ietf:params:oauth:token-type:id_token"
    assert body["requested_token_type"] == "urn:ietf:params:oauth:token-type:id-jag"
    assert body["audience"] == AS and body["resource"] == URL and body["client_id"] == "idp-client"
    [grant] = fake.token_requests
    body = form(grant)
    assert body["grant_type"] == JWT_BEARER and body["assertion"] == JAG
    basic = base64.b64encode(b"mcp-client:mcp-secret").decode()
    assert grant.headers["authorization"] == f"Basic {basic}"


async def test_a_refused_token_exchange_reaches_the_user(_kxen_data_dir, tmp_path):
    fake = Fake()
    fake.idp_answer = (400, {"error": "invalid_grant", "error_description": "Invalid ID token"})
    engine = OAuthEngine(http_transport=httpx.MockTransport(fake))
    with pytest.raises(AuthRequired) as caught:
        await engine.lookup(enterprise_server(tmp_path), ask())
    text = str(caught.value)
    assert "enterprise-managed authorization" in text and "refused the token exchange" in text
    assert "invalid_grant (Invalid ID token)" in text
    assert ID_TOKEN not in text and "mcp-secret" not in text
    assert fake.token_requests == []  # the authorization server was never asked


# -- DPoP --------------------------------------------------------------------------------------------


def dpop_answer(token: str = "AT-dpop-1") -> tuple[int, dict[str, Any], dict[str, str]]:
    return (200, {"access_token": token, "token_type": "DPoP", "expires_in": 3600}, {})


NONCE_ASKED = (400, {"error": "use_dpop_nonce"}, {"DPoP-Nonce": "as-nonce-1"})


async def test_dpop_proofs_on_the_token_request_and_every_resource_request(_kxen_data_dir, tmp_path):
    fake = Fake(dpop=True, answers=[dpop_answer()])
    engine = OAuthEngine(http_transport=httpx.MockTransport(fake))
    server = wif_server(token_file(tmp_path))
    headers = await engine.lookup(server, ask(f"{URL}?x=1#f"))
    assert headers is not None and headers["Authorization"] == "DPoP AT-dpop-1"
    _, claims = verify_proof(fake.token_requests[0].headers["dpop"])
    assert claims["htm"] == "POST" and claims["htu"] == f"{AS}/token" and "ath" not in claims
    header, claims = verify_proof(headers["DPoP"])
    assert claims["htu"] == URL  # no query, no fragment
    assert claims["ath"] == base64.urlsafe_b64encode(hashlib.sha256(b"AT-dpop-1").digest()).rstrip(b"=").decode()
    again = await engine.lookup(server, ask(method="GET"))
    assert again is not None
    header2, claims2 = verify_proof(again["DPoP"])
    assert claims2["htm"] == "GET" and claims2["jti"] != claims["jti"]  # a fresh proof each time
    assert header2["jwk"] == header["jwk"] == ECKey.import_key(header["jwk"]).as_dict()  # one key per entry


async def test_dpop_off_in_config_sends_no_proof(_kxen_data_dir, tmp_path):
    fake = Fake(dpop=True)
    engine = OAuthEngine(http_transport=httpx.MockTransport(fake))
    assert await engine.lookup(wif_server(token_file(tmp_path), dpop=False), ask()) == {
        "Authorization": "Bearer AT-ext-1"
    }
    assert "dpop" not in fake.token_requests[0].headers


async def test_the_authorization_servers_nonce_gets_exactly_one_retry(_kxen_data_dir, tmp_path):
    fake = Fake(dpop=True, answers=[NONCE_ASKED, dpop_answer()])
    engine = OAuthEngine(http_transport=httpx.MockTransport(fake))
    server = wif_server(token_file(tmp_path))
    assert (await engine.lookup(server, ask()) or {})["Authorization"] == "DPoP AT-dpop-1"
    first, second = (verify_proof(r.headers["dpop"])[1] for r in fake.token_requests)
    assert "nonce" not in first and second["nonce"] == "as-nonce-1"

    # a server that keeps asking for the nonce it was just given: one retry, then a clear error
    looping = Fake(dpop=True, answers=[NONCE_ASKED])
    engine = OAuthEngine(http_transport=httpx.MockTransport(looping))
    with pytest.raises(AuthRequired) as caught:
        await engine.lookup(wif_server(token_file(tmp_path), name="w2"), ask())
    assert len(looping.token_requests) == 2
    assert "use_dpop_nonce" in str(caught.value)


async def test_the_resource_servers_nonce_gets_exactly_one_retry(_kxen_data_dir, tmp_path):
    fake = Fake(dpop=True, answers=[dpop_answer()])
    engine = OAuthEngine(http_transport=httpx.MockTransport(fake))
    server = wif_server(token_file(tmp_path))
    await engine.lookup(server, ask())
    www = f'DPoP error="use_dpop_nonce", resource_metadata="{URL}"'
    challenge = AuthChallenge(status=401, www_authenticate=www, dpop_nonce="rs-nonce-1")
    headers = await engine.lookup(server, ask(challenge=challenge))
    assert headers is not None and verify_proof(headers["DPoP"])[1]["nonce"] == "rs-nonce-1"
    later = await engine.lookup(server, ask())  # remembered for the origin
    assert later is not None and verify_proof(later["DPoP"])[1]["nonce"] == "rs-nonce-1"
    with pytest.raises(AuthRequired) as caught:  # the same nonce refused again: no second retry
        await engine.lookup(server, ask(challenge=challenge))
    assert "refused the DPoP nonce it asked for" in str(caught.value)
    assert len(fake.token_requests) == 1  # and no new grant either


async def test_the_dpop_key_stays_in_the_0600_store(_kxen_data_dir, tmp_path):
    fake = Fake(dpop=True, answers=[dpop_answer()])
    engine = OAuthEngine(http_transport=httpx.MockTransport(fake))
    server = wif_server(token_file(tmp_path))
    headers = await engine.lookup(server, ask())
    store = TokenStore()
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    [item] = json.loads(store.path.read_text())["dpopKeys"]
    private = item["jwk"]["d"]
    assert (item["server"], item["resource"]) == ("w", URL)
    seen = [json.dumps(headers), *(json.dumps(dict(r.headers)) + r.content.decode() for r in fake.token_requests)]
    www = 'DPoP error="use_dpop_nonce"'
    with pytest.raises(AuthRequired) as caught:
        await engine.lookup(server, ask(challenge=AuthChallenge(status=401, www_authenticate=www)))
    seen += [
        str(caught.value),
        repr(caught.value),
        repr(engine.existing_prover(engine.key_of(server) or ("", "", "", ""))),
    ]
    assert not [s for s in seen if private in s]
    # a fresh engine (another process) signs with the same stored key
    again = await OAuthEngine(http_transport=httpx.MockTransport(fake)).lookup(server, ask())
    assert again is not None and verify_proof(again["DPoP"])[0]["jwk"] == verify_proof(headers["DPoP"])[0]["jwk"]
    assert await engine.logout(server, forget_client=False)
    assert json.loads(store.path.read_text())["dpopKeys"] == []  # signed out: the key is gone too

"""A configured client credential (clientId + clientSecret) is bound to the authorization server
it was first used with: a server whose protected-resource metadata switches to another one gets
nothing posted there (no token request, no authorization URL) until the person forgets the
binding (``kxen mcp logout NAME --forget-client``), on scripted HTTP (httpx.MockTransport)."""

from __future__ import annotations

import httpx
import pytest
from kxen_oauth._issuers import bound_issuer
from kxen_oauth.engine import OAuthEngine
from kxen_oauth.flow import OAuthFlow

from kxen_core import ServerConfig
from kxen_core.config.models import OAuthConfig
from kxen_core.errors import AuthRequired
from kxen_core.transport import AuthChallenge, CredentialRequest

pytestmark = pytest.mark.anyio

URL = "https://mcp.example.com/mcp"
PRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
SECRET = "s3cret-of-the-configured-client"


class App:
    """The MCP server's metadata (naming ``self.issuer``) and two authorization servers."""

    def __init__(self) -> None:
        self.issuer = "https://as-a.example.com"
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        url = str(request.url)
        if url == PRM:
            return httpx.Response(200, json={"resource": URL, "authorization_servers": [self.issuer]})
        base = f"{request.url.scheme}://{request.url.host}"
        if request.url.path == "/.well-known/oauth-authorization-server":
            return httpx.Response(
                200,
                json={
                    "issuer": base,
                    "authorization_endpoint": f"{base}/authorize",
                    "token_endpoint": f"{base}/token",
                    "code_challenge_methods_supported": ["S256"],
                    "grant_types_supported": ["authorization_code", "client_credentials", "refresh_token"],
                },
            )
        if request.url.path == "/token":
            return httpx.Response(
                200, json={"access_token": f"AT-from-{request.url.host}", "token_type": "Bearer", "expires_in": 3600}
            )
        return httpx.Response(404)

    def posted_to(self, host: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == "POST" and r.url.host == host]


def ci_server(**oauth) -> ServerConfig:
    config = {"clientId": "ci", "clientSecret": SECRET, "grant": "client_credentials", **oauth}
    return ServerConfig(name="r", url=URL, transport="http", oauth=OAuthConfig(**config))


def ask(challenge: AuthChallenge | None = None) -> CredentialRequest:
    return CredentialRequest(method="POST", url=URL, challenge=challenge)


CHALLENGE = AuthChallenge(status=401, www_authenticate=f'Bearer resource_metadata="{PRM}"')


async def test_a_client_secret_does_not_follow_the_server_to_another_authorization_server():
    app = App()
    engine = OAuthEngine(http_transport=httpx.MockTransport(app))
    server = ci_server()
    assert await engine.lookup(server, ask()) == {"Authorization": "Bearer AT-from-as-a.example.com"}
    app.issuer = "https://as-b.example.com"  # the server's metadata now names another one
    with pytest.raises(AuthRequired) as caught:
        await engine.lookup(server, ask(CHALLENGE))
    assert bound_issuer(engine.store(), server, "") == "https://as-a.example.com"
    text, step = str(caught.value), caught.value.next_step or ""
    assert "first used with the authorization server https://as-a.example.com" in text, text
    assert "now names https://as-b.example.com: nothing was sent there" in text, text
    assert "kxen mcp logout r --forget-client" in step and "only if you trust https://as-b.example.com" in step
    assert SECRET not in text + step
    assert app.posted_to("as-b.example.com") == []  # the secret never went there
    # again, by the headless path (no challenge) with a fresh discovery: still nothing
    engine._discovered.clear()
    with pytest.raises(AuthRequired):
        await engine.lookup(server, ask())
    assert app.posted_to("as-b.example.com") == []
    # the person confirms: forget the binding, and the next token comes from the new server
    assert await engine.logout(server, forget_client=True) is True
    assert await engine.lookup(server, ask()) == {"Authorization": "Bearer AT-from-as-b.example.com"}
    assert bound_issuer(engine.store(), server, "") == "https://as-b.example.com"
    assert len(app.posted_to("as-b.example.com")) == 1


async def test_a_confidential_sign_in_does_not_start_at_another_authorization_server():
    app = App()
    engine = OAuthEngine(http_transport=httpx.MockTransport(app))
    server = ci_server(grant="authorization_code")
    flow = OAuthFlow(engine, server, allow_loopback_http=False)
    url = await flow.start()
    await flow.aclose()
    assert url.startswith("https://as-a.example.com/authorize?")
    app.issuer = "https://as-b.example.com"
    engine._discovered.clear()  # a new discovery, as after a minute or a 401
    flow = OAuthFlow(engine, server, allow_loopback_http=False)
    with pytest.raises(AuthRequired) as caught:
        await flow.start()
    assert "now names https://as-b.example.com: nothing was sent there" in str(caught.value)
    assert app.posted_to("as-b.example.com") == []
    assert flow._listener is None or flow._listener.closed  # no listener waits for a sign-in there


@pytest.mark.parametrize(
    "oauth",
    [
        {"clientSecret": None, "grant": "authorization_code"},  # a public client: nothing secret to follow
        {"authorizationServerMetadataUrl": "https://as-a.example.com/.well-known/oauth-authorization-server"},
    ],
    ids=["public-client", "pinned-metadata"],
)
async def test_no_binding_where_nothing_secret_follows_discovery(oauth):
    app = App()
    engine = OAuthEngine(http_transport=httpx.MockTransport(app))
    server = ci_server(**oauth)
    flow = OAuthFlow(engine, server, allow_loopback_http=False)
    await flow.start()
    await flow.aclose()
    assert bound_issuer(engine.store(), server, "") is None

"""Refresh against a token endpoint that fails for a while: a 5xx, a timeout, a connection reset,
or a caller that gives up mid-refresh never discards the refresh token; only ``invalid_grant``
does. (The twin against the OAuth peer:
tests/test_oauth_homes.py::test_a_token_endpoint_that_fails_keeps_the_refresh_token.)"""

from __future__ import annotations

import json
import time

import anyio
import httpx
import pytest
from kxen_oauth._records import TokenRecord
from kxen_oauth.engine import OAuthEngine
from kxen_oauth.store import TokenStore

from kxen_core import ServerConfig
from kxen_core.errors import AuthRequired
from kxen_core.transport import CredentialRequest

pytestmark = pytest.mark.anyio

URL = "https://mcp.example.com/mcp"
TOKEN_ENDPOINT = "https://as.example.com/token"
SERVER = ServerConfig(name="r", url=URL, transport="http")


def ask() -> CredentialRequest:
    return CredentialRequest(method="POST", url=URL)


async def expired_token(engine: OAuthEngine) -> TokenRecord:
    record = TokenRecord(
        config_scope="user",
        server="r",
        resource=URL,
        issuer="https://as.example.com",
        client_id="c",
        access_token="AT-old",
        refresh_token="RT-1",
        expires_at=time.time() - 5,
        token_endpoint=TOKEN_ENDPOINT,
        home="",  # an entry built by hand, with no runtime, is bound to the home ""
    )
    await TokenStore().put_token(record)
    return record


def stored_refresh_tokens() -> list[str | None]:
    return [t.refresh_token for t in TokenStore().tokens()]


def rotated(request: httpx.Request) -> httpx.Response:
    assert b"refresh_token=RT-1" in request.content
    return httpx.Response(
        200, json={"access_token": "AT-new", "refresh_token": "RT-2", "token_type": "Bearer", "expires_in": 3600}
    )


def failing(how: str):
    def handler(request: httpx.Request) -> httpx.Response:
        if how == "timeout":
            raise httpx.ReadTimeout("timed out", request=request)
        if how == "reset":
            raise httpx.ReadError("connection reset by peer", request=request)
        if how == "connect":
            raise httpx.ConnectError("connection refused", request=request)
        if how == "5xx-saying-invalid_grant":  # a proxy's error page is no verdict on the grant
            return httpx.Response(502, json={"error": "invalid_grant"})
        return httpx.Response(int(how), text="<html>down for maintenance</html>")

    return handler


@pytest.mark.parametrize("how", ["500", "502", "503", "504", "timeout", "reset", "connect", "5xx-saying-invalid_grant"])
async def test_a_transient_failure_keeps_the_refresh_token_and_the_next_refresh_uses_it(how):
    handler = failing(how)
    engine = OAuthEngine(http_transport=httpx.MockTransport(lambda r: handler(r)))
    await expired_token(engine)
    with pytest.raises(AuthRequired) as caught:
        await engine.lookup(SERVER, ask())
    assert "the refresh token is kept" in str(caught.value), str(caught.value)
    assert "RT-1" not in str(caught.value)
    assert stored_refresh_tokens() == ["RT-1"]
    handler = rotated  # the token endpoint is back
    assert await engine.lookup(SERVER, ask()) == {"Authorization": "Bearer AT-new"}
    assert stored_refresh_tokens() == ["RT-2"]


@pytest.mark.parametrize("status", [400, 401])
async def test_only_invalid_grant_discards_the_refresh_token(status):
    engine = OAuthEngine(
        http_transport=httpx.MockTransport(lambda r: httpx.Response(status, json={"error": "invalid_grant"}))
    )
    await expired_token(engine)
    with pytest.raises(AuthRequired) as caught:
        await engine.lookup(SERVER, ask())
    assert "invalid_grant" in str(caught.value)
    assert stored_refresh_tokens() == []


@pytest.mark.parametrize("error", ["invalid_client", "unauthorized_client", "invalid_request", "server_error"])
async def test_other_refusals_keep_the_refresh_token(error):
    engine = OAuthEngine(http_transport=httpx.MockTransport(lambda r: httpx.Response(400, json={"error": error})))
    await expired_token(engine)
    with pytest.raises(AuthRequired):
        await engine.lookup(SERVER, ask())
    assert stored_refresh_tokens() == ["RT-1"]


async def test_a_caller_that_gives_up_mid_refresh_still_gets_the_rotated_token_stored():
    """The token endpoint rotated the refresh token (the old one is gone there) while the caller's
    own time ran out: the answer is still read and stored, or the sign-in would be lost."""
    answered = anyio.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        await anyio.sleep(0.5)
        answered.set()
        return rotated(request)

    engine = OAuthEngine(http_transport=httpx.MockTransport(slow))
    await expired_token(engine)
    with anyio.move_on_after(0.1):
        await engine.lookup(SERVER, ask())
    assert answered.is_set()
    assert stored_refresh_tokens() == ["RT-2"]
    doc = json.loads(TokenStore().path.read_text())
    assert doc["tokens"][0]["accessToken"] == "AT-new"

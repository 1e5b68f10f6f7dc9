"""Which requests the engine answers for, without any network: the cheap pass for servers that are
not its own, the origin rule, a static Authorization header left alone, and a 401 with nobody to
take the authorization URL. (The same rules end to end: tests/test_oauth_flow.py and
tests/test_oauth_processes.py against the OAuth peer.)"""

from __future__ import annotations

import time

import pytest
from kxen_oauth._records import TokenRecord
from kxen_oauth.engine import OAuthEngine
from kxen_oauth.store import TokenStore

from kxen_core import ServerConfig
from kxen_core.config.models import OAuthConfig
from kxen_core.errors import AuthRequired
from kxen_core.transport import AuthChallenge, CredentialRequest

pytestmark = pytest.mark.anyio

URL = "https://mcp.example.com/mcp"


def server(**kw) -> ServerConfig:
    return ServerConfig(**{"name": "r", "url": URL, "transport": "http", **kw})


def ask(url: str = URL, challenge: AuthChallenge | None = None) -> CredentialRequest:
    return CredentialRequest(method="POST", url=url, challenge=challenge)


async def store_token(**kw) -> TokenRecord:
    kw = {"config_scope": "user", "home": "", **kw}
    record = TokenRecord(
        server="r",
        resource=URL,
        issuer="https://as.example.com",
        client_id="c",
        access_token="AT-engine-1",
        expires_at=time.time() + 3600,
        **kw,
    )
    await TokenStore().put_token(record)
    return record


async def test_a_server_that_is_not_its_own_costs_no_store(_kxen_data_dir):
    engine = OAuthEngine()
    assert await engine.lookup(server(), ask()) is None
    assert await engine.lookup(ServerConfig(name="s", command="x"), ask()) is None
    assert not any(_kxen_data_dir.iterdir())  # nothing created, nothing locked


async def test_a_stored_token_goes_only_to_its_own_origin(_kxen_data_dir):
    await store_token()
    engine = OAuthEngine()
    assert await engine.lookup(server(), ask()) == {"Authorization": "Bearer AT-engine-1"}
    assert await engine.lookup(server(), ask(f"{URL}?session=1")) == {"Authorization": "Bearer AT-engine-1"}
    assert await engine.lookup(server(), ask("https://other.example.com/mcp")) is None
    assert await engine.lookup(server(), ask("http://mcp.example.com/mcp")) is None  # not even another scheme
    assert await engine.lookup(server(url=URL + "/v2"), ask(URL + "/v2")) is None  # another resource
    assert await engine.lookup(server(scope="project"), ask()) is None  # another config scope


async def test_a_static_authorization_header_is_left_alone(_kxen_data_dir):
    await store_token()
    engine = OAuthEngine()
    static = server(headers={"authorization": "Bearer mine"}, oauth=OAuthConfig())
    assert await engine.lookup(static, ask()) is None
    assert await engine.lookup(static, ask(challenge=AuthChallenge(status=401))) is None


async def test_a_401_with_nobody_to_take_the_url_needs_login(_kxen_data_dir):
    engine = OAuthEngine()
    challenge = AuthChallenge(
        status=401, www_authenticate='Bearer resource_metadata="https://mcp.example.com/.well-known/x"'
    )
    with pytest.raises(AuthRequired) as caught:
        await engine.lookup(server(), ask(challenge=challenge))
    assert caught.value.next_step == "kxen mcp login r" and caught.value.status == 401
    assert "sign-in is needed" in str(caught.value)
    # the server answered a challenge: from now on it is the engine's own (a token would be sent)
    await store_token()
    engine.store().forget_cache()  # while there was no file it looks again only every 0.2 s
    assert await engine.lookup(server(), ask()) == {"Authorization": "Bearer AT-engine-1"}


async def test_a_403_names_the_missing_scopes(_kxen_data_dir):
    await store_token(scope="read")
    engine = OAuthEngine()
    challenge = AuthChallenge(status=403, www_authenticate='Bearer error="insufficient_scope", scope="read write"')
    with pytest.raises(AuthRequired) as caught:
        await engine.lookup(server(), ask(challenge=challenge))
    assert caught.value.scopes == ("read", "write") and caught.value.status == 403


async def test_a_token_is_bound_to_the_home_whose_config_it_came_from(_kxen_data_dir, tmp_path):
    """One data directory, two homes (the real one and ``--home /tmp/demo``), the same server
    name and URL: neither reads, refreshes or signs out the other's sign-in."""
    from kxen_oauth._binding import home_of

    real, demo = tmp_path / "real-home", tmp_path / "demo-home"
    real.mkdir()
    demo.mkdir()
    in_real = server(source=str(real / "mcp.json"))
    in_demo = server(source=str(demo / "mcp.json"))
    await store_token(home=home_of(in_real, None))
    engine = OAuthEngine()
    assert await engine.lookup(in_real, ask()) == {"Authorization": "Bearer AT-engine-1"}
    assert await engine.lookup(in_demo, ask()) is None  # the demo home has no sign-in
    assert await engine.lookup(server(), ask()) is None  # nor has an entry of no home
    # a spelling of the same home through a symlink is the same home
    (tmp_path / "link").symlink_to(real)
    assert await engine.lookup(server(source=str(tmp_path / "link" / "mcp.json")), ask()) is not None
    # the demo home's 401 is a sign-in of its own, never the real home's token
    challenge = AuthChallenge(status=401, www_authenticate="Bearer")
    with pytest.raises(AuthRequired):
        await engine.lookup(in_demo, ask(challenge=challenge))
    assert await engine.logout(in_demo, forget_client=False) is False  # nothing of the demo home's
    assert [t.home for t in TokenStore().tokens()] == [str(real.resolve())]
    assert await engine.logout(in_real, forget_client=False) is True
    assert TokenStore().tokens() == []


async def test_a_project_entry_is_bound_to_the_runtimes_home(_kxen_data_dir, tmp_path):
    from kxen_core.transport import TransportContext

    def asked_from(home) -> CredentialRequest:
        return CredentialRequest(method="POST", url=URL, context=TransportContext(workspace=tmp_path, home=home))

    project = server(scope="project", source=str(tmp_path / "ws" / ".kxen" / "mcp.json"))
    await store_token(config_scope="project", home=str((tmp_path).resolve()))
    engine = OAuthEngine()
    assert await engine.lookup(project, asked_from(tmp_path)) == {"Authorization": "Bearer AT-engine-1"}
    assert await engine.lookup(project, asked_from(tmp_path / "demo")) is None


def told(tmp_path):
    from kxen_core.transport import TransportContext

    notices: list[str] = []
    context = TransportContext(workspace=tmp_path, notice=notices.append)
    return notices, CredentialRequest(method="POST", url=URL, context=context)


async def test_a_repaired_store_mode_is_told_to_the_server_that_asked(_kxen_data_dir, tmp_path):
    import os

    await store_token()
    os.chmod(_kxen_data_dir / "mcp-oauth.json", 0o644)
    notices, request = told(tmp_path)
    engine = OAuthEngine()
    assert await engine.lookup(server(), request) == {"Authorization": "Bearer AT-engine-1"}
    (notice,) = notices
    assert "mcp-oauth.json" in notice and "0644" in notice and "0600" in notice and "AT-engine-1" not in notice
    assert await engine.lookup(server(), request) is not None
    assert len(notices) == 1  # told once


async def test_a_store_directory_others_can_write_leaves_the_server_waiting_with_the_reason(_kxen_data_dir, tmp_path):
    import os

    await store_token()
    os.chmod(_kxen_data_dir, 0o777)
    try:
        engine = OAuthEngine()
        _, request = told(tmp_path)
        assert await engine.lookup(server(), request) is None  # not its own (no oauth block, no challenge)
        with pytest.raises(AuthRequired) as caught:
            await engine.lookup(server(oauth=OAuthConfig()), request)
        assert str(_kxen_data_dir) in str(caught.value) and "written by others" in str(caught.value)
        assert "KXEN_DATA_DIR" in (caught.value.next_step or "")
        assert "AT-engine-1" not in str(caught.value)
    finally:
        os.chmod(_kxen_data_dir, 0o700)

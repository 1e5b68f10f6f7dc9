"""The header of a stored Bearer token is a ReusableHeaders whose check fails as soon as asking
the engine could answer anything else: another writer rewrote or emptied the store file, the
token fell due by the clock, the environment that picks the store changed, the engine sent
another token for the entry or signed it out; another resource URL never gets it at all. (The
same against the OAuth peer: tests/test_oauth_reuse_peers.py.)"""

from __future__ import annotations

import os
import time

import pytest
from kxen_oauth._records import TokenRecord
from kxen_oauth.engine import OAuthEngine
from kxen_oauth.refresh import REFRESH_AHEAD
from kxen_oauth.store import TokenStore
from test_oauth_engine import URL, ask, server

from kxen_core import ReusableHeaders
from kxen_core.transport import CredentialRequest

pytestmark = pytest.mark.anyio


def record(token: str = "AT-reuse-1", *, expires_in: float = 3600, **kw) -> TokenRecord:
    fields = {
        "config_scope": "user",
        "server": "r",
        "resource": URL,
        "issuer": "https://as.example.com",
        "client_id": "c",
        "access_token": token,
        "expires_at": time.time() + expires_in,
        "home": "",
        **kw,
    }
    return TokenRecord(**fields)


async def held(engine: OAuthEngine, token: str = "AT-reuse-1") -> ReusableHeaders:
    answer = await engine.lookup(server(), ask())
    assert answer == {"Authorization": f"Bearer {token}"}
    assert isinstance(answer, ReusableHeaders), type(answer)
    assert answer.still_valid() and answer.still_valid()  # nothing changed: it holds, check after check
    return answer


async def test_another_writer_rewriting_the_store_ends_it():
    await TokenStore().put_token(record())
    engine = OAuthEngine()
    answer = await held(engine)
    await TokenStore().put_token(record("AT-reuse-2"))  # another process's store object: a refresh
    assert not answer.still_valid()
    answer = await held(engine, "AT-reuse-2")  # asked again: the new token, held in turn
    await TokenStore().put_token(record("AT-reuse-2"))  # rewritten, the same token: asked again all the same
    assert not answer.still_valid()
    answer = await held(engine, "AT-reuse-2")
    await TokenStore().drop_tokens("user", "r", "")  # removed (a logout elsewhere)
    assert not answer.still_valid()
    assert await engine.lookup(server(), ask()) is None


async def test_a_forgotten_cache_ends_it():
    """A 401 (and every refresh) forgets the store's cache: the answer is not sent again unasked."""
    await TokenStore().put_token(record())
    engine = OAuthEngine()
    answer = await held(engine)
    engine.store().forget_cache()
    assert not answer.still_valid()


async def test_the_token_falling_due_by_the_clock_ends_it(monkeypatch):
    await TokenStore().put_token(record(expires_in=REFRESH_AHEAD + 30))
    engine = OAuthEngine()
    answer = await held(engine)
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now + 29)
    assert answer.still_valid()
    monkeypatch.setattr(time, "time", lambda: now + 31)  # within REFRESH_AHEAD of its expiry: due
    assert not answer.still_valid()
    monkeypatch.setattr(time, "time", lambda: now + REFRESH_AHEAD + 60)  # expired
    assert not answer.still_valid()
    again = await engine.lookup(server(), ask())  # nothing to refresh it with: sent as before, but never held
    assert again == {"Authorization": "Bearer AT-reuse-1"} and not isinstance(again, ReusableHeaders)


async def test_a_token_stored_due_is_never_held():
    await TokenStore().put_token(record(expires_in=REFRESH_AHEAD - 1))
    answer = await OAuthEngine().lookup(server(), ask())
    assert answer == {"Authorization": "Bearer AT-reuse-1"} and not isinstance(answer, ReusableHeaders)


@pytest.mark.parametrize("name", ["KXEN_DATA_DIR", "XDG_DATA_HOME", "HOME"])
async def test_a_change_of_the_environment_that_picks_the_store_ends_it(monkeypatch, tmp_path, name):
    await TokenStore().put_token(record())
    engine = OAuthEngine()
    answer = await held(engine)
    before = os.environ.get(name)
    monkeypatch.setenv(name, str(tmp_path / "elsewhere"))
    assert not answer.still_valid()
    if name == "KXEN_DATA_DIR":
        assert await engine.lookup(server(), ask()) is None  # another store: no token there
    if before is None:
        monkeypatch.delenv(name)
    else:
        monkeypatch.setenv(name, before)
    assert answer.still_valid()  # the same store, the same record: it holds again


async def test_a_challenge_or_a_logout_ends_it():
    await TokenStore().put_token(record())
    engine = OAuthEngine()
    answer = await held(engine)
    engine._sent[answer_key(engine)] = "AT-other"  # the engine sent another token for the entry meanwhile
    assert not answer.still_valid()
    answer = await held(engine)
    await engine.logout(server(), forget_client=False)
    assert not answer.still_valid()


async def test_a_repair_waiting_to_be_told_ends_it():
    await TokenStore().put_token(record())
    engine = OAuthEngine()
    answer = await held(engine)
    engine.store().repairs.append("the OAuth token store was open to others: kxen set it to 0600")
    assert not answer.still_valid()
    told: list[str] = []
    from kxen_core import TransportContext

    context = TransportContext(workspace=os.getcwd(), notice=told.append)
    await engine.lookup(server(), CredentialRequest(method="POST", url=URL, context=context))
    assert told and not engine.store().repairs


async def test_another_resource_url_never_gets_it():
    await TokenStore().put_token(record())
    engine = OAuthEngine()
    await held(engine)
    assert await engine.lookup(server(url=URL + "/v2"), ask(URL + "/v2")) is None
    assert await engine.lookup(server(), ask("https://other.example.com/mcp")) is None


async def test_a_dpop_token_is_asked_for_every_request():
    await TokenStore().put_token(record(token_type="DPoP"))
    engine = OAuthEngine()
    await engine.prover(answer_key(engine))  # the entry's key pair, as a sign-in makes it
    first = await engine.lookup(server(), ask())
    assert first is not None and first["Authorization"] == "DPoP AT-reuse-1" and "DPoP" in first
    assert not isinstance(first, ReusableHeaders)


def answer_key(engine: OAuthEngine):
    return engine.key_of(server())

"""kxen-oauth registers the tokens and client secrets its process handled (``kxen_register_secrets``),
so the core scrubs them from whatever a server sends back; the source is O(1) while nothing changed.
The whole path against the OAuth peer: tests/test_server_text_scrub_peers.py."""

from __future__ import annotations

import kxen_oauth.hooks as hooks
import pytest
from kxen_oauth.engine import OAuthEngine

from kxen_core.plugins.manager import make_plugin_manager
from kxen_core.plugins.secrets import secret_sources
from kxen_core.safe_text import Secrets


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> OAuthEngine:
    fresh = OAuthEngine()
    monkeypatch.setattr(hooks, "_engine", fresh)
    return fresh


def test_the_plugin_registers_what_its_engine_handled(engine):
    (source,) = secret_sources(make_plugin_manager(allow=["oauth"]))
    assert source() == frozenset()
    engine.remember("access-token-0123456789", "refresh-token-9876543210", None)
    held = source()
    assert held == {"access-token-0123456789", "refresh-token-9876543210"}
    assert source() is held  # the same object while nothing was added: the core does not rebuild
    scrub = Secrets(sources=[source])
    assert scrub.text("echo access-token-0123456789 / refresh-token-9876543210") == "echo *** / ***"
    engine.remember("client-secret-abcdef")
    assert scrub.text("x client-secret-abcdef") == "x ***"


def test_no_engine_no_values(monkeypatch):
    monkeypatch.setattr(hooks, "_engine", None)
    assert hooks._held() == frozenset()
    assert hooks._held() is hooks._held()  # one object: the core's check of an unchanged answer is `is`
    assert hooks._engine is None  # asking did not load the engine


def test_held_secrets_follow_a_trim_that_leaves_the_same_count():
    from kxen_oauth._held import MAX_HELD, HeldSecrets

    held = HeldSecrets()
    held.remember(*[f"old-secret-{i:04}" for i in range(MAX_HELD // 2)])
    first = held.held_secrets()
    held.remember(*[f"new-secret-{i:04}" for i in range(MAX_HELD // 2 + 1)])  # past the bound: the oldest half goes
    now = held.held_secrets()
    assert len(now) == len(first) == MAX_HELD // 2  # the same count ...
    assert f"new-secret-{MAX_HELD // 2:04}" in now and not now & first  # ... of other values: handed over anew
    assert held.held_secrets() is now  # nothing changed since: the same object

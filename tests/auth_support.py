"""Helpers of the auth tests (tests/test_auth_*.py): fake credential plugins, the gated SDK peer
(tests/peers/gated_server.py: the SDK server behind a Bearer-token gate), and the secret check."""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from kxen_core import hookimpl

GATED_SERVER = Path(__file__).resolve().parent / "peers" / "gated_server.py"
GOOD = "tok-GOOD-5f3a9e"
STALE = "tok-STALE-77c1d0"
#: every fake token of these tests: none may ever appear in status, errors, logs or CLI output
FAKE_TOKENS = (GOOD, STALE)


class Credentials:
    """A credential plugin: answers ``Bearer <first>``, and ``Bearer <on_challenge>`` when asked
    again after a 401/403 (``None``: it has nothing better). Records every request it was asked."""

    def __init__(
        self, first: str | None = GOOD, on_challenge: str | None = None, *, scoped: dict[str, str] | None = None
    ) -> None:
        self.first = first
        self.on_challenge = on_challenge
        self.scoped = scoped or {}  # scope asked by a 403 -> the token that has it
        self.asked: list[Any] = []

    @hookimpl
    async def kxen_credential_lookup(self, server: Any, request: Any) -> dict[str, str] | None:
        self.asked.append(request)
        token = self.first
        if request.challenge is not None:
            token = self.on_challenge
            for scope, scoped in self.scoped.items():
                if scope in request.challenge.www_authenticate:
                    token = scoped
        return {"Authorization": f"Bearer {token}"} if token is not None else None

    @property
    def challenges(self) -> list[Any]:
        return [r.challenge for r in self.asked if r.challenge is not None]


class Refuses:
    """A credential plugin that raises ``AuthRequired`` (no stored token, nobody to sign in)."""

    def __init__(self, reason: str = "no token stored for this server; sign in first") -> None:
        self.reason = reason

    @hookimpl
    def kxen_credential_lookup(self, server: Any, request: Any) -> dict[str, str] | None:
        from kxen_core.errors import AuthRequired

        raise AuthRequired(self.reason, next_step=f"kxen mcp login {server.name}", status=None)


class LoginPlugin:
    """Says a sign-in plugin is installed (it implements ``kxen_auth_login``), offering no flow."""

    @hookimpl
    def kxen_auth_login(self, server: Any, request: Any) -> Any:
        return None


def gated(start_peer: Callable[..., int], mode: str = "stateful", *flags: str) -> str:
    """Start the gated SDK peer; its MCP URL."""
    pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK (a dev dependency) is not installed")
    port = start_peer([sys.executable, str(GATED_SERVER), mode, "{port}", "--token", GOOD, *flags])
    return f"http://127.0.0.1:{port}/{'sse' if mode == 'sse' else 'mcp'}"


async def gate_stats(url: str) -> dict[str, int]:
    """What the gate counted: ``"<status|ok> <METHOD> <rpc method or path> <token>" -> n``."""
    base = url.rsplit("/", 1)[0]

    def fetch() -> dict[str, int]:
        with urllib.request.urlopen(f"{base}/gate-stats", timeout=10) as response:  # 127.0.0.1 only
            return json.loads(response.read())

    return await anyio.to_thread.run_sync(fetch)


def assert_no_token(where: str, text: str) -> None:
    for token in FAKE_TOKENS:
        assert token not in text, f"a token leaked into {where}: {text[:2000]}"


class FakeFlow:
    """A sign-in that finishes when the test releases it: then the credential plugin has the good token."""

    def __init__(self, plugin: SignIn, server: Any, request: Any) -> None:
        self.plugin, self.server, self.request = plugin, server, request
        self.release = anyio.Event()
        self.finished = False
        self.closed = 0

    async def start(self) -> str:
        if self.plugin.start_error is not None:
            raise self.plugin.start_error
        return self.plugin.url

    async def finish(self) -> None:
        with anyio.fail_after(30):
            await self.release.wait()
        if self.plugin.deny:
            from kxen_core.errors import AuthRequired

            raise AuthRequired(
                "the person declined the sign-in (access_denied)", next_step=f"kxen mcp login {self.server.name}"
            )
        self.plugin.creds.first = GOOD  # what a real flow stores: the next request carries it
        self.finished = True

    async def aclose(self) -> None:
        self.closed += 1


class SignIn:
    """A sign-in plugin (``kxen_auth_login``, ``kxen_auth_logout``) over a :class:`Credentials`."""

    def __init__(
        self,
        creds: Credentials,
        *,
        url: str = "https://auth.example/authorize?client_id=kxen&state=abc",
        deny: bool = False,
        auto: bool = False,
    ) -> None:
        self.creds, self.url, self.deny, self.auto = creds, url, deny, auto
        self.start_error: BaseException | None = None  # what start() raises, if anything
        self.flows: list[FakeFlow] = []
        self.logouts: list[Any] = []

    @hookimpl
    def kxen_auth_login(self, server: Any, request: Any) -> FakeFlow | None:
        if server.url is None:
            return None
        flow = FakeFlow(self, server, request)
        if self.auto:
            flow.release.set()
        self.flows.append(flow)
        return flow

    @hookimpl
    async def kxen_auth_logout(self, server: Any, request: Any) -> bool:
        self.logouts.append(request)
        had = self.creds.first == GOOD
        self.creds.first = None
        return had

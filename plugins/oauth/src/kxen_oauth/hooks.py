"""The ``oauth`` entry point: ``kxen_credential_lookup``, ``kxen_auth_login``, ``kxen_auth_logout``,
``kxen_register_secrets`` (the tokens and client secrets this process handled, which the core scrubs
from whatever a server sends back).

Kept light: the engine (Authlib, httpx, the store) is imported on first use, and a server that has
no ``oauth`` block, never answered a 401 challenge and has no stored sign-in costs one ``stat``.
A stored Bearer token that is not due is answered as a :class:`kxen_core.ReusableHeaders`: the
transport sends it again without asking while its check passes (see :mod:`._reuse`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kxen_core import hookimpl

if TYPE_CHECKING:
    from kxen_core import CredentialRequest, ServerConfig
    from kxen_core.auth import AuthFlow, LoginRequest

    from .engine import OAuthEngine

_engine: OAuthEngine | None = None


def engine() -> OAuthEngine:
    """This process's engine (one per process: the store cache, the refresh locks)."""
    global _engine
    if _engine is None:
        from .engine import OAuthEngine

        _engine = OAuthEngine()
    return _engine


def _loopback(settings: Any) -> bool:
    return bool(settings is not None and settings.mcp.allow_loopback_http)


@hookimpl
async def kxen_credential_lookup(server: ServerConfig, request: CredentialRequest) -> dict[str, str] | None:
    if server.url is None:
        return None
    return await engine().lookup(server, request)


@hookimpl
def kxen_auth_login(server: ServerConfig, request: LoginRequest) -> AuthFlow | None:
    if not server.url or not server.is_remote:
        return None
    from ._binding import home_of
    from .flow import OAuthFlow

    return OAuthFlow(
        engine(),
        server,
        allow_loopback_http=_loopback(request.settings),
        scopes=tuple(request.scopes),
        home=home_of(server, request.home),
        notice=getattr(request, "notice", None),
    )


@hookimpl
async def kxen_auth_logout(server: ServerConfig, request: LoginRequest) -> bool | None:
    if not server.url:
        return None
    return await engine().logout(server, forget_client=request.forget_client, home=request.home)


#: the answer while there is no engine: one object, so the core's check of an unchanged answer is
#: one identity test (``frozenset()`` makes a new object at each call)
_NONE_HELD: frozenset[str] = frozenset()


def _held() -> frozenset[str]:
    # no engine yet: this process has handled no token (and the engine is not loaded for asking)
    return _engine.held_secrets() if _engine is not None else _NONE_HELD


@hookimpl
def kxen_register_secrets(register: Any) -> None:
    register(_held)

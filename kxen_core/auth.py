"""What a sign-in plugin (kxen-oauth) and the core exchange for an interactive login.

``kxen_auth_login(server, request)`` returns an :class:`AuthFlow` for ``server`` (or ``None`` when
the plugin has nothing to sign in to); the core (``Runtime.login_start``, ``kxen mcp login``) starts
it, shows the URL it returns to a person, waits for ``finish`` and closes it. ``kxen_auth_logout``
forgets what was stored; ``kxen_authorize_url`` lets a host (or a test) take an authorization URL.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    import pluggy

    from kxen_core.config.models import Settings


def _ignore(message: str) -> None:
    pass


def _scopes(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(str(s) for s in value)  # type: ignore[attr-defined]


@attrs.frozen(kw_only=True)
class LoginRequest:
    """What a sign-in (or sign-out) is asked with.

    ``open_browser`` says whether the core will open a browser on the URL (informational: the core
    does it, never the plugin); ``scopes`` are extra scopes asked for (a step-up after a 403
    ``insufficient_scope``); ``forget_client`` asks a sign-out to forget the client registration
    too. ``notice(message)`` tells the person something they should know though nothing failed
    (a repaired file mode): the core shows it with the sign-in's outcome (``LoginStatus.notes``).
    """

    settings: Settings | None = None
    home: Path | None = None
    pm: pluggy.PluginManager | None = attrs.field(default=None, eq=False, repr=False)
    open_browser: bool = False
    scopes: tuple[str, ...] = attrs.field(default=(), converter=_scopes)
    forget_client: bool = False
    notice: Callable[[str], None] = attrs.field(default=_ignore, eq=False, repr=False)


@runtime_checkable
class AuthFlow(Protocol):
    """One interactive sign-in, started once and closed once."""

    async def start(self) -> str:
        """Discover, register, prepare PKCE and a 127.0.0.1 redirect listener with a bounded
        lifetime (default 300 s); return the authorization URL, or ``""`` when no person is needed
        (a client-credentials grant already got a token)."""

    async def finish(self) -> None:
        """Wait (bounded) for the redirect, check ``state`` (and ``iss`` when the authorization
        server supports it), exchange the code and store the token. Raises
        :class:`kxen_core.errors.AuthRequired` with a reason on failure, denial or timeout."""

    async def aclose(self) -> None:
        """Cancel: stop the listener. Idempotent."""


__all__ = ["AuthFlow", "LoginRequest"]

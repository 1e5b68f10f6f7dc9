"""The Runtime's login API (mixed into :class:`kxen_core.Runtime`); the sign-in machinery is in
:mod:`.logins`, loaded on the first call, not with the runtime (docs/performance.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import anyio.abc

    from kxen_core.config import Config
    from kxen_core.plugins.manager import KxenPluginManager
    from kxen_core.runtime.logins import LoginStarted, LoginStatus
    from kxen_core.runtime.server import Server


class LoginHost:
    """Mixed into :class:`kxen_core.Runtime`: the login API. The attributes below are the runtime's."""

    if TYPE_CHECKING:
        pm: KxenPluginManager
        config: Config | None
        _tg: anyio.abc.TaskGroup | None

        def _server(self, name: str) -> Server: ...

        def _spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> None: ...

        async def restart(self, name: str) -> None: ...

    async def login_start(self, name: str, *, scopes: Sequence[str] = (), open_browser: bool = False) -> LoginStarted:
        """Start signing in to server ``name``: return the authorization URL and a flow id.

        ``scopes`` are asked on top of the usual ones (a step-up after a 403 ``insufficient_scope``);
        ``open_browser`` tells the plugin the caller will open the URL in a browser. A sign-in
        already running for that server is cancelled. Raises ``UnknownTool`` for an unknown server,
        ``Unsupported`` when no plugin can sign in to it, ``AuthRequired`` (with a reason) when the
        sign-in cannot start, ``PluginHookError`` when the plugin broke."""
        from kxen_core.runtime import logins

        return await logins.start(self, name, scopes, open_browser)

    def login_poll(self, flow_id: str) -> LoginStatus:
        """Where sign-in ``flow_id`` is. ``InvalidArguments`` for an id this runtime did not hand out
        (or one finished so long ago it was forgotten)."""
        from kxen_core.runtime import logins

        return logins.poll(self, flow_id)

    def logins(self) -> list[dict[str, Any]]:
        """The sign-ins of this runtime, running and recently ended, oldest first: ``flowId``,
        ``server``, ``state`` (pending, complete, failed, cancelled), ``reason`` and ``notes`` (as
        :meth:`login_poll` gives them). Each change is a ``login`` event of :meth:`settings_events`."""
        from kxen_core.runtime import logins

        return logins.listed(self)

    async def login_cancel(self, flow_id: str) -> None:
        """Cancel sign-in ``flow_id`` (its listener stops; it ends ``cancelled``). Nothing happens
        to one that already ended."""
        from kxen_core.runtime import logins

        await logins.cancel(self, flow_id)

    async def logout(self, name: str, *, forget_client: bool = False) -> bool:
        """Forget the stored tokens of server ``name`` (and its client registration with
        ``forget_client``); True when a plugin removed something. A running sign-in for it is
        cancelled, and the server restarted when something was removed (so its state shows what it
        wants now)."""
        from kxen_core.runtime import logins

        return await logins.logout(self, name, forget_client)


__all__ = ["LoginHost"]

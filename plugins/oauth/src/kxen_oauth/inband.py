"""An in-band sign-in: the flow a 401 or 403 started, its URL handed to a ``kxen_authorize_url``
taker (a host dialog, a headless test) while the flow waits for the redirect."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from kxen_core import ServerConfig, hookcall
from kxen_core.errors import AuthRequired, PluginHookError

if TYPE_CHECKING:
    from ._ports import Engine
    from .flow import OAuthFlow


async def run_in_band(engine: Engine, server: ServerConfig, flow: OAuthFlow, pm: Any) -> None:
    """Start ``flow``, hand its URL to the ``kxen_authorize_url`` taker while waiting for the
    redirect, and end with the token stored (or :class:`AuthRequired`)."""
    try:
        url = await flow.start()
        if not url:
            return
        taken: Any = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(flow.finish)
                try:
                    taken = await hookcall.acall_first(pm, "kxen_authorize_url", server=server, url=url)
                except PluginHookError as exc:  # its text may quote the redirect (and so the code)
                    raise engine.need_login(server, f"the sign-in through plugin {exc.plugin!r} failed") from None
                if not taken:
                    tg.cancel_scope.cancel()
        except BaseException as exc:  # an exception group of finish's failure: shown as itself
            auth = [e for e in getattr(exc, "exceptions", ()) if isinstance(e, AuthRequired)]
            if auth:
                raise auth[0] from None
            raise
        if not taken:
            raise engine.need_login(server, "no one took the authorization URL: sign in with kxen mcp login")
    finally:
        await flow.aclose()

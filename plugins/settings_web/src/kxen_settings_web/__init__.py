"""kxen's Settings page: every MCP server of a workspace's runtime, its approvals, the remote-MCP
confirmation, sign-in and restart, live, on 127.0.0.1.

- ``kxen settings [--port N] [--no-open]``: the command (:mod:`.hooks`);
- :func:`serve`: serve a :class:`kxen_core.Runtime`'s page until cancelled (what the command runs);
- :func:`settings_app`: the page as an ASGI app, for a host that serves it itself.

The page renders the core's Settings API and adds nothing to it (:mod:`.app`); its lock (loopback
Host, a per-run secret exchanged for a cookie, Origin and CSRF checks, CSP) is :mod:`.guard`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kxen_settings_web.app import SettingsPage, settings_app
    from kxen_settings_web.serving import PortInUse, serve

_LAZY = {"SettingsPage": "app", "settings_app": "app", "serve": "serving", "PortInUse": "serving"}


def __getattr__(name: str) -> Any:  # Starlette, uvicorn and Jinja2 load on first use, not with the entry point
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"kxen_settings_web.{_LAZY[name]}"), name)
    raise AttributeError(name)


__all__ = ["PortInUse", "SettingsPage", "serve", "settings_app"]

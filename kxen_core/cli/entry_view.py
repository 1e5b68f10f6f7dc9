"""A server entry as kxen reads it, for people (``kxen mcp get``, ``list``, ``import``).

Values that took host variables are shown as written (``${TOKEN}``); other secrets are redacted:
credential headers as ``***``, env values of sensitive keys as a digest (as an approval shows
them), URL query values as ``***``, an OAuth client secret as ``***``.
"""

from __future__ import annotations

from typing import Any

from kxen_core.config.expand import references
from kxen_core.config.models import UNREAD, ServerConfig
from kxen_core.safe_text import redacted_url, shown_url


def describe(server: ServerConfig, *, brief: bool = False) -> dict[str, Any]:
    """An entry as kxen reads it, for people: values that took host variables as written
    (``${TOKEN}``), other secrets redacted (credential headers ``***``, sensitive env values as a
    digest, URL query values ``***``)."""
    from kxen_core.config.project import secret_header
    from kxen_core.launch.resolve import printable, shown_env_value

    unread = server.kind == UNREAD
    refs = references(server)
    shown: dict[str, Any] = {
        "name": server.name,
        "scope": server.scope,
        "source": server.source,
        "transport": server.kind,
        "enabled": None if unread else server.enabled,
        # a value that took host variables is shown as written (``${HOME}/bin/tool``), never expanded
        "command": None if unread else _written(refs, "command", server.command),
        "args": [] if unread else [_written(refs, f"args[{i}]", a) for i, a in enumerate(server.args)],
        "url": shown_url(server) or None,
    }
    if brief:
        return shown
    env = {}
    for key, value in sorted(server.env.items()):
        ref = refs.get(f"env.{key}")
        env[printable(key)] = ref.written if ref else shown_env_value(key, value, user=server.scope == "user")
    headers = {}
    for key, value in server.headers.items():
        ref = refs.get(f"headers.{key}")
        headers[key] = ref.written if ref else ("***" if secret_header(key) else value)
    oauth = None
    if server.oauth is not None:
        o = server.oauth
        oauth = {
            "clientId": o.clientId,
            "scopes": list(o.scopes),
            "authorizationServerMetadataUrl": redacted_url(o.authorizationServerMetadataUrl) or None,
            "clientSecret": "***" if o.clientSecret else None,
        }
    shown.update(
        cwd=server.cwd,
        env=env,
        headers=headers,
        oauth=oauth,
        options=dict(server.options),
        toolPolicies=dict(server.toolPolicies),
        defaultToolPolicy=None if unread else server.defaultToolPolicy,
        timeouts=None if unread else budgets(server),
        protocolEra=None if unread else server.protocolEra,
        fromEnvironment=sorted(refs),
        read=not unread,
    )
    return shown


def budgets(server: ServerConfig) -> dict[str, Any]:
    """The time budgets in force for ``server`` (docs/config.md, "Timeouts")."""
    t = server.timeouts
    out: dict[str, Any] = {
        "requestSeconds": t.requestSeconds,
        "initializeSeconds": t.initializeSeconds,
        **({} if server.is_remote else {"startupSeconds": t.startupSeconds}),
        "resetOnProgress": t.resetOnProgress,
        "maxTotalSeconds": t.maxTotalSeconds,
    }
    if t.toolSeconds:
        out["toolSeconds"] = dict(t.toolSeconds)
    return out


def _written(refs: dict[str, Any], path: str, value: Any) -> Any:
    ref = refs.get(path)
    return ref.written if ref is not None else value


__all__ = ["describe"]

"""The remote-MCP confirmation: before a remote server runs, the user confirms they know its
operator, its data retention and the access scope it gets. The confirmation is recorded per
canonical URL in the user's ``config.toml`` (``[mcp] remote_acknowledged``, written by
:func:`kxen_core.config.trust.acknowledge_remote`; never a project file).

A URL that took ``${VAR}`` values or carries a query (both may hold secrets) is recorded as
``sha256:`` and the digest of its canonical form, so no secret is written beside the list. A
remote server whose key is not in the list -- added after the confirmation, or whose URL changed --
stays ``disabled`` with :data:`NOT_ACKNOWLEDGED` and the next step (:data:`ACKNOWLEDGE_STEP`).
The check fails closed: with no ``remote_acknowledged`` key at all (``remote_enabled = true``
written by hand) nothing is confirmed, as with an empty list. There is no way to confirm every
server at once in the config: each is named by its own key.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from kxen_core.policy.approvals import canonical_url
from kxen_core.safe_text import shown_url

if TYPE_CHECKING:
    from kxen_core.config import Config, ServerConfig

#: the question asked of each remote server before it may run
QUESTION = "do you know who operates it, how long it keeps what it is sent, and what it may access?"
#: the reason of a remote server that waits for the confirmation
NOT_ACKNOWLEDGED = "remote server not confirmed: its operator, data retention and access scope were not acknowledged"
#: the next step of such a server
ACKNOWLEDGE_STEP = "confirm it: kxen remote on (or Runtime.acknowledge_remote)"


def acknowledgement_key(server: ServerConfig) -> str:
    """What ``remote_acknowledged`` records for ``server``: its canonical URL, or ``sha256:`` and
    the digest of it when the URL took variables or has a query."""
    url = canonical_url(server.url or "")
    took_variables = any(e.path == "url" for e in getattr(server, "expanded", ()))
    try:
        query = urlsplit(url).query
    except ValueError:
        query = ""
    if took_variables or query:
        return "sha256:" + hashlib.sha256(url.encode("utf-8")).hexdigest()
    return url


def acknowledged(config: Config, server: ServerConfig) -> bool:
    """Whether the user confirmed ``server`` (a local server needs no confirmation): its key is in
    ``remote_acknowledged``. With no such key at all (a switch written by hand) no remote server
    is confirmed, as with an empty list."""
    if not server.is_remote:
        return True
    return acknowledgement_key(server) in (config.settings.mcp.remote_acknowledged or ())


def remote_servers(config: Config) -> list[dict[str, Any]]:
    """Each configured remote server (the ones in force and the user's behind a project entry) as
    the confirmation shows it: name, scope, transport, URL (query values hidden), host, the key it
    is recorded by, and whether it is confirmed."""
    seen: dict[str, ServerConfig] = {}
    for server in [*config.servers.values(), *config.user_servers.values()]:
        if server.is_remote and acknowledgement_key(server) not in seen:
            seen[acknowledgement_key(server)] = server
    rows = []
    for key, server in seen.items():
        shown = shown_url(server)
        try:
            host = urlsplit(shown).hostname or ""
        except ValueError:
            host = ""
        rows.append(
            {
                "name": server.name,
                "scope": server.scope,
                "transport": server.kind,
                "url": shown,
                "host": host,
                "key": key,
                "acknowledged": acknowledged(config, server),
            }
        )
    return sorted(rows, key=lambda r: (r["name"], r["scope"]))


__all__ = ["ACKNOWLEDGE_STEP", "NOT_ACKNOWLEDGED", "QUESTION", "acknowledged", "acknowledgement_key", "remote_servers"]

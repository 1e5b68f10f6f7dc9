"""A configured client credential follows no authorization server but its own.

With ``oauth.clientId`` plus ``clientSecret`` or ``privateKeyFile`` (a confidential client, by any
grant), or a ``workload_identity`` or ``enterprise_managed`` grant (its platform token or ID-JAG is
a credential too), and no pinned ``authorizationServerMetadataUrl``, the authorization server comes from the
MCP server's protected-resource metadata, which the MCP server controls. So the credential is
bound to the issuer it was first used with (kept in the store beside the tokens, per config scope,
server, home, client id and canonical server URL); a server that later names another authorization server gets nothing
posted there (no token request, no authorization URL) until the person confirms: they forget the
binding with ``kxen mcp logout NAME --forget-client`` and sign in again, or pin the authorization
server with ``oauth.authorizationServerMetadataUrl`` (the issuer they name).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kxen_core import ServerConfig

from ._urls import same_issuer, shown

if TYPE_CHECKING:
    from ._ports import Engine
    from .discovery import Discovery
    from .store import TokenStore

#: the most bindings the store keeps (the oldest go first)
MAX_BINDINGS = 1000


def confidential(server: ServerConfig) -> bool:
    """A configured client with a secret or a key, or a grant that sends a credential of its own
    (a workload's platform token, an ID-JAG: either could be replayed at the authorization server
    it was made for), whose authorization server is not pinned."""
    oauth = server.oauth
    if oauth is None or oauth.authorizationServerMetadataUrl:
        return False
    if oauth.grant in ("workload_identity", "enterprise_managed"):
        return True
    return bool(oauth.clientId and (oauth.clientSecret is not None or oauth.privateKeyFile is not None))


def _ours(item: Any, server: ServerConfig, home: str, resource: str | None) -> bool:
    return (
        isinstance(item, dict)
        and item.get("configScope") == server.scope
        and item.get("server") == server.name
        and item.get("home") == home
        and item.get("clientId") == (server.oauth.clientId if server.oauth else None)
        and (resource is None or item.get("resource") == resource)
    )


def bound_issuer(store: TokenStore, server: ServerConfig, home: str, resource: str | None = None) -> str | None:
    """The issuer ``server``'s configured credential was first used with in ``home`` (for the
    canonical URL ``resource``; None: for any), or None."""
    items = store.document().get("issuers")
    for item in items[:MAX_BINDINGS] if isinstance(items, list) else ():
        if _ours(item, server, home, resource) and isinstance(item.get("issuer"), str):
            return item["issuer"]
    return None


async def explain_switch(
    engine: Engine, server: ServerConfig, home: str, resource_metadata: str, loopback: bool
) -> None:
    """When a sign-in is needed and nobody can take it now: say why the configured credential
    will not be used (its server names another issuer), rather than only that a sign-in is needed.
    Binds nothing; a failed discovery says nothing here."""
    if not confidential(server) or bound_issuer(engine.store(), server, home) is None:
        return
    try:
        d = await engine.discover(server, resource_metadata, allow_loopback_http=loopback)
    except Exception:  # noqa: BLE001 -- AuthRequired from a failed discovery: the plain reason stands
        return
    await check_issuer(engine, server, home, d)


async def check_issuer(engine: Engine, server: ServerConfig, home: str, d: Discovery) -> None:
    """Before a configured credential is sent to (or a sign-in started at) ``d.server``: bind it
    on first use, else raise :class:`~kxen_core.errors.AuthRequired` when that is another issuer."""
    if not confidential(server):
        return
    meta = d.server
    store = engine.store()
    bound = bound_issuer(store, server, home, d.canonical)
    if bound is not None and same_issuer(bound, meta.issuer):
        return
    if bound is not None:
        name = server.name
        raise engine.need_login(
            server,
            f"the client credential configured for {name!r} (oauth.clientId or the grant's token) was first used "
            "with the authorization "
            f"server {shown(bound)}, but the server now names {shown(meta.issuer)}: nothing was sent there. If you "
            f"trust it, forget the old one (kxen mcp logout {name} --forget-client) and sign in again, or pin it "
            "with oauth.authorizationServerMetadataUrl",
            next_step=f"only if you trust {shown(meta.issuer)}: kxen mcp logout {name} --forget-client, then "
            f"kxen mcp login {name}",
        )
    async with store.locked() as doc:
        kept = doc.get("issuers")
        items = [i for i in kept if not _ours(i, server, home, d.canonical)] if isinstance(kept, list) else []
        items.append(
            {
                "configScope": server.scope,
                "server": server.name,
                "home": home,
                "resource": d.canonical,
                "clientId": server.oauth.clientId if server.oauth else None,
                "issuer": meta.issuer,
                "boundAt": time.time(),
            }
        )
        doc["issuers"] = items[-MAX_BINDINGS:]


async def forget_issuer(store: TokenStore, server: ServerConfig, home: str) -> bool:
    """Forget the binding of ``server``'s configured credential in ``home``; True when there was one."""
    if bound_issuer(store, server, home) is None:
        return False
    async with store.locked() as doc:
        items = doc.get("issuers")
        doc["issuers"] = [i for i in items if not _ours(i, server, home, None)] if isinstance(items, list) else []
    return True

"""Refresh: one at a time per token entry, across processes (a lock file beside the store), the
newer token another process stored adopted instead of refreshing again, and the rotated refresh
token on disk before the new access token is used. A refresh that fails for a while (a 5xx, a
timeout, a reset connection, a caller that gave up) never discards the refresh token: only the
authorization server's ``invalid_grant`` does."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio

from kxen_core import ServerConfig

from ._records import TokenRecord
from ._tokens import ClientCredentials, TokenAnswer, TokenError, token_request
from .registration import configured_client
from .store import LOCK_SECONDS, StoreError, TokenStore, acquire

if TYPE_CHECKING:
    from ._ports import Engine, Key

#: refresh this long before the stored expiry
REFRESH_AHEAD = 60.0


def credentials_for(engine: Engine, server: ServerConfig, record: TokenRecord) -> ClientCredentials:
    """How the client that got ``record`` authenticates: the user's configured client, the
    registration stored for its issuer, or a public client."""
    oauth = server.oauth
    if oauth is not None and oauth.clientId == record.client_id:
        from .discovery import AuthServer

        creds = configured_client(
            server, AuthServer(issuer=record.issuer, authorization_endpoint=None, token_endpoint="")
        )
        if creds is not None:
            return creds
    stored = engine.store().client(record.issuer)
    if stored is not None and stored.client_id == record.client_id:
        return ClientCredentials(
            client_id=stored.client_id, client_secret=stored.client_secret, auth_method=stored.auth_method
        )
    return ClientCredentials(client_id=record.client_id, auth_method="none")


async def refresh_entry(
    engine: Engine, server: ServerConfig, key: Key, failed: str, *, quiet: bool = False
) -> TokenRecord | None:
    """A fresh token for entry ``key`` whose token ``failed`` (expired or refused): the newer
    one another process stored meanwhile, or one refresh (the rotated refresh token stored
    before it is used). None when there is nothing to refresh with; with ``quiet`` a refused
    refresh is None too, else :class:`AuthRequired`."""
    store = engine.store()
    async with engine.lock(key):
        flock = store.refresh_lock(key)
        try:
            await acquire(flock, LOCK_SECONDS, "the token refresh lock")
        except StoreError as exc:
            raise engine.need_login(server, str(exc)) from None
        try:
            store.forget_cache()
            current = store.token(key)
            if current is None:
                return None
            if current.access_token != failed and not current.due(time.time(), REFRESH_AHEAD):
                return current  # someone else refreshed while we waited: adopt theirs
            if not current.refresh_token or not current.token_endpoint:
                return None
            creds = credentials_for(engine, server, current)
            engine.remember(current.refresh_token, creds.client_secret)
            # shielded (and bounded by the request's own limits and the store's lock): once the
            # request is sent the server may have rotated the refresh token, so its answer is read
            # and stored even when the caller gives up meanwhile, or the sign-in would be lost
            with anyio.CancelScope(shield=True):
                try:
                    async with engine.http() as client:
                        answer = await token_request(
                            client,
                            current.token_endpoint,
                            creds,
                            "refresh_token",
                            issuer=current.issuer,
                            refresh_token=current.refresh_token,
                            resource=current.resource_indicator or current.resource,
                            dpop=engine.existing_prover(key) if current.token_type == "DPoP" else None,
                        )
                except TokenError as exc:
                    kept = await _after_refused(store, key, current, exc)
                    if quiet:
                        return None
                    reason = f"refreshing the token of {server.name!r} failed: {exc}"
                    if kept:
                        reason += "; the refresh token is kept (kxen uses it again on the next start or request)"
                    raise engine.need_login(server, reason) from None
                fresh = _refreshed(current, answer)
                engine.remember(fresh.access_token, fresh.refresh_token)
                await store.put_token(fresh)  # the rotated refresh token is on disk before anyone uses it
            engine.refreshes += 1
            return fresh
        finally:
            flock.release()


async def _after_refused(store: TokenStore, key: Key, current: TokenRecord, exc: TokenError) -> bool:
    """What a failed refresh leaves; True when the refresh token is kept. Only ``invalid_grant``
    from the authorization server itself (not a 5xx page, a timeout or a reset connection, which
    say nothing about the grant) drops the entry; ``invalid_client`` drops the stored client
    registration (the next sign-in registers again) and keeps the token."""
    if exc.error == "invalid_grant" and exc.status is not None and exc.status < 500:
        await store.drop_tokens_for(key)
        return False
    if exc.error == "invalid_client" and exc.status is not None and exc.status < 500:
        await store.drop_client(current.issuer, current.client_id)
    return True


def _refreshed(current: TokenRecord, answer: TokenAnswer) -> TokenRecord:
    """The record after a refresh (the refresh token kept when none was rotated)."""
    return TokenRecord(
        config_scope=current.config_scope,
        server=current.server,
        resource=current.resource,
        issuer=current.issuer,
        client_id=current.client_id,
        access_token=answer.access_token,
        token_type=answer.token_type,
        refresh_token=answer.refresh_token or current.refresh_token,
        expires_at=answer.expires_at,
        scope=answer.scope or current.scope,
        token_endpoint=current.token_endpoint,
        resource_indicator=current.resource_indicator,
        home=current.home,
    )

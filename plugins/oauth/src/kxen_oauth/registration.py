"""Which client kxen is at an authorization server, in order (MCP 2025-11-25):

1. the user's pre-registered ``oauth.clientId`` (its secret or private key from user config only);
2. a Client ID Metadata Document when the server advertises
   ``client_id_metadata_document_supported`` AND the user names one with ``oauth.clientMetadataUrl``
   (an https URL of a document the user controls). kxen has no default document: a client id URL
   whose document someone else could change would let them name the redirect URIs a sign-in
   sends codes to;
3. RFC 7591 dynamic registration at ``registration_endpoint``. The registered client is stored
   per authorization-server issuer and reused until that server rejects it (``invalid_client``),
   then registered once more.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from kxen_core import ServerConfig

from ._fetch import OAuthHttpError, request_json
from ._records import ClientRecord
from ._tokens import ClientCredentials, read_private_key
from ._urls import shown
from .discovery import AuthServer
from .store import TokenStore

CLIENT_NAME = "kxen"


class RegistrationError(Exception):
    """No client could be had; the text says why and what to configure (no secrets)."""


def _pick(supported: tuple[str, ...] | None, preferred: tuple[str, ...]) -> str:
    if supported is None:
        return preferred[0]
    for method in preferred:
        if method in supported:
            return method
    return preferred[0]


def configured_client(server: ServerConfig, meta: AuthServer) -> ClientCredentials | None:
    """The user's pre-registered client, when the config names one."""
    oauth = server.oauth
    if oauth is None or not oauth.clientId:
        return None
    key = read_private_key(oauth.privateKeyFile) if oauth.privateKeyFile else None
    method: str | None = oauth.tokenEndpointAuthMethod
    if method is None:
        if key is not None:
            method = "private_key_jwt"
        elif oauth.clientSecret is not None:
            # RFC 8414: a server that lists no methods supports client_secret_basic
            method = _pick(meta.auth_methods, ("client_secret_basic", "client_secret_post"))
        else:
            method = "none"
    return ClientCredentials(
        client_id=oauth.clientId,
        client_secret=oauth.clientSecret,
        auth_method=method or "none",
        private_key_pem=key,
        signing_algorithm=oauth.signingAlgorithm,
    )


def metadata_document_client(server: ServerConfig, meta: AuthServer) -> ClientCredentials | None:
    url = server.oauth.clientMetadataUrl if server.oauth else None
    if not meta.cimd_supported or not url:
        return None
    return ClientCredentials(client_id=url, auth_method="none")


def stored_client(store: TokenStore, meta: AuthServer, redirect_uri: str | None) -> ClientRecord | None:
    """The client stored for this server's issuer, when it fits ``redirect_uri`` and its secret
    has not expired."""
    record = store.client(meta.issuer)
    if record is None:
        return None
    if redirect_uri is not None and redirect_uri not in record.redirect_uris:
        return None
    if record.expires_at and record.expires_at <= time.time() + 60:
        return None
    return record


def credentials_of(record: ClientRecord) -> ClientCredentials:
    return ClientCredentials(
        client_id=record.client_id, client_secret=record.client_secret, auth_method=record.auth_method
    )


async def register(
    client: httpx.AsyncClient, store: TokenStore, meta: AuthServer, redirect_uri: str, *, scope: str | None
) -> ClientRecord:
    """RFC 7591 dynamic registration; the answer is stored for the issuer and returned."""
    if not meta.registration_endpoint:
        raise RegistrationError(
            f"the authorization server {shown(meta.issuer)} offers no dynamic registration and no client metadata "
            "documents: set oauth.clientId (and its secret) in user config"
        )
    method = _pick(meta.auth_methods, ("none", "client_secret_basic", "client_secret_post"))
    grants = ["authorization_code"]
    if meta.grant_types is None or "refresh_token" in meta.grant_types:
        grants.append("refresh_token")
    body: dict[str, Any] = {
        "client_name": CLIENT_NAME,
        "redirect_uris": [redirect_uri],
        "grant_types": grants,
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
        "application_type": "native",
    }
    if scope:
        body["scope"] = scope
    try:
        status, doc = await request_json(client, "POST", meta.registration_endpoint, json=body, ok=(200, 201))
    except OAuthHttpError as exc:
        raise RegistrationError(f"client registration at {shown(meta.registration_endpoint)} failed: {exc}") from None
    if status not in (200, 201) or doc is None:
        error = doc.get("error") if doc else None
        said = f": {error[:100]}" if isinstance(error, str) else ""
        raise RegistrationError(
            f"client registration at {shown(meta.registration_endpoint)} answered HTTP {status}{said}"
        )
    client_id = doc.get("client_id")
    secret = doc.get("client_secret")
    if not isinstance(client_id, str) or not client_id or len(client_id) > 1000:
        raise RegistrationError(f"client registration at {shown(meta.registration_endpoint)} answered no client_id")
    if secret is not None and (not isinstance(secret, str) or len(secret) > 4096):
        raise RegistrationError(
            f"client registration at {shown(meta.registration_endpoint)} answered an unusable client_secret"
        )
    answered = doc.get("token_endpoint_auth_method")
    if isinstance(answered, str) and answered in ("none", "client_secret_basic", "client_secret_post"):
        method = answered
    if secret is None:
        method = "none"
    elif method == "none":
        method = _pick(meta.auth_methods, ("client_secret_basic", "client_secret_post"))
    expires = doc.get("client_secret_expires_at")
    record = ClientRecord(
        issuer=meta.issuer,
        client_id=client_id,
        client_secret=secret,
        redirect_uris=(redirect_uri,),
        auth_method=method,
        method="dcr",
        expires_at=float(expires)
        if isinstance(expires, (int, float)) and not isinstance(expires, bool) and expires > 0
        else None,
    )
    await store.put_client(record)
    return record

"""The headless grants: no person, no browser, no registration.

* ``client_credentials`` -- the client's own secret or key (RFC 6749 §4.4).
* ``workload_identity`` -- workload identity federation (SEP-1933): the RFC 7523 jwt-bearer grant
  with the platform's token (a Kubernetes service-account token, say) read from
  ``oauth.workloadTokenFile`` at every grant, since platforms rotate it.
* ``enterprise_managed`` -- enterprise-managed authorization (SEP-990): the user's ID token (from
  ``oauth.idTokenFile``) exchanged at the enterprise IdP (RFC 8693) for an ID-JAG whose audience is
  the MCP authorization server and whose resource is the MCP server, then that ID-JAG presented in
  the jwt-bearer grant at the authorization server with the configured client.

A refused grant is not retried with another grant: its error reaches the user (the OAuth error
code and description, never a token). The token is stored as any other (0600 store, bound to the
server entry and its exact URL) and carries a DPoP proof when :func:`._dpop.wanted` says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from authlib.oauth2.rfc6749.parameters import prepare_token_request

from kxen_core import ServerConfig

from ._dpop import wanted
from ._fetch import OAuthHttpError, request_json
from ._issuers import check_issuer
from ._tokens import ClientCredentials, TokenError, client_auth, token_request
from ._urls import shown
from .registration import configured_client

if TYPE_CHECKING:
    from ._ports import Engine
    from ._records import TokenRecord
    from .discovery import Discovery

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
#: the most bytes of a token file read (a JWT is a few KiB)
MAX_TOKEN_FILE = 64 * 1024
HEADLESS = ("client_credentials", "workload_identity", "enterprise_managed")
_WHAT = {
    "client_credentials": "the client-credentials grant",
    "workload_identity": "the workload-identity (jwt-bearer) grant",
    "enterprise_managed": "enterprise-managed authorization (token exchange, then the jwt-bearer grant)",
}


def headless(server: ServerConfig) -> bool:
    """Whether ``server`` gets its tokens by a headless grant (no sign-in by a person)."""
    return server.oauth is not None and server.oauth.grant in HEADLESS


def read_token_file(path: str, key: str) -> str:
    """The token in ``path`` (surrounding white space removed); a :class:`TokenError` naming the
    key and the file when it cannot be read or holds no token (never its content)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_TOKEN_FILE + 1)
    except OSError as exc:
        raise TokenError(f"oauth.{key} {path} cannot be read ({exc.strerror or type(exc).__name__})") from None
    if len(raw) > MAX_TOKEN_FILE:
        raise TokenError(f"oauth.{key} {path} is larger than {MAX_TOKEN_FILE} bytes: not a token")
    try:
        token = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise TokenError(f"oauth.{key} {path} is not ASCII: not a token") from None
    if not token or any(c.isspace() for c in token) or token.count(".") < 2:
        raise TokenError(f"oauth.{key} {path} does not hold one JWT (three dot-separated parts)")
    return token


async def exchange_for_id_jag(engine: Engine, server: ServerConfig, d: Discovery, scope: str | None) -> str:
    """RFC 8693 at the IdP: the user's ID token for an ID-JAG naming ``d``'s authorization server
    (``audience``) and the MCP server (``resource``)."""
    oauth = server.oauth
    if oauth is None or not oauth.idpTokenEndpoint or not oauth.idTokenFile:  # the loader requires both
        raise TokenError("enterprise-managed authorization needs oauth.idpTokenEndpoint and oauth.idTokenFile")
    id_token = read_token_file(oauth.idTokenFile, "idTokenFile")
    engine.remember(id_token)
    creds = ClientCredentials(
        client_id=oauth.idpClientId or "",
        client_secret=oauth.idpClientSecret,
        auth_method="client_secret_basic" if oauth.idpClientSecret else "none",
    )
    params = {
        "requested_token_type": ID_JAG,
        "subject_token": id_token,
        "subject_token_type": ID_TOKEN,
        "audience": d.server.issuer,
        "resource": d.resource,
        "scope": scope,
    }
    if creds.client_id:
        params["client_id"] = creds.client_id
    body = prepare_token_request(TOKEN_EXCHANGE, body="", **params)
    endpoint = oauth.idpTokenEndpoint
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
    url, headers, body = client_auth(creds, endpoint, None).prepare("POST", endpoint, headers, body)
    try:
        async with engine.http() as client:
            status, doc = await request_json(client, "POST", url, content=body.encode("utf-8"), headers=headers)
    except OAuthHttpError as exc:
        raise TokenError(f"the token exchange at the IdP {shown(endpoint)} failed: {exc}") from None
    if status != 200 or doc is None:
        error = doc.get("error") if doc else None
        desc = doc.get("error_description") if doc else None
        said = f": {error[:100]}" if isinstance(error, str) else ""
        said += f" ({desc[:200]})" if said and isinstance(desc, str) else ""
        raise TokenError(f"the IdP {shown(endpoint)} refused the token exchange: HTTP {status}{said}")
    jag = doc.get("access_token")
    if doc.get("issued_token_type") != ID_JAG or not isinstance(jag, str) or not jag or len(jag) > 16384:
        raise TokenError(f"the IdP {shown(endpoint)} answered the token exchange without an ID-JAG")
    engine.remember(jag)
    return jag


async def headless_token(
    engine: Engine, server: ServerConfig, d: Discovery, *, scope: str | None, home: str
) -> TokenRecord:
    """A token by ``server``'s headless grant (see the module text), stored; never from another
    issuer than the one a configured credential is bound to (:mod:`._issuers`)."""
    oauth = server.oauth
    grant = oauth.grant if oauth is not None else "client_credentials"
    await check_issuer(engine, server, home, d)
    key = (server.scope, server.name, d.canonical, home)  # what the record will be bound to
    try:
        creds = configured_client(server, d.server)
        params: dict[str, str | None] = {"scope": scope, "resource": d.resource}
        if grant == "client_credentials":
            if creds is None:
                raise TokenError("the client_credentials grant needs oauth.clientId")
            grant_type = "client_credentials"
        elif grant == "workload_identity":
            if oauth is None or not oauth.workloadTokenFile:  # the loader requires it
                raise TokenError("the workload_identity grant needs oauth.workloadTokenFile")
            params["assertion"] = read_token_file(oauth.workloadTokenFile, "workloadTokenFile")
            engine.remember(params["assertion"])
            grant_type = JWT_BEARER
        else:
            if creds is None:
                raise TokenError("enterprise-managed authorization needs oauth.clientId")
            params["assertion"] = await exchange_for_id_jag(engine, server, d, scope)
            grant_type = JWT_BEARER
        creds = creds or ClientCredentials(client_id="")
        prover = await engine.prover(key) if wanted(server, d.server) else None
        async with engine.http() as client:
            answer = await token_request(
                client, d.server.token_endpoint, creds, grant_type, issuer=d.server.issuer, dpop=prover, **params
            )
    except TokenError as exc:
        raise engine.need_login(server, f"{_WHAT[grant]} for {server.name!r} failed: {exc}") from None
    return await engine.keep(server, d, creds, answer, requested=scope, home=home)


__all__ = ["HEADLESS", "JWT_BEARER", "headless", "headless_token", "read_token_file"]

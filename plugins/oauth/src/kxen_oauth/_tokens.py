"""The token endpoint: authorization-code exchange, refresh, client credentials.

Authlib builds the requests (RFC 6749 token request bodies, RFC 7636 S256 challenges, client
authentication: ``none``, ``client_secret_basic``, ``client_secret_post`` and RFC 7523
``private_key_jwt``); kxen sends them with its own bounded httpx client (see :mod:`._fetch`) and
reads the answer field by field. Nothing here puts a token, secret, code or verifier in an
exception's text.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import httpx
from authlib.oauth2.auth import ClientAuth
from authlib.oauth2.rfc6749.parameters import prepare_token_request
from authlib.oauth2.rfc7523 import PrivateKeyJWT

from ._fetch import OAuthHttpError, request_json
from ._urls import shown

if TYPE_CHECKING:
    from ._dpop import Prover

#: a token answer's lifetime is believed up to this long (a year); longer is cut to it
MAX_LIFETIME = 365 * 86400.0


class TokenError(Exception):
    """The token endpoint refused or failed; ``error`` is the OAuth error code when one came."""

    def __init__(self, message: str, *, error: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.status = status


@attrs.frozen(kw_only=True)
class ClientCredentials:
    """How the client authenticates at the token endpoint."""

    client_id: str
    client_secret: str | None = attrs.field(default=None, repr=False)
    auth_method: str = "none"
    private_key_pem: str | None = attrs.field(default=None, repr=False)
    signing_algorithm: str | None = None


@attrs.frozen(kw_only=True)
class TokenAnswer:
    access_token: str = attrs.field(repr=False)
    token_type: str = "Bearer"
    refresh_token: str | None = attrs.field(default=None, repr=False)
    expires_at: float | None = None
    scope: str | None = None


def read_private_key(path: str) -> str:
    try:
        data = Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenError(f"oauth.privateKeyFile {path} cannot be read ({type(exc).__name__})") from None
    if len(data) > 64 * 1024 or "PRIVATE KEY" not in data:
        raise TokenError(f"oauth.privateKeyFile {path} is not a PEM private key")
    return data


def _jwt_key(pem: str, alg: str | None) -> tuple[Any, str]:
    from joserfc.jwk import ECKey, OKPKey, RSAKey

    for cls, default_alg in ((ECKey, "ES256"), (RSAKey, "RS256"), (OKPKey, "EdDSA")):
        try:
            return cls.import_key(pem), alg or default_alg
        except Exception:  # noqa: BLE001 -- joserfc raises several kinds for "not this key type"
            continue
    raise TokenError("the private key for private_key_jwt could not be read (EC, RSA or OKP PEM expected)")


class _Anonymous:
    def prepare(self, method: str, uri: str, headers: dict[str, str], body: str) -> tuple[str, dict[str, str], str]:
        return uri, headers, body


def client_auth(creds: ClientCredentials, token_endpoint: str, audience: str | None) -> ClientAuth | _Anonymous:
    if creds.auth_method == "private_key_jwt":
        if not creds.private_key_pem:
            raise TokenError("private_key_jwt needs a private key (oauth.privateKeyFile)")
        key, alg = _jwt_key(creds.private_key_pem, creds.signing_algorithm)
        # the assertion's audience is the authorization server's issuer (RFC 7523bis; servers
        # that follow RFC 7523 §3 accept their issuer too), else the token endpoint
        return ClientAuth(creds.client_id, key, PrivateKeyJWT(audience or token_endpoint, alg=alg))
    if not creds.client_id:
        return _Anonymous()  # a grant whose assertion names the client (workload identity): nothing to add
    if creds.auth_method in ("client_secret_basic", "client_secret_post"):
        return ClientAuth(creds.client_id, creds.client_secret or "", creds.auth_method)
    return ClientAuth(creds.client_id, None, "none")


def parse_token_answer(doc: dict[str, Any], now: float, *, dpop: bool = False) -> TokenAnswer:
    """A token answer read field by field (RFC 6749 §5.1); a ``DPoP`` token only when a proof
    was sent (RFC 9449 §5)."""
    access = doc.get("access_token")
    if not isinstance(access, str) or not access or len(access) > 16384:
        raise TokenError("the token endpoint answered without a usable access_token")
    token_type = doc.get("token_type", "Bearer")
    if not isinstance(token_type, str) or token_type.lower() not in (("bearer", "dpop") if dpop else ("bearer",)):
        raise TokenError("the token endpoint answered a token type other than Bearer (not supported)")
    token_type = "DPoP" if token_type.lower() == "dpop" else "Bearer"
    refresh = doc.get("refresh_token")
    if refresh is not None and (not isinstance(refresh, str) or not refresh or len(refresh) > 16384):
        raise TokenError("the token endpoint answered an unusable refresh_token")
    expires_in = doc.get("expires_in")
    if isinstance(expires_in, str) and expires_in.isdigit():
        expires_in = int(expires_in)
    expires_at = None
    if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool) and expires_in == expires_in:
        expires_at = now + max(0.0, min(float(expires_in), MAX_LIFETIME))
    scope = doc.get("scope")
    return TokenAnswer(
        access_token=access,
        token_type=token_type,
        refresh_token=refresh,
        expires_at=expires_at,
        scope=scope if isinstance(scope, str) and len(scope) <= 4096 else None,
    )


async def token_request(
    client: httpx.AsyncClient,
    token_endpoint: str,
    creds: ClientCredentials,
    grant_type: str,
    *,
    issuer: str | None = None,
    dpop: Prover | None = None,
    **params: Any,
) -> TokenAnswer:
    """POST one token request and read the answer, with a DPoP proof when ``dpop`` is given
    (and once more with the authorization server's nonce when it asks for one). Raises
    :class:`TokenError`."""
    if creds.auth_method == "client_secret_basic":
        # the identifier in the body too: servers that look a client up before checking how it
        # authenticates want it there (it is not a second authentication method)
        params = {**params, "client_id": creds.client_id}
    params = {k: v for k, v in params.items() if v is not None}
    body = prepare_token_request(grant_type, body="", **params)
    status, doc, now = 0, None, time.time()
    for _ in range(2):  # a second time only for an authorization server's DPoP nonce (RFC 9449 §8)
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        if dpop is not None:
            headers["DPoP"] = dpop.proof("POST", token_endpoint)
        url, headers, sent = client_auth(creds, token_endpoint, issuer).prepare("POST", token_endpoint, headers, body)
        now = time.time()
        seen: dict[str, str] = {}
        try:
            status, doc = await request_json(
                client, "POST", url, content=sent.encode("utf-8"), headers=headers, seen=seen
            )
        except OAuthHttpError as exc:
            raise TokenError(f"token request to {shown(token_endpoint)} failed: {exc}", status=exc.status) from None
        nonce_asked = status in (400, 401) and doc is not None and doc.get("error") == "use_dpop_nonce"
        if not (dpop is not None and nonce_asked and dpop.learn(token_endpoint, seen.get("dpop-nonce", ""))):
            break
    if status != 200 or doc is None:
        error = doc.get("error") if doc else None
        error = error[:100] if isinstance(error, str) else ""
        desc = doc.get("error_description") if doc else None
        desc = desc[:200] if isinstance(desc, str) else ""
        said = f": {error}" + (f" ({desc})" if desc else "") if error else ""
        raise TokenError(
            f"the token endpoint {shown(token_endpoint)} answered HTTP {status}{said}", error=error, status=status
        )
    return parse_token_answer(doc, now, dpop=dpop is not None)

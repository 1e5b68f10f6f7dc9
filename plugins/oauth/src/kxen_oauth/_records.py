"""The records of the token store: a token bound to (config scope, server, canonical resource, home), and
a client registered with an authorization server. Read field by field; a record that does not
read is skipped, never half-used. ``repr`` never shows a secret."""

from __future__ import annotations

import time
from typing import Any

import attrs


def _s(d: dict[str, Any], key: str, *, required: bool = False, limit: int = 16384) -> str | None:
    v = d.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str) or len(v) > limit or (required and not v):
        raise ValueError(key)
    return v


def _f(d: dict[str, Any], key: str) -> float | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
        raise ValueError(key)
    return float(v)


@attrs.frozen(kw_only=True)
class TokenRecord:
    config_scope: str
    server: str
    resource: str
    issuer: str
    client_id: str
    access_token: str = attrs.field(repr=False)
    token_type: str = "Bearer"
    refresh_token: str | None = attrs.field(default=None, repr=False)
    #: absolute time (seconds since the epoch) when the access token expires; None: not said
    expires_at: float | None = None
    scope: str | None = None
    obtained_at: float = attrs.field(factory=time.time)
    #: where a refresh goes, and the RFC 8707 resource indicator it sends again
    token_endpoint: str | None = None
    resource_indicator: str | None = None
    #: the resolved kxen home whose config the entry came from (see :mod:`._binding`)
    home: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.config_scope, self.server, self.resource, self.home)

    def due(self, now: float, ahead: float) -> bool:
        """Expired, or expiring within ``ahead`` seconds."""
        return self.expires_at is not None and now >= self.expires_at - ahead

    def to_json(self) -> dict[str, Any]:
        d = {
            "configScope": self.config_scope,
            "server": self.server,
            "resource": self.resource,
            "issuer": self.issuer,
            "clientId": self.client_id,
            "accessToken": self.access_token,
            "tokenType": self.token_type,
            "refreshToken": self.refresh_token,
            "expiresAt": self.expires_at,
            "scope": self.scope,
            "obtainedAt": self.obtained_at,
            "tokenEndpoint": self.token_endpoint,
            "resourceIndicator": self.resource_indicator,
            "home": self.home,
        }
        return {k: v for k, v in d.items() if v is not None}

    @classmethod
    def from_json(cls, d: Any) -> TokenRecord:
        if not isinstance(d, dict):
            raise ValueError("not an object")
        home = d.get("home")
        if not isinstance(home, str) or len(home) > 4096:
            raise ValueError("home")  # not bound to a home (an older shape): never used
        return cls(
            home=home,
            config_scope=_s(d, "configScope", required=True) or "",
            server=_s(d, "server", required=True) or "",
            resource=_s(d, "resource", required=True) or "",
            issuer=_s(d, "issuer", required=True) or "",
            client_id=_s(d, "clientId") or "",  # "": a workload-identity grant names no client
            access_token=_s(d, "accessToken", required=True) or "",
            token_type=_s(d, "tokenType") or "Bearer",
            refresh_token=_s(d, "refreshToken"),
            expires_at=_f(d, "expiresAt"),
            scope=_s(d, "scope"),
            obtained_at=_f(d, "obtainedAt") or 0.0,
            token_endpoint=_s(d, "tokenEndpoint", limit=2048),
            resource_indicator=_s(d, "resourceIndicator", limit=2048),
        )


@attrs.frozen(kw_only=True)
class ClientRecord:
    """A client registered with one authorization server (by ``issuer``), reused until that
    server rejects it. ``method``: ``dcr`` (RFC 7591), ``cimd`` (a metadata document URL), or
    ``config`` (never stored: the user's own client id)."""

    issuer: str
    client_id: str
    client_secret: str | None = attrs.field(default=None, repr=False)
    redirect_uris: tuple[str, ...] = ()
    auth_method: str = "none"
    method: str = "dcr"
    registered_at: float = attrs.field(factory=time.time)
    expires_at: float | None = None  # client_secret_expires_at (0 / absent: never)

    def to_json(self) -> dict[str, Any]:
        d = {
            "issuer": self.issuer,
            "clientId": self.client_id,
            "clientSecret": self.client_secret,
            "redirectUris": list(self.redirect_uris),
            "authMethod": self.auth_method,
            "method": self.method,
            "registeredAt": self.registered_at,
            "expiresAt": self.expires_at,
        }
        return {k: v for k, v in d.items() if v is not None}

    @classmethod
    def from_json(cls, d: Any) -> ClientRecord:
        if not isinstance(d, dict):
            raise ValueError("not an object")
        uris = d.get("redirectUris", [])
        if not isinstance(uris, list) or len(uris) > 20 or not all(isinstance(u, str) for u in uris):
            raise ValueError("redirectUris")
        return cls(
            issuer=_s(d, "issuer", required=True) or "",
            client_id=_s(d, "clientId", required=True) or "",
            client_secret=_s(d, "clientSecret"),
            redirect_uris=tuple(uris),
            auth_method=_s(d, "authMethod") or "none",
            method=_s(d, "method") or "dcr",
            registered_at=_f(d, "registeredAt") or 0.0,
            expires_at=_f(d, "expiresAt"),
        )

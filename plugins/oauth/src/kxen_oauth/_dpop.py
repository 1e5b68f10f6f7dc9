"""DPoP (RFC 9449): a per-server EC P-256 key pair, proofs (ES256 JWS by joserfc), nonces.

When: a server entry whose ``oauth.dpop`` is true always sends proofs; one where it is false never
does; otherwise proofs are sent when the authorization server's metadata lists ES256 in
``dpop_signing_alg_values_supported`` (a server that publishes it can bind tokens to a key, and a
bound token is worthless to whoever copies it from the wire or the store without the key).

The key pair of an entry is made at its first token request and kept in the 0600 token store
beside its tokens (``dpopKeys``, bound to the same (config scope, server, URL, home)); its private
half is never sent, shown or put in an error: a proof carries the public JWK only. Nonces are
remembered per origin (an authorization server's for its token endpoint, a resource server's for
its requests), at most :data:`MAX_NONCES` of them.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from joserfc import jwt
from joserfc.jwk import ECKey

from kxen_core import ServerConfig

from ._urls import origin

if TYPE_CHECKING:
    from ._binding import Key
    from .discovery import AuthServer
    from .store import TokenStore

#: RFC 9449 §8.1: 1 or more NQCHAR (visible ASCII but '"' and '\\'), bounded
_NONCE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,512}")
#: the one algorithm kxen signs proofs with
ALG = "ES256"
MAX_NONCES = 256
#: the most entries whose key is kept in memory
MAX_KEYS = 256


def htu_of(url: str) -> str:
    """The ``htu`` of a request URL: without query and fragment (RFC 9449 §4.2)."""
    p = urlsplit(url)
    return urlunsplit((p.scheme, p.netloc, p.path or "/", "", ""))


def ath_of(access_token: str) -> str:
    """The ``ath`` claim: base64url(SHA-256(access token)) without padding (RFC 9449 §4.2)."""
    digest = hashlib.sha256(access_token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def wanted(server: ServerConfig, meta: AuthServer | None) -> bool:
    """Whether ``server``'s token requests carry proofs (see the module text)."""
    choice = server.oauth.dpop if server.oauth is not None else None
    if choice is not None:
        return choice
    return meta is not None and ALG in (meta.dpop_algs or ())


class Prover:
    """Proofs by one key, with the nonces learned for it (shared per engine, per origin)."""

    def __init__(self, key: ECKey, nonces: dict[str, str]) -> None:
        self._key = key
        self._public = key.as_dict(private=False)
        self._nonces = nonces

    def __repr__(self) -> str:
        return "Prover(ES256)"  # never the key

    def proof(self, htm: str, url: str, *, access_token: str | None = None) -> str:
        """A fresh proof (new ``jti``) for one request; the origin's nonce when one was learned."""
        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(24),
            "htm": htm.upper(),
            "htu": htu_of(url),
            "iat": int(time.time()),
        }
        nonce = self._nonces.get(origin(url))
        if nonce:
            claims["nonce"] = nonce
        if access_token is not None:
            claims["ath"] = ath_of(access_token)
        header = {"typ": "dpop+jwt", "alg": ALG, "jwk": self._public}
        return jwt.encode(header, claims, self._key, algorithms=[ALG])

    def learn(self, url: str, nonce: str) -> bool:
        """Remember ``nonce`` for ``url``'s origin; False when it is the one already sent (a
        server that refuses its own nonce gets no second retry)."""
        where = origin(url)
        if not _NONCE.fullmatch(nonce) or self._nonces.get(where) == nonce:
            return False
        if len(self._nonces) >= MAX_NONCES:
            self._nonces.clear()
        self._nonces[where] = nonce
        return True


class DpopKeys:
    """The engine's keys (read from the store once, made when missing) and its nonces."""

    def __init__(self) -> None:
        self._keys: dict[Key, ECKey] = {}
        self.nonces: dict[str, str] = {}

    def _cached(self, store: TokenStore, key: Key) -> ECKey | None:
        found = self._keys.get(key)
        if found is None:
            jwk = store.dpop_key(key)
            if jwk is not None:
                try:
                    found = ECKey.import_key(jwk)
                except Exception:  # noqa: BLE001 -- a broken stored key is made anew, never shown
                    return None
                self._remember(key, found)
        return found

    def _remember(self, key: Key, value: ECKey) -> None:
        if len(self._keys) >= MAX_KEYS:
            self._keys.clear()
        self._keys[key] = value

    def existing(self, store: TokenStore, key: Key) -> Prover | None:
        """A prover by the stored key of ``key`` (None when there is none)."""
        found = self._cached(store, key)
        return Prover(found, self.nonces) if found is not None else None

    async def prover(self, store: TokenStore, key: Key) -> Prover:
        """A prover by ``key``'s stored key, made (and stored 0600) when there is none."""
        found = self._cached(store, key)
        if found is None:
            found = ECKey.generate_key("P-256")
            await store.put_dpop_key(key, found.as_dict(private=True))
            self._remember(key, found)
        return Prover(found, self.nonces)

    def forget(self, key: Key) -> None:
        self._keys.pop(key, None)

"""One sign-in (:class:`kxen_core.auth.AuthFlow`): discovery, the client, PKCE S256, the loopback
redirect listener, the code exchange (with a DPoP proof when :func:`._dpop.wanted`), and the token
stored. A headless grant (:mod:`.grants`) gets its token in :meth:`OAuthFlow.start` and needs no
person (the URL is ``""``)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from kxen_core import ServerConfig
from kxen_core.errors import AuthRequired

from ._dpop import wanted
from ._issuers import check_issuer
from ._listener import Listener
from ._records import TokenRecord
from ._tokens import ClientCredentials, TokenAnswer, TokenError, token_request
from ._urls import shown
from .discovery import AuthServer, Discovery
from .grants import headless, headless_token
from .registration import (
    RegistrationError,
    configured_client,
    credentials_of,
    metadata_document_client,
    register,
    stored_client,
)
from .store import StoreError

if TYPE_CHECKING:
    from ._ports import Engine

#: how long a sign-in waits for the browser to come back (seconds)
DEFAULT_LIFETIME = 300.0


def choose_scopes(
    challenge: tuple[str, ...], configured: tuple[str, ...], d: Discovery, extra: tuple[str, ...]
) -> str | None:
    """The ``scope`` to ask for: the challenge's, else the user's configured scopes, else the
    protected resource's ``scopes_supported``, else none; plus step-up scopes; plus
    ``offline_access`` only when the authorization server lists it."""
    chosen = list(challenge) or list(configured) or list((d.prm.scopes_supported if d.prm else None) or ())
    for s in extra:
        if s not in chosen:
            chosen.append(s)
    if (
        chosen
        and d.server.scopes_supported
        and "offline_access" in d.server.scopes_supported
        and "offline_access" not in chosen
    ):
        chosen.append("offline_access")
    return " ".join(chosen) if chosen else None


class OAuthFlow:
    """An :class:`~kxen_core.auth.AuthFlow` for one server."""

    def __init__(
        self,
        engine: Engine,
        server: ServerConfig,
        *,
        allow_loopback_http: bool,
        scopes: tuple[str, ...] = (),
        challenge_scopes: tuple[str, ...] = (),
        resource_metadata: str = "",
        lifetime: float = DEFAULT_LIFETIME,
        in_band: bool = False,
        home: str = "",
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.engine = engine
        self.server = server
        self.allow_loopback_http = allow_loopback_http
        self.extra_scopes = tuple(scopes)
        self.challenge_scopes = tuple(challenge_scopes)
        self.resource_metadata = resource_metadata
        self.lifetime = lifetime
        #: started by the credential lookup (a 401/403), not by a person's ``kxen mcp login``
        self.in_band = in_band
        #: the home the token is bound to (:func:`._binding.home_of`)
        self.home = home
        #: where repairs of the store the sign-in made are told (``LoginRequest.notice``)
        self.notice = notice
        self._listener: Listener | None = None
        self._deadline = 0.0
        self._state = ""
        self._verifier = ""
        self._creds: ClientCredentials | None = None
        self._discovery: Discovery | None = None
        self._scope: str | None = None
        self._registered = False
        self.done = False

    def _fail(self, reason: str, status: int | None = None) -> AuthRequired:
        return AuthRequired(
            self.engine.scrub(reason, self._verifier),
            next_step=f"kxen mcp login {self.server.name}",
            status=status,
        )

    async def start(self) -> str:
        try:
            return await self._start()
        except StoreError as exc:
            await self.aclose()
            raise self._fail(f"the OAuth token store cannot be used: {exc}") from None
        except BaseException:
            await self.aclose()
            raise
        finally:
            self.engine.tell(self.notice, every=True)

    async def finish(self) -> None:
        try:
            await self._finish()
        except StoreError as exc:
            raise self._fail(f"the OAuth token store cannot be used: {exc}") from None
        finally:
            self.engine.tell(self.notice, every=True)

    async def _start(self) -> str:
        d = await self.engine.discover(
            self.server, self.resource_metadata, allow_loopback_http=self.allow_loopback_http
        )
        self._discovery = d
        meta = d.server
        configured = tuple(self.server.oauth.scopes) if self.server.oauth else ()
        self._scope = choose_scopes(self.challenge_scopes, configured, d, self.extra_scopes)
        if headless(self.server):
            await headless_token(self.engine, self.server, d, scope=self._scope, home=self.home)
            self.done = True
            return ""
        if meta.code_challenge_methods is None or "S256" not in meta.code_challenge_methods:
            raise self._fail(
                f"the authorization server {shown(meta.issuer)} does not list PKCE S256 in "
                "code_challenge_methods_supported: refused (PKCE S256 is required)"
            )
        if not meta.authorization_endpoint:
            raise self._fail(f"the authorization server {shown(meta.issuer)} has no authorization_endpoint")
        try:
            creds = configured_client(self.server, meta)
            if creds is not None:  # a configured secret or key: never to another issuer than its own
                await check_issuer(self.engine, self.server, self.home, d)
            creds = creds or metadata_document_client(self.server, meta)
        except TokenError as exc:
            raise self._fail(str(exc)) from None
        record = None
        port = 0
        if creds is None:
            record = stored_client(self.engine.store(), meta, None)
            if record is not None and record.redirect_uris:
                from urllib.parse import urlsplit

                port = urlsplit(record.redirect_uris[0]).port or 0
        self._listener = await self._bind(port)
        redirect = self._listener.redirect_uri
        if creds is None:
            if record is None or redirect not in record.redirect_uris:
                try:
                    async with self.engine.http() as client:
                        record = await register(client, self.engine.store(), meta, redirect, scope=self._scope)
                except RegistrationError as exc:
                    raise self._fail(str(exc)) from None
                self._registered = True
            creds = credentials_of(record)
        self._creds = creds
        self._state = secrets.token_urlsafe(32)
        self._verifier = secrets.token_urlsafe(64)  # 86 characters of [A-Za-z0-9_-] (RFC 7636: 43-128)
        self._deadline = time.monotonic() + self.lifetime
        return prepare_grant_uri(
            meta.authorization_endpoint,
            creds.client_id,
            "code",
            redirect_uri=redirect,
            scope=self._scope,
            state=self._state,
            code_challenge=create_s256_code_challenge(self._verifier),
            code_challenge_method="S256",
            resource=d.resource,
        )

    async def _bind(self, port: int) -> Listener:
        if port:
            try:
                return await Listener.bind(port)
            except OSError:
                pass  # taken: a new port, and so a new registration
        return await Listener.bind(0)

    async def _finish(self) -> None:
        if self.done:
            return
        if self._listener is None or self._discovery is None or self._creds is None:
            raise self._fail("the sign-in was not started (or was cancelled)")
        d, meta, creds = self._discovery, self._discovery.server, self._creds
        try:
            with anyio.fail_after(max(0.0, self._deadline - time.monotonic())):
                params = await self._listener.wait(self._state)
        except TimeoutError:
            raise self._fail(f"the sign-in was not completed within {self.lifetime:.0f} s") from None
        except OSError as exc:
            raise self._fail(f"the sign-in listener failed: {exc}") from None
        finally:
            await self.aclose()
        self._check_issuer(params, meta)
        if "error" in params:
            error = params["error"][:100]
            desc = params.get("error_description", "")[:200]
            if error in ("invalid_client", "unauthorized_client") and not self._registered:
                # the stored registration is no longer known there: the next sign-in registers again
                await self.engine.store().drop_client(meta.issuer, creds.client_id)
            raise self._fail(f"the authorization server refused the sign-in: {error}" + (f" ({desc})" if desc else ""))
        code = params.get("code", "")
        if not code or len(code) > 4096:
            raise self._fail("the authorization server answered without a code")
        try:
            key = (self.server.scope, self.server.name, d.canonical, self.home)
            prover = await self.engine.prover(key) if wanted(self.server, meta) else None
            async with self.engine.http() as client:
                answer = await token_request(
                    client,
                    meta.token_endpoint,
                    creds,
                    "authorization_code",
                    issuer=meta.issuer,
                    dpop=prover,
                    code=code,
                    redirect_uri=self._listener.redirect_uri,
                    code_verifier=self._verifier,
                    resource=d.resource,
                )
        except TokenError as exc:
            if exc.error == "invalid_client" and not self._registered:
                await self.engine.store().drop_client(meta.issuer, creds.client_id)
                raise self._fail(f"{exc}; the stored client registration was dropped: sign in again") from None
            raise AuthRequired(
                self.engine.scrub(str(exc), code, self._verifier), next_step=f"kxen mcp login {self.server.name}"
            ) from None
        await self.engine.keep(
            self.server, d, creds, answer, requested=self._scope, home=self.home, by_person=not self.in_band
        )
        self.done = True

    def _check_issuer(self, params: dict[str, str], meta: AuthServer) -> None:
        """RFC 9207: an ``iss`` is compared exactly; a server that promises it must send it."""
        iss = params.get("iss")
        if iss is None and meta.iss_parameter_supported:
            raise self._fail("the sign-in answer carries no iss although the authorization server promises it: refused")
        if iss is not None and iss != meta.issuer:
            raise self._fail("the sign-in answer names another issuer than the authorization server: refused")

    async def aclose(self) -> None:
        if self._listener is not None:
            await self._listener.aclose()


def record_of(
    server: ServerConfig,
    d: Discovery,
    creds: ClientCredentials,
    answer: TokenAnswer,
    *,
    requested: str | None,
    home: str,
    previous: TokenRecord | None = None,
) -> TokenRecord:
    """The store record of a fresh token (a refresh keeps the refresh token when none was rotated)."""
    return TokenRecord(
        config_scope=server.scope,
        server=server.name,
        resource=d.canonical,
        issuer=d.server.issuer,
        client_id=creds.client_id,
        access_token=answer.access_token,
        token_type=answer.token_type,
        refresh_token=answer.refresh_token or (previous.refresh_token if previous else None),
        expires_at=answer.expires_at,
        scope=answer.scope or requested or (previous.scope if previous else None),
        token_endpoint=d.server.token_endpoint,
        resource_indicator=d.resource,
        home=home,
    )

"""The OAuth engine behind the hooks: which servers it answers for, the token for a request,
refresh (ahead of expiry and once on a 401, one at a time per entry across processes), and what a
401 or 403 challenge leads to: a refresh, a sign-in through a ``kxen_authorize_url`` taker, or
:class:`~kxen_core.errors.AuthRequired` with the next step.

Fail-closed rules: a token is sent only to its own server's origin, and only the record bound to
exactly (config scope, server name, canonical URL, home) is used; an older-shape record is never used.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx

from kxen_core import ServerConfig, hookcall
from kxen_core.errors import AuthRequired

from ._binding import home_of, key_for
from ._challenge import parse_bearer
from ._dpop import DpopKeys, Prover
from ._fetch import make_client
from ._held import HeldSecrets
from ._issuers import explain_switch, forget_issuer
from ._ports import Key
from ._records import TokenRecord
from ._reuse import Where, reusable, where
from ._tokens import ClientCredentials, TokenAnswer
from ._urls import UrlRefused, origin, same_issuer, same_origin, shown
from .discovery import Discovery, DiscoveryError, discover
from .flow import OAuthFlow, record_of
from .grants import headless, headless_token
from .inband import run_in_band
from .refresh import REFRESH_AHEAD, refresh_entry
from .store import StoreError, TokenStore, data_dir

#: how long a discovery is reused by sign-ins (a 401 always discovers again)
DISCOVERY_SECONDS = 60.0
#: in-band sign-ins (after a 401, or step-ups after a 403) per server entry before giving up ...
MAX_AUTHORIZATIONS = 3
#: ... within this many seconds (a person's sign-in starts the count again)
ATTEMPT_WINDOW = 600.0
#: the next step when the token store cannot be used (its text says which rule)
STORE_NEXT_STEP = "fix the OAuth token store as the reason says (or set KXEN_DATA_DIR), then restart"


def _has_static_auth(server: ServerConfig) -> bool:
    return any(name.lower() == "authorization" for name in server.headers)


class OAuthEngine(HeldSecrets):
    """Per-process state; ``http_transport`` replaces the network (tests)."""

    def __init__(self, *, http_transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.http_transport = http_transport
        self._stores: dict[tuple[str | None, ...], TokenStore] = {}
        self._challenged: set[Key] = set()
        self._sent: dict[Key, str] = {}
        self._refreshed: dict[Key, str] = {}
        #: in-band sign-ins per entry: (how many, when the first of them started)
        self._attempts: dict[Key, tuple[int, float]] = {}
        self._locks: dict[Key, anyio.Lock] = {}
        self._discovered: dict[tuple[str, str], tuple[float, Discovery]] = {}
        HeldSecrets.__init__(self)
        self._keys: dict[tuple[str, str, str, str], Key | None] = {}
        self._origins: dict[tuple[str, str], bool] = {}
        #: how many refreshes this process made (tests and diagnostics read it)
        self.refreshes = 0
        self.dpop = DpopKeys()

    # -- plumbing ------------------------------------------------------------------------------

    def http(self) -> httpx.AsyncClient:
        """A new client for one OAuth exchange (``async with``): a process may run several event
        loops one after another, and a client belongs to the loop it first ran in."""
        return make_client(self.http_transport)

    def store(self, at: Where | None = None) -> TokenStore:
        """The store of the data directory in force (``KXEN_DATA_DIR`` may change between runs);
        ``at``: the environment that picks it, when the caller just read it (:func:`._reuse.where`)."""
        at = where() if at is None else at
        store = self._stores.get(at)
        if store is None:
            if len(self._stores) > 64:
                self._stores.clear()
            store = self._stores[at] = TokenStore(data_dir())
        return store

    def key_of(self, server: ServerConfig, home: Any = None) -> Key | None:
        """(config scope, server name, canonical URL, home): what a stored token is bound to;
        ``home`` is the runtime's kxen home (see :mod:`._binding`)."""
        if not server.url:
            return None
        cache = (server.scope, server.name, server.url, server.source if server.scope == "user" else str(home))
        if cache not in self._keys:
            if len(self._keys) > 1024:
                self._keys.clear()
            self._keys[cache] = key_for(server, home_of(server, home))
        return self._keys[cache]

    def _same_origin(self, url: str, resource: str) -> bool:
        """:func:`same_origin`, remembered per URL pair (asked before every request)."""
        pair = (url, resource)
        answer = self._origins.get(pair)
        if answer is None:
            if len(self._origins) > 1024:
                self._origins.clear()
            answer = self._origins[pair] = same_origin(url, resource)
        return answer

    async def prover(self, key: Key) -> Prover:
        """The DPoP prover of entry ``key`` (its key pair made and stored when it has none)."""
        return await self.dpop.prover(self.store(), key)

    def existing_prover(self, key: Key) -> Prover | None:
        return self.dpop.existing(self.store(), key)

    def _header(self, server: ServerConfig, key: Key, record: TokenRecord, request: Any) -> dict[str, str]:
        self.remember(record.access_token, record.refresh_token)
        self._sent[key] = record.access_token
        if record.token_type != "DPoP":
            return {"Authorization": f"Bearer {record.access_token}"}
        prover = self.existing_prover(key)
        if prover is None:  # the store lost the key the token is bound to: the token is no use
            raise self.need_login(server, f"the DPoP key of {server.name!r} is not in the OAuth token store")
        proof = prover.proof(request.method, request.url, access_token=record.access_token)
        return {"Authorization": f"DPoP {record.access_token}", "DPoP": proof}

    def need_login(
        self,
        server: ServerConfig,
        reason: str,
        *,
        status: int | None = None,
        scopes: tuple[str, ...] = (),
        next_step: str | None = None,
    ) -> AuthRequired:
        step = next_step or f"kxen mcp login {server.name}"
        return AuthRequired(self.scrub(reason), next_step=step, status=status, scopes=scopes)

    async def discover(
        self, server: ServerConfig, resource_metadata: str, *, allow_loopback_http: bool, fresh: bool = False
    ) -> Discovery:
        """What discovery finds for ``server`` (kept :data:`DISCOVERY_SECONDS`, unless ``fresh``)."""
        url = server.url or ""
        cache_key = (url, resource_metadata)
        cached = self._discovered.get(cache_key)
        if cached is not None and not fresh and time.monotonic() - cached[0] < DISCOVERY_SECONDS:
            return cached[1]
        meta_url = server.oauth.authorizationServerMetadataUrl if server.oauth else None
        try:
            async with self.http() as client:
                found = await discover(
                    client,
                    url,
                    resource_metadata=resource_metadata,
                    metadata_url=meta_url,
                    allow_loopback_http=allow_loopback_http,
                )
        except (DiscoveryError, UrlRefused) as exc:
            raise self.need_login(server, f"OAuth discovery for {server.name!r} failed: {exc}") from None
        if len(self._discovered) > 256:
            self._discovered.clear()
        self._discovered[cache_key] = (time.monotonic(), found)
        return found

    # -- the credential hook ---------------------------------------------------------------------

    async def lookup(self, server: ServerConfig, request: Any) -> dict[str, str] | None:
        """The headers for one request of ``server`` (see ``kxen_credential_lookup``); a repair
        of the store the lookup made is told through the context's ``notice``."""
        if not server.is_remote or _has_static_auth(server):
            return None
        context = getattr(request, "context", None)
        key = self.key_of(server, getattr(context, "home", None))
        if key is None or not self._same_origin(request.url, key[2]):
            return None  # never a token to another origin than the server's own
        challenge = getattr(request, "challenge", None)
        ours = server.oauth is not None or challenge is not None or key in self._challenged
        at = where()
        store = self.store(at)
        try:
            try:
                record = store.token(key)  # one stat; the file is read only when it changed
            except StoreError:
                if not ours:
                    return None
                raise
            if challenge is None:
                if record is None and not ours:
                    return None
                return await self._plain(server, key, record, request, (store, at))
            self._challenged.add(key)
            return await self._challenge(server, key, record, request, challenge)
        except StoreError as exc:
            raise self.need_login(
                server, f"the OAuth token store cannot be used: {exc}", next_step=STORE_NEXT_STEP
            ) from None
        finally:
            store.tell(getattr(context, "notice", None) or getattr(context, "diagnostic", None))

    def tell(self, notice: Any, *, every: bool = False) -> None:
        """See :meth:`.store.TokenStore.tell` (the store of the data directory in force)."""
        self.store().tell(notice, every=every)

    def _settings_loopback(self, request: Any) -> bool:
        ctx = getattr(request, "context", None)
        settings = getattr(ctx, "settings", None)
        return bool(settings is not None and settings.mcp.allow_loopback_http)

    async def _plain(
        self, server: ServerConfig, key: Key, record: TokenRecord | None, request: Any, found: tuple[TokenStore, Where]
    ) -> dict[str, str] | None:
        due = record is not None and record.due(time.time(), REFRESH_AHEAD)
        if record is not None and due:
            refreshed = await self.refresh(server, key, record.access_token)
            if refreshed is not None:
                return self._header(server, key, refreshed, request)
        if (record is None or (due and not record.refresh_token)) and headless(server):
            # nothing usable is stored, or a headless token ran out: a new grant (no person needed)
            d = await self.discover(server, "", allow_loopback_http=self._settings_loopback(request))
            got = await headless_token(self, server, d, scope=record.scope if record else None, home=key[3])
            return self._header(server, key, got, request)
        if record is None:
            return None  # unauthenticated: the server's 401 starts discovery (an older-shape entry never is used)
        header = self._header(server, key, record, request)
        # the stored token as it is: the transport may send it again while nothing it depends on changed
        return header if due or record.token_type == "DPoP" else reusable(self, key, record, *found, header)

    async def _challenge(
        self, server: ServerConfig, key: Key, record: TokenRecord | None, request: Any, challenge: Any
    ) -> dict[str, str] | None:
        bearer = parse_bearer(challenge.www_authenticate)
        loopback = self._settings_loopback(request)
        sent = self._sent.get(key)
        if challenge.status == 403:
            if not bearer.insufficient_scope:
                raise self.need_login(
                    server, f"HTTP 403 Forbidden from {shown(request.url)}: access refused", status=403
                )
            have = tuple((record.scope or "").split()) if record else ()
            wanted = tuple(dict.fromkeys((*have, *bearer.scope)))
            return await self._authorize(
                server, key, request, bearer.resource_metadata, wanted, status=403, loopback=loopback
            )
        self.store().forget_cache()
        record = self.store().token(key)
        if bearer.error == "use_dpop_nonce" and record is not None and record.token_type == "DPoP":
            prover = self.existing_prover(key)
            if prover is not None and prover.learn(request.url, challenge.dpop_nonce):
                return self._header(server, key, record, request)  # once with the server's nonce (RFC 9449 §9)
            raise self.need_login(
                server,
                f"HTTP 401 from {shown(request.url)}: the server refused the DPoP nonce it asked for",
                status=401,
            )
        if record is not None and record.access_token != sent:
            return self._header(server, key, record, request)  # another process (or sign-in) stored a newer token
        if record is not None and await self._moved(server, record, bearer.resource_metadata, loopback):
            await self.store().drop_tokens_for(key)  # issued by a server that no longer protects this one
            record = None
        if record is not None and self._refreshed.get(key) != sent:
            self._refreshed[key] = sent or ""
            fresh = await self.refresh(server, key, record.access_token, quiet=True)
            if fresh is not None:
                return self._header(server, key, fresh, request)
        if headless(server):
            d = await self.discover(server, bearer.resource_metadata, allow_loopback_http=loopback)
            scope = " ".join(bearer.scope) or None
            fresh = await headless_token(self, server, d, scope=scope, home=key[3])
            return self._header(server, key, fresh, request)
        return await self._authorize(
            server, key, request, bearer.resource_metadata, bearer.scope, status=401, loopback=loopback
        )

    async def _moved(self, server: ServerConfig, record: TokenRecord, resource_metadata: str, loopback: bool) -> bool:
        """Whether the server's authorization server is no longer the one that issued ``record``
        (its protected-resource metadata names another): then its tokens and its refresh are not
        used, and the sign-in registers with the new one (the store keeps clients per issuer)."""
        try:
            d = await self.discover(server, resource_metadata, allow_loopback_http=loopback, fresh=True)
        except AuthRequired:
            return False  # discovery failed now: refreshing with what is stored may still work
        return not same_issuer(d.server.issuer, record.issuer)

    async def _authorize(
        self,
        server: ServerConfig,
        key: Key,
        request: Any,
        resource_metadata: str,
        scopes: tuple[str, ...],
        *,
        status: int,
        loopback: bool,
    ) -> dict[str, str]:
        """Sign in in-band when a ``kxen_authorize_url`` implementation takes the URL, else raise."""
        ctx = getattr(request, "context", None)
        pm = getattr(ctx, "pm", None)
        needed = f"the server needs the scopes {' '.join(scopes)}" if status == 403 else "a sign-in is needed"
        what = f"HTTP {status} from {shown(request.url)}: {needed}"
        older = self.store().older_shape(server.name, key[2], origin(key[2]))
        if older:
            what = f"{what}; {older}"
        if pm is None or not hookcall.impls(pm, "kxen_authorize_url"):
            await explain_switch(self, server, key[3], resource_metadata, loopback)
            raise self.need_login(server, what, status=status, scopes=scopes if status == 403 else ())
        attempts, since = self._attempts.get(key, (0, time.monotonic()))
        if time.monotonic() - since > ATTEMPT_WINDOW:
            attempts, since = 0, time.monotonic()
        if attempts >= MAX_AUTHORIZATIONS:
            raise self.need_login(
                server,
                f"{what}; gave up after {MAX_AUTHORIZATIONS} authorization attempts",
                status=status,
                scopes=scopes,
            )
        self._attempts[key] = (attempts + 1, since)
        flow = OAuthFlow(
            self,
            server,
            allow_loopback_http=loopback,
            challenge_scopes=scopes,
            resource_metadata=resource_metadata,
            lifetime=120.0,
            in_band=True,
            home=key[3],
        )
        await run_in_band(self, server, flow, pm)
        record = self.store().token(key)
        if record is None:
            raise self.need_login(server, f"{what}; the sign-in stored no token", status=status)
        return self._header(server, key, record, request)

    # -- tokens ------------------------------------------------------------------------------------

    async def keep(
        self,
        server: ServerConfig,
        d: Discovery,
        creds: ClientCredentials,
        answer: TokenAnswer,
        *,
        requested: str | None,
        home: str,
        by_person: bool = True,
    ) -> TokenRecord:
        """Store a token a sign-in got (bound to ``home``, see :mod:`._binding`); one a person
        started (``kxen mcp login``) also forgets the in-band attempts, so the limit on those
        starts again."""
        record = record_of(server, d, creds, answer, requested=requested, home=home)
        self.remember(record.access_token, record.refresh_token, creds.client_secret)
        await self.store().put_token(record)
        key = record.key
        if by_person:
            self._attempts.pop(key, None)
        self._refreshed.pop(key, None)
        return record

    def lock(self, key: Key) -> anyio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = anyio.Lock()
        return lock

    async def refresh(self, server: ServerConfig, key: Key, failed: str, *, quiet: bool = False) -> TokenRecord | None:
        """See :func:`.refresh.refresh_entry`."""
        return await refresh_entry(self, server, key, failed, quiet=quiet)

    async def logout(self, server: ServerConfig, *, forget_client: bool, home: Any = None) -> bool:
        """Forget ``server``'s tokens in this home (another home's stay)."""
        store = self.store()
        mine = home_of(server, home)
        issuers = {t.issuer for t in store.tokens() if t.key[:2] == (server.scope, server.name) and t.home == mine}
        removed = await store.drop_tokens(server.scope, server.name, mine)
        if forget_client:
            removed = await forget_issuer(store, server, mine) or removed
            for issuer in issuers:
                if store.client(issuer) is not None:
                    await store.drop_client(issuer)
                    removed = True
        key = self.key_of(server, home)
        if key is not None:
            for table in (self._sent, self._refreshed, self._attempts):
                table.pop(key, None)
            self._challenged.discard(key)
            self.dpop.forget(key)
        self._discovered.clear()
        return removed

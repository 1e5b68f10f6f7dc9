"""What the sign-in flow and the refresh need from the engine, as a Protocol: they take the engine
by this shape, so neither imports the engine module (which imports them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ._binding import Key  # what a stored token is bound to (re-exported here for the flow and refresh)

if TYPE_CHECKING:
    import anyio
    import httpx

    from kxen_core import ServerConfig
    from kxen_core.errors import AuthRequired

    from ._dpop import Prover
    from ._records import TokenRecord
    from ._tokens import ClientCredentials, TokenAnswer
    from .discovery import Discovery
    from .store import TokenStore


class Engine(Protocol):
    refreshes: int

    def http(self) -> httpx.AsyncClient: ...

    def store(self) -> TokenStore: ...

    def scrub(self, text: str, *extra: str) -> str: ...

    def remember(self, *values: str | None) -> None: ...

    def lock(self, key: Key) -> anyio.Lock: ...

    def need_login(
        self,
        server: ServerConfig,
        reason: str,
        *,
        status: int | None = None,
        scopes: tuple[str, ...] = (),
        next_step: str | None = None,
    ) -> AuthRequired: ...

    def tell(self, notice: Any, *, every: bool = False) -> None: ...

    async def discover(
        self, server: ServerConfig, resource_metadata: str, *, allow_loopback_http: bool, fresh: bool = False
    ) -> Discovery: ...

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
    ) -> TokenRecord: ...

    async def prover(self, key: Key) -> Prover: ...

    def existing_prover(self, key: Key) -> Prover | None: ...

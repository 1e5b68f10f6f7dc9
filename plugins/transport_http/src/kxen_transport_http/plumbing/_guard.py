"""The egress guard at connect time: every TCP connection an HTTP client of kxen makes goes through
:class:`GuardedBackend`, which resolves the host itself, checks *every* address it resolved to
against the rules of :mod:`kxen_core.policy.egress` (link-local and metadata addresses never;
loopback and private ones only when the user allowed them), and then connects to a checked
address -- never to the name, so nothing resolves it again between the check and the connection.

Nothing is cached: each new connection resolves again, so a name that resolves to a refused
address now is refused whatever it resolved to before, and a redirect's connection is checked like
the first. A kept-alive connection stays with the address it was checked for. TLS still verifies
the certificate against the URL's host name (httpcore passes the origin's host as the server
name, not the address connected to). Unix sockets are refused. Environment proxies are not used:
a proxy would resolve the name where kxen cannot check it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import anyio
import httpcore
import httpx

from kxen_core import EgressPolicy, current_egress

#: the most addresses of one name that are checked and tried
MAX_ADDRESSES = 16
#: seconds a resolution may take when the connection has no connect timeout
RESOLVE_SECONDS = 30.0

Resolver = Callable[[str, int], Awaitable[list[str]]]


class EgressRefused(httpcore.ConnectError):
    """A connection the egress rules refuse; the message names the address, the rule and the setting."""


async def resolve_host(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to now (the system resolver, through anyio)."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the egress guard in front of ``connect_tcp``.

    ``policy`` is what the connections may reach; None reads :func:`kxen_core.current_egress` when
    each connection is made (the policy the core set for the task making it). ``resolver`` resolves
    a name (default :func:`resolve_host`, looked up at each call so tests can replace it)."""

    def __init__(
        self,
        policy: EgressPolicy | None = None,
        *,
        resolver: Resolver | None = None,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self._policy = policy
        self._resolver = resolver
        self._inner = inner or httpcore.AnyIOBackend()

    async def _addresses(self, host: str, port: int, timeout: float | None) -> list[str]:
        try:
            return [str(ipaddress.ip_address(host.strip("[]")))]  # an address: nothing to resolve
        except ValueError:
            pass
        resolver = self._resolver or resolve_host
        try:
            with anyio.fail_after(timeout if timeout is not None else RESOLVE_SECONDS):
                found = await resolver(host, port)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host[:100]} took too long") from None
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host[:100]}: {exc.strerror or exc}") from None
        addresses = list(dict.fromkeys(found))[:MAX_ADDRESSES]
        if not addresses:
            raise httpcore.ConnectError(f"cannot resolve {host[:100]}: no address")
        return addresses

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        policy = self._policy or current_egress()
        addresses = await self._addresses(host, port, timeout)
        for address in addresses:  # one refused address refuses the name: it could be the one tried
            why = policy.refusal(address, host)
            if why is not None:
                raise EgressRefused(why)
        last: Exception | None = None
        # the connect timeout bounds all the attempts together, not each one
        deadline = None if timeout is None else anyio.current_time() + timeout
        for address in addresses:
            left = None if deadline is None else deadline - anyio.current_time()
            if left is not None and left <= 0:
                raise httpcore.ConnectTimeout(f"connecting to {host[:100]} took too long")
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout=left, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise EgressRefused("unix socket connections are not made by kxen's HTTP clients")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport over a connection pool whose network is a :class:`GuardedBackend`.

    The request handling is httpx's (``AsyncHTTPTransport``); only the pool differs, so its
    constructor is not called (it would build a pool and an SSL context only to drop them)."""

    def __init__(
        self,
        policy: EgressPolicy | None = None,
        *,
        resolver: Resolver | None = None,
        limits: httpx.Limits | None = None,
    ) -> None:
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(policy, resolver=resolver),
        )


def guarded_transport(policy: EgressPolicy | None = None) -> httpx.AsyncBaseTransport:
    """The transport a kxen HTTP client uses on the real network: connections checked against
    ``policy`` (None: the policy the core set for the task making each connection)."""
    return GuardedTransport(policy)


def egress_refusal(exc: BaseException) -> str | None:
    """The egress rule's message when ``exc`` (an httpx error, or what it was raised from) is a
    refused connection, else None."""
    seen = 0
    node: BaseException | None = exc
    while node is not None and seen < 8:
        if isinstance(node, EgressRefused):
            return str(node)
        node = node.__cause__ or node.__context__
        seen += 1
    return None


__all__ = ["EgressRefused", "GuardedBackend", "GuardedTransport", "egress_refusal", "guarded_transport", "resolve_host"]

"""The egress guard's rules: which network addresses a remote connection may reach.

A remote server's URL, and every URL OAuth discovery hands kxen (protected-resource and
authorization-server metadata, the authorization, token and registration endpoints), is checked
where the connection is made, *after* the name was resolved, against the addresses it resolved to
-- every time a connection is made, so a name that once resolved to an allowed address and now
resolves to a refused one is refused (DNS rebinding), and a redirect's connection is checked the
same way. The network code that applies these rules is the HTTP plugins' (``kxen_transport_http``'s
guarded transport); the rules are here, pure, so every plugin refuses the same addresses with the
same words.

* **Always refused**: link-local and cloud metadata addresses (``169.254.0.0/16``, ``fe80::/10``,
  ``fd00:ec2::254``, ``100.100.100.200``), the unspecified address (``0.0.0.0``, ``::``), multicast,
  broadcast and the other reserved ranges. No setting allows them.
* **Loopback** (``127.0.0.0/8``, ``::1``): only with ``[mcp] allow_loopback_http = true``.
* **Private** (RFC 1918 ``10/8``, ``172.16/12``, ``192.168/16``; ULA ``fc00::/7``; CGNAT
  ``100.64.0.0/10``; site-local ``fec0::/10``): only with ``[mcp.private_network] allow = true``,
  or for the user's own entries named in ``[mcp.private_network] servers``.

An IPv6 address that carries an IPv4 one (``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4
``2002::/16``) is judged by the IPv4 address it carries.

Where no policy was handed to the connection, the one the core set for the task making it is used
(:func:`current_egress`: the runtime sets it for each server's task and each sign-in); with none
set, the strictest (neither loopback nor private addresses).
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from kxen_core.config.models import ServerConfig, Settings

_Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: metadata services that are not inside a link-local range (AWS over IPv6, Alibaba Cloud)
METADATA = frozenset({ipaddress.ip_address("fd00:ec2::254"), ipaddress.ip_address("100.100.100.200")})
_LINK_LOCAL = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))
PRIVATE = (
    ipaddress.ip_network("10.0.0.0/8"),
    ipaddress.ip_network("172.16.0.0/12"),
    ipaddress.ip_network("192.168.0.0/16"),
    ipaddress.ip_network("100.64.0.0/10"),
    ipaddress.ip_network("fc00::/7"),
    ipaddress.ip_network("fec0::/10"),
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

ALWAYS_RULE = "a link-local or cloud metadata address: never reached (no setting allows it)"
RESERVED_RULE = "not a public address (unspecified, multicast, broadcast or reserved): never reached"
LOOPBACK_RULE = "a loopback address: needs [mcp] allow_loopback_http = true in config.toml"
PRIVATE_RULE = (
    "a private address (RFC 1918, ULA, CGNAT): needs [mcp.private_network] allow = true, or the server "
    "in [mcp.private_network] servers, in config.toml"
)


def _carried(address: _Address) -> _Address:
    """The IPv4 address an IPv6 one carries (mapped, NAT64, 6to4), else the address itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.sixtofour is not None:
            return address.sixtofour
    return address


def classify(address: str) -> str:
    """``"always"``, ``"reserved"``, ``"loopback"``, ``"private"`` or ``"public"`` for an IP address
    (an IPv6 scope ``%eth0`` is allowed); ``"reserved"`` for text that is no address."""
    try:
        ip: _Address = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return "reserved"
    ip = _carried(ip)
    if ip in METADATA or any(ip in net for net in _LINK_LOCAL if net.version == ip.version):
        return "always"
    if ip.is_loopback:
        return "loopback"
    if any(ip in net for net in PRIVATE if net.version == ip.version):
        return "private"
    if ip.is_unspecified or ip.is_multicast or ip.is_reserved or not ip.is_global:
        return "reserved"
    return "public"


@attrs.frozen(kw_only=True)
class EgressPolicy:
    """What one connection may reach: loopback and private addresses only when allowed (the
    always-refused addresses never). ``server`` names the server in messages."""

    server: str = ""
    allow_loopback: bool = False
    allow_private: bool = False

    def refusal(self, address: str, host: str | None = None) -> str | None:
        """Why a connection to ``address`` (resolved from ``host``) is refused -- the rule and the
        setting that allows it, if any -- or None when it may be made."""
        kind = classify(address)
        if kind == "public" or (kind == "loopback" and self.allow_loopback):
            return None
        if kind == "private" and self.allow_private:
            return None
        rule = {"always": ALWAYS_RULE, "loopback": LOOPBACK_RULE, "private": PRIVATE_RULE}.get(kind, RESERVED_RULE)
        source = f" (resolved from {host[:100]})" if host and host != address else ""
        who = f" for server {self.server!r}" if self.server else ""
        return f"connection to {address}{source}{who} refused: {rule}"


def egress_for(server: ServerConfig, settings: Settings | None) -> EgressPolicy:
    """The policy of ``server``'s connections under the user's ``settings``. ``[mcp.private_network]
    servers`` names only the user's own entries: a project entry of the same name does not inherit
    the allowance.

    Without settings -- a transport context built by hand in code (a host driving a transport
    itself, a test), where no user config is in play -- loopback may be reached, since the code
    named it; private and metadata addresses are refused as ever. The runtime always has settings."""
    if settings is None:
        return EgressPolicy(server=server.name, allow_loopback=True)
    mcp = settings.mcp
    private = mcp.private_network
    named = server.scope == "user" and server.name in private.servers
    return EgressPolicy(
        server=server.name, allow_loopback=mcp.allow_loopback_http, allow_private=private.allow or named
    )


_current: ContextVar[EgressPolicy | None] = ContextVar("kxen_egress", default=None)
STRICT = EgressPolicy()


def current_egress() -> EgressPolicy:
    """The policy the core set for the task running now (:func:`using_egress`), else the strictest."""
    return _current.get() or STRICT


@contextlib.contextmanager
def using_egress(policy: EgressPolicy) -> Iterator[EgressPolicy]:
    """Make ``policy`` the one :func:`current_egress` gives in this task (and the tasks it starts)."""
    token = _current.set(policy)
    try:
        yield policy
    finally:
        _current.reset(token)


__all__ = [
    "ALWAYS_RULE",
    "LOOPBACK_RULE",
    "PRIVATE_RULE",
    "RESERVED_RULE",
    "EgressPolicy",
    "classify",
    "current_egress",
    "egress_for",
    "using_egress",
]

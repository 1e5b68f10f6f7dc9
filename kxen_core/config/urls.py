"""The rules a remote server's URL must keep (checked at config load): https, or plain http to a
loopback host when the user allowed it; no credentials in the URL."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback_host(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_remote_url(url: str, *, allow_loopback_http: bool, settings_file: str | None = None) -> str | None:
    """The rule a remote URL breaks, or None: https only, no credentials in it; plain http only
    for loopback hosts and only when the user allowed loopback HTTP (the rule then names
    ``settings_file``, the user's config.toml, when given, and the command that sets it)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 -- raises ValueError on a bad port
    except ValueError:
        return "must be a valid URL"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "must not carry a username or password"
    if not host:
        return "must have a host"
    if parts.scheme == "https":
        return None
    if parts.scheme == "http":
        if not is_loopback_host(host):
            return "must be https:// (plain http:// only for loopback hosts)"
        if not allow_loopback_http:
            where = f" ({settings_file}: kxen config set mcp.allow_loopback_http true)" if settings_file else ""
            return f"plain http:// to a loopback host needs [mcp] allow_loopback_http = true in user settings{where}"
        return None
    return "must be an https:// URL"


__all__ = ["check_remote_url", "is_loopback_host"]

"""URLs: the canonical resource a token is bound to, the well-known discovery URLs in the spec's
order, and the rule every endpoint found by discovery must keep."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from kxen_core.config.models import is_loopback_host

_DEFAULT_PORTS = {"http": 80, "https": 443}


class UrlRefused(ValueError):
    """A URL that must not be used; its text names the rule (never a secret: no query is shown)."""


def canonical_resource(url: str) -> str:
    """The canonical resource URL of an MCP server: scheme and host lower-cased, the default port
    dropped, the fragment dropped, path and query kept exactly (RFC 8707; MCP "canonical URI").

    The token store binds every entry to this string, so a different host, port, path or query is a
    different resource that needs its own authorization.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        raise UrlRefused("the server URL must be an absolute http(s) URL with a host")
    if parts.username is not None or parts.password is not None:
        raise UrlRefused("the server URL must not carry a username or password")
    netloc = f"[{host}]" if ":" in host else host
    port = parts.port
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc = f"{netloc}:{port}"
    return urlunsplit((scheme, netloc, parts.path, parts.query, ""))


def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url`` (canonical form)."""
    parts = urlsplit(canonical_resource(url))
    return f"{parts.scheme}://{parts.netloc}"


def same_origin(a: str, b: str) -> bool:
    try:
        return origin(a) == origin(b)
    except UrlRefused:
        return False


def shown(url: str) -> str:
    """A URL for a message: scheme, host, port and path only (a query may hold a secret)."""
    try:
        parts = urlsplit(url)
        return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))[:300]
    except ValueError:
        return "(an invalid URL)"


def check_endpoint(url: object, what: str, *, allow_loopback_http: bool) -> str:
    """``url`` when it may be used as an OAuth endpoint, else :class:`UrlRefused` naming ``what``.

    https only; plain http only to a loopback host and only when the user allowed loopback HTTP
    (the local protocol-testing mode). No credentials in the URL, no fragment.
    """
    if not isinstance(url, str) or not url or len(url) > 2048:
        raise UrlRefused(f"{what} must be a URL of at most 2048 characters")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 -- raises ValueError on a bad port
    except ValueError:
        raise UrlRefused(f"{what} is not a valid URL") from None
    if not host or parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise UrlRefused(f"{what} must have a host and no username or password")
    if parts.fragment:
        raise UrlRefused(f"{what} must not have a fragment")
    if parts.scheme == "https":
        return url
    if parts.scheme == "http" and is_loopback_host(host):
        if allow_loopback_http:
            return url
        raise UrlRefused(f"{what} {shown(url)} is plain http: only with [mcp] allow_loopback_http = true")
    if parts.scheme == "http":
        raise UrlRefused(f"{what} {shown(url)} uses plaintext http to a public host: refused (https only)")
    raise UrlRefused(f"{what} must be an https:// URL")


def prm_urls(server_url: str) -> list[str]:
    """RFC 9728 protected-resource metadata URLs to try when the challenge named none: the
    path-inserted well-known URL (unless the server is at the root), then the root one."""
    parts = urlsplit(server_url)
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    urls = []
    if path:
        urls.append(f"{base}/.well-known/oauth-protected-resource{path}")
    urls.append(f"{base}/.well-known/oauth-protected-resource")
    return urls


def as_metadata_urls(issuer: str) -> list[str]:
    """Authorization-server metadata URLs for ``issuer`` in the spec's order: RFC 8414 path
    insertion, OIDC path insertion, OIDC path appending (or, without a path, RFC 8414 then OIDC)."""
    parts = urlsplit(issuer)
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if not path:
        return [f"{base}/.well-known/oauth-authorization-server", f"{base}/.well-known/openid-configuration"]
    return [
        f"{base}/.well-known/oauth-authorization-server{path}",
        f"{base}/.well-known/openid-configuration{path}",
        f"{base}{path}/.well-known/openid-configuration",
    ]


def same_issuer(expected: str, got: str) -> bool:
    """RFC 8414 §3.3: the metadata's ``issuer`` is the issuer the URL was built from. Exact, but a
    trailing slash on either side is tolerated (servers differ on it; the host and path must agree)."""
    return got == expected or got.rstrip("/") == expected.rstrip("/")

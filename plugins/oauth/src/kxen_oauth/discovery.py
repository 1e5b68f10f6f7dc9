"""Discovery: which authorization server protects an MCP server, and its endpoints.

Order (MCP 2025-11-25 authorization): RFC 9728 protected-resource metadata from the challenge's
``resource_metadata`` URL, else the path-inserted then the root well-known URL; its ``resource``
must be the server (same origin, and the server's path at or under it); its first authorization
server's metadata via RFC 8414 and OpenID Connect discovery (path insertion, then path appending),
whose ``issuer`` must be the one the URL was built from. A user's ``authorizationServerMetadataUrl``
replaces the authorization-server step. Without any protected-resource metadata the 2025-03-26
rules apply: metadata at the server's origin, else ``/authorize``, ``/token`` and ``/register``
there. Every endpoint is checked by :func:`~._urls.check_endpoint`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import attrs
import httpx

from ._fetch import OAuthHttpError, bool_field, request_json, str_field, str_list
from ._urls import (
    UrlRefused,
    as_metadata_urls,
    canonical_resource,
    check_endpoint,
    origin,
    prm_urls,
    same_issuer,
    shown,
)


class DiscoveryError(Exception):
    """Discovery found no usable authorization server; the text says why (no secrets)."""


@attrs.frozen(kw_only=True)
class ProtectedResource:
    """RFC 9728 metadata, validated."""

    url: str
    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None = None


@attrs.frozen(kw_only=True)
class AuthServer:
    """RFC 8414 / OIDC metadata, validated (``synthesised``: the 2025-03-26 default endpoints)."""

    issuer: str
    authorization_endpoint: str | None
    token_endpoint: str
    registration_endpoint: str | None = None
    scopes_supported: tuple[str, ...] | None = None
    code_challenge_methods: tuple[str, ...] | None = None
    auth_methods: tuple[str, ...] | None = None
    grant_types: tuple[str, ...] | None = None
    cimd_supported: bool = False
    iss_parameter_supported: bool = False
    #: ``dpop_signing_alg_values_supported`` (RFC 9449 §5.1)
    dpop_algs: tuple[str, ...] | None = None
    synthesised: bool = False


@attrs.frozen(kw_only=True)
class Discovery:
    """What a sign-in needs: the canonical server URL the token is bound to, the resource
    indicator to send (RFC 8707), the protected-resource metadata (None in the 2025-03-26 mode)
    and the authorization server."""

    canonical: str
    resource: str
    prm: ProtectedResource | None
    server: AuthServer


def _within(resource: str, canonical: str) -> bool:
    """The PRM's ``resource`` names this server: the same canonical URL, or the same origin with
    the server's path at or under the resource's path (a server whose resource is its origin)."""
    if resource == canonical:
        return True
    r, c = urlsplit(resource), urlsplit(canonical)
    if (r.scheme, r.netloc) != (c.scheme, c.netloc) or r.query:
        return False
    base = r.path.rstrip("/")
    return c.path == base or c.path.startswith(base + "/")


def parse_prm(doc: dict[str, Any], url: str, *, allow_loopback_http: bool) -> ProtectedResource:
    try:
        resource = str_field(doc, "resource", required=True)
        servers = str_list(doc, "authorization_servers", limit=20)
        scopes = str_list(doc, "scopes_supported")
    except ValueError as exc:
        raise DiscoveryError(f"protected-resource metadata {shown(url)}: {exc}") from None
    if not servers:
        raise DiscoveryError(f"protected-resource metadata {shown(url)} names no authorization_servers")
    usable = []
    for s in servers:
        try:
            usable.append(check_endpoint(s, "authorization server", allow_loopback_http=allow_loopback_http))
        except UrlRefused:
            continue
    if not usable:
        check_endpoint(servers[0], "authorization server", allow_loopback_http=allow_loopback_http)  # raises, naming it
    return ProtectedResource(
        url=url, resource=resource or "", authorization_servers=tuple(usable), scopes_supported=scopes
    )


def parse_as_metadata(doc: dict[str, Any], url: str, *, allow_loopback_http: bool) -> AuthServer:
    def endpoint(key: str, required: bool) -> str | None:
        value = str_field(doc, key, required=required)
        if value is None:
            return None
        return check_endpoint(value, key, allow_loopback_http=allow_loopback_http)

    try:
        return AuthServer(
            issuer=str_field(doc, "issuer", required=True) or "",
            authorization_endpoint=endpoint("authorization_endpoint", False),
            token_endpoint=endpoint("token_endpoint", True) or "",
            registration_endpoint=endpoint("registration_endpoint", False),
            scopes_supported=str_list(doc, "scopes_supported"),
            code_challenge_methods=str_list(doc, "code_challenge_methods_supported"),
            auth_methods=str_list(doc, "token_endpoint_auth_methods_supported"),
            grant_types=str_list(doc, "grant_types_supported"),
            cimd_supported=bool_field(doc, "client_id_metadata_document_supported"),
            iss_parameter_supported=bool_field(doc, "authorization_response_iss_parameter_supported"),
            dpop_algs=str_list(doc, "dpop_signing_alg_values_supported"),
        )
    except (ValueError, UrlRefused) as exc:
        raise DiscoveryError(f"authorization server metadata {shown(url)}: {exc}") from None


async def _get(client: httpx.AsyncClient, url: str) -> dict[str, Any] | None:
    """The JSON object at ``url``, or None when it is not there (any 4xx/5xx)."""
    try:
        status, doc = await request_json(client, "GET", url, follow_same_origin=True)
    except OAuthHttpError as exc:
        if exc.status is not None and exc.status >= 400:
            return None
        raise DiscoveryError(str(exc)) from None
    return doc if status == 200 else None


async def find_prm(
    client: httpx.AsyncClient, server_url: str, resource_metadata: str, *, allow_loopback_http: bool
) -> ProtectedResource | None:
    """The server's protected-resource metadata, or None when no URL has any."""
    urls: list[str] = []
    if resource_metadata:
        try:
            urls.append(check_endpoint(resource_metadata, "resource_metadata", allow_loopback_http=allow_loopback_http))
        except UrlRefused as exc:
            raise DiscoveryError(str(exc)) from None
    urls += [u for u in prm_urls(server_url) if u not in urls]
    for url in urls:
        doc = await _get(client, url)
        if doc is not None:
            return parse_prm(doc, url, allow_loopback_http=allow_loopback_http)
    return None


async def find_auth_server(client: httpx.AsyncClient, issuer: str, *, allow_loopback_http: bool) -> AuthServer | None:
    """The metadata of ``issuer`` (RFC 8414, then OIDC), or None when none of its URLs has any."""
    for url in as_metadata_urls(issuer):
        doc = await _get(client, url)
        if doc is None:
            continue
        meta = parse_as_metadata(doc, url, allow_loopback_http=allow_loopback_http)
        if not same_issuer(issuer, meta.issuer):
            raise DiscoveryError(
                f"authorization server metadata {shown(url)} names issuer {shown(meta.issuer)}, "
                f"not {shown(issuer)}: refused (RFC 8414 §3.3)"
            )
        return meta
    return None


def fallback_server(server_url: str, *, allow_loopback_http: bool) -> AuthServer:
    """The 2025-03-26 default endpoints at the server's origin."""
    base = origin(server_url)
    try:
        token = check_endpoint(f"{base}/token", "token endpoint", allow_loopback_http=allow_loopback_http)
    except UrlRefused as exc:
        raise DiscoveryError(str(exc)) from None
    return AuthServer(
        issuer=base,
        authorization_endpoint=f"{base}/authorize",
        token_endpoint=token,
        registration_endpoint=f"{base}/register",
        code_challenge_methods=("S256",),
        synthesised=True,
    )


async def discover(
    client: httpx.AsyncClient,
    server_url: str,
    *,
    resource_metadata: str = "",
    metadata_url: str | None = None,
    allow_loopback_http: bool = False,
    diagnostic: Callable[[str], None] = lambda _: None,
) -> Discovery:
    """Find the authorization server of ``server_url`` (see the module docstring)."""
    try:
        canonical = canonical_resource(server_url)
    except UrlRefused as exc:
        raise DiscoveryError(str(exc)) from None
    prm = await find_prm(client, server_url, resource_metadata, allow_loopback_http=allow_loopback_http)
    resource = canonical
    if prm is not None:
        try:
            declared = canonical_resource(prm.resource)
        except UrlRefused:
            declared = prm.resource
        if not _within(declared, canonical):
            raise DiscoveryError(
                f"protected-resource metadata {shown(prm.url)} is for resource {shown(prm.resource)}, "
                f"not this server ({shown(canonical)}): refused, no token is asked for it"
            )
        resource = declared
    if metadata_url:
        doc = await _get(
            client,
            check_endpoint(metadata_url, "authorizationServerMetadataUrl", allow_loopback_http=allow_loopback_http),
        )
        if doc is None:
            raise DiscoveryError(f"authorizationServerMetadataUrl {shown(metadata_url)} has no metadata")
        server = parse_as_metadata(doc, metadata_url, allow_loopback_http=allow_loopback_http)
    elif prm is not None:
        found = None
        for issuer in prm.authorization_servers:
            found = await find_auth_server(client, issuer, allow_loopback_http=allow_loopback_http)
            if found is not None:
                break
        if found is None:
            raise DiscoveryError(f"no metadata found for authorization server {shown(prm.authorization_servers[0])}")
        server = found
    else:
        diagnostic(f"no protected-resource metadata for {shown(canonical)}: using the 2025-03-26 discovery")
        base = origin(server_url)
        doc = await _get(client, f"{base}/.well-known/oauth-authorization-server")
        if doc is not None:
            server = parse_as_metadata(doc, base, allow_loopback_http=allow_loopback_http)
        else:
            server = fallback_server(server_url, allow_loopback_http=allow_loopback_http)
    return Discovery(canonical=canonical, resource=resource, prm=prm, server=server)

"""Which client id kxen presents where an authorization server supports Client ID Metadata Documents."""

from __future__ import annotations

import attrs
from kxen_oauth.discovery import AuthServer
from kxen_oauth.registration import metadata_document_client

from kxen_core import ServerConfig
from kxen_core.config.models import OAuthConfig

AS = AuthServer(
    issuer="https://as.example", authorization_endpoint="https://as.example/a", token_endpoint="https://as.example/t"
)


def server(oauth: OAuthConfig | None) -> ServerConfig:
    return ServerConfig(name="s", url="https://mcp.example/mcp", oauth=oauth)


def test_no_metadata_document_without_the_users_own() -> None:
    # kxen ships no default document: whoever controls it would name the redirect URIs
    supported = attrs.evolve(AS, cimd_supported=True)
    assert metadata_document_client(server(None), supported) is None
    assert metadata_document_client(server(OAuthConfig(scopes=["a"])), supported) is None


def test_the_users_document_where_the_server_supports_them() -> None:
    url = "https://me.example/kxen-client.json"
    supported = attrs.evolve(AS, cimd_supported=True)
    client = metadata_document_client(server(OAuthConfig(clientMetadataUrl=url)), supported)
    assert client is not None and client.client_id == url and client.auth_method == "none"
    assert metadata_document_client(server(OAuthConfig(clientMetadataUrl=url)), AS) is None

"""URL rules for remote servers at load time: https only (plain http only to loopback, and only
with the user's ``allow_loopback_http``), no userinfo, the same rules for OAuth metadata URLs and
for project entries; every problem listed at once, never echoing a password."""

from __future__ import annotations

import json

import pytest
from remote_support import REMOTE_PLUGINS, remote, write_project

from kxen_core import Runtime
from kxen_core.config import load_config
from kxen_core.errors import ConfigError
from kxen_core.plugins.manager import make_plugin_manager

pytestmark = pytest.mark.anyio


# --- URL rules at load time ---------------------------------------------------------------------------


NOT_HTTPS = "must be https:// (plain http:// only for loopback hosts)"
USERINFO = "must not carry a username or password"
NEEDS_LOOPBACK_SETTING = "plain http:// to a loopback host needs [mcp] allow_loopback_http = true in user settings"


def named(rule: str, home) -> str:
    """The loopback rule names the user's config.toml and the command that sets the key."""
    if rule != NEEDS_LOOPBACK_SETTING:
        return rule
    return f"{rule} ({home.path / 'config.toml'}: kxen config set mcp.allow_loopback_http true)"


BAD_URLS = [
    ("http://example.com/mcp", True, NOT_HTTPS),
    ("http://10.0.0.1:8080/mcp", True, NOT_HTTPS),
    ("http://0.0.0.0:8080/mcp", True, NOT_HTTPS),
    ("http://127.0.0.1.nip.io/mcp", True, NOT_HTTPS),
    ("http://localhost.example.com/mcp", True, NOT_HTTPS),
    ("https://alice:hunter2-pass@example.com/mcp", True, USERINFO),
    ("https://alice@example.com/mcp", True, USERINFO),
    ("http://bob:hunter2-pass@127.0.0.1:8080/mcp", True, USERINFO),
    ("http://127.0.0.1:8080/mcp", False, NEEDS_LOOPBACK_SETTING),
    ("http://localhost:8080/mcp", False, NEEDS_LOOPBACK_SETTING),
    ("http://[::1]:8080/mcp", False, NEEDS_LOOPBACK_SETTING),
    ("ftp://example.com/mcp", True, "must be an https:// URL"),
]


def loopback_settings(allow: bool) -> str:
    return f"[mcp]\nallow_loopback_http = {'true' if allow else 'false'}\n"


@pytest.mark.parametrize("kind", ["http", "sse"])
@pytest.mark.parametrize(("url", "allow", "rule"), BAD_URLS)
async def test_bad_remote_url_is_a_config_error(kxen_home, ws, kind, url, allow, rule):
    kxen_home.write_settings(loopback_settings(allow))
    servers = kxen_home.write_servers({"good": remote("https://mcp.example.com/mcp"), "r": remote(url, kind)})
    with pytest.raises(ConfigError) as info:
        load_config(kxen_home.path, ws)
    assert info.value.problems == [f"{servers}: mcpServers.r.url: {named(rule, kxen_home)}"]
    assert "hunter2" not in str(info.value)
    # the Runtime refuses the same config before starting anything
    with pytest.raises(ConfigError):
        async with Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=REMOTE_PLUGINS)):
            pytest.fail("entered a runtime with an invalid config")


@pytest.mark.parametrize(
    ("url", "allow", "rule"),
    [
        ("http://auth.example.com/.well-known/oauth-authorization-server", True, NOT_HTTPS),
        ("http://127.0.0.1:9000/.well-known/oauth-authorization-server", False, NEEDS_LOOPBACK_SETTING),
        ("https://user:hunter2-pass@auth.example.com/meta", True, USERINFO),
    ],
)
def test_bad_oauth_metadata_url_is_a_config_error(kxen_home, ws, url, allow, rule):
    kxen_home.write_settings(loopback_settings(allow))
    servers = kxen_home.write_servers(
        {"r": remote("https://mcp.example.com/mcp", oauth={"clientId": "kxen", "authorizationServerMetadataUrl": url})}
    )
    with pytest.raises(ConfigError) as info:
        load_config(kxen_home.path, ws)
    assert info.value.problems == [
        f"{servers}: mcpServers.r.oauth.authorizationServerMetadataUrl: {named(rule, kxen_home)}"
    ]
    assert "hunter2" not in str(info.value)


def test_every_url_problem_is_listed_at_once(kxen_home, ws):
    kxen_home.write_settings(loopback_settings(False))
    servers = kxen_home.write_servers(
        {
            "a": remote("http://example.com/mcp", oauth={"authorizationServerMetadataUrl": "http://example.com/m"}),
            "b": remote("http://127.0.0.1:1/sse", "sse"),
        }
    )
    with pytest.raises(ConfigError) as info:
        load_config(kxen_home.path, ws)
    assert sorted(info.value.problems) == sorted(
        [
            f"{servers}: mcpServers.a.url: {NOT_HTTPS}",
            f"{servers}: mcpServers.a.oauth.authorizationServerMetadataUrl: {NOT_HTTPS}",
            f"{servers}: mcpServers.b.url: {named(NEEDS_LOOPBACK_SETTING, kxen_home)}",
        ]
    )


@pytest.mark.parametrize(
    ("url", "allow"),
    [
        ("https://mcp.example.com/mcp", False),
        ("https://mcp.example.com:8443/a/b?x=1", False),
        ("http://127.0.0.1:8080/mcp", True),
        ("http://127.1.2.3:8080/mcp", True),
        ("http://localhost:8080/mcp", True),
        ("http://LOCALHOST:8080/mcp", True),
        ("http://[::1]:8080/mcp", True),
    ],
)
def test_good_remote_urls_load(kxen_home, ws, url, allow):
    kxen_home.write_settings(loopback_settings(allow))
    kxen_home.write_servers({"r": remote(url), "s": remote(url, "sse")})
    config = load_config(kxen_home.path, ws)
    assert config.servers["r"].url == url and config.servers["s"].is_remote


def test_project_url_rules_follow_the_users_settings(kxen_home, ws):
    """A project entry gets the same URL rules, judged by the user's settings; its file is rejected
    whole (the user's servers still load)."""
    kxen_home.write_settings(f"trusted_workspaces = [{json.dumps(str(ws.resolve()))}]\n")
    kxen_home.write_servers({"mine": remote("https://mcp.example.com/mcp")})
    pfile = write_project(
        ws,
        {
            "mcpServers": {
                "loop": {"url": "http://127.0.0.1:8080/mcp"},
                "plain": {"url": "http://example.com/sse", "transport": "sse"},
            }
        },
    )
    config = load_config(kxen_home.path, ws)
    assert set(config.servers) == {"mine"}
    assert sorted(config.project_problems) == sorted(
        [
            f"{pfile}: mcpServers.loop.url: {named(NEEDS_LOOPBACK_SETTING, kxen_home)}",
            f"{pfile}: mcpServers.plain.url: {NOT_HTTPS}",
        ]
    )

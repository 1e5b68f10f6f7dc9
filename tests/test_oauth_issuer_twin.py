"""A configured confidential client (clientId + clientSecret) and a server whose protected-resource
metadata switches to another authorization server, against two OAuth peers
(tests/peers/auth_peer.py) and the ``kxen`` command in its own process (a fresh discovery each
time): the twin of plugins/oauth/tests/test_oauth_issuers.py."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request

from oauth_support import auth_peer, peer_stats, stored
from remote_support import remote, remote_on

SECRET = "s3cret-of-the-configured-client"


def kxen(home, ws, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "KXEN_HOME": str(home), "KXEN_LOAD_PLUGINS": "http,sse,oauth"}
    return subprocess.run(
        [sys.executable, "-m", "kxen_core.cli.command", "--workspace", str(ws), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def names(url: str, issuer: str) -> None:
    base = url.rsplit("/", 1)[0]
    request = urllib.request.Request(f"{base}/_peer/prm?issuer={issuer}", method="POST", data=b"")
    with urllib.request.urlopen(request, timeout=10):  # 127.0.0.1 only
        pass


def test_a_client_secret_does_not_follow_the_server_to_another_authorization_server(kxen_home, ws, start_peer):
    url, _ = auth_peer(start_peer)
    other, _ = auth_peer(start_peer)  # another authorization server (and its own MCP server)
    kxen_home.write_settings(remote_on(url))
    entry = {**remote(url), "oauth": {"clientId": "kxen-ci", "clientSecret": SECRET}}
    kxen_home.write_servers({"r": entry})
    first = kxen(kxen_home.path, ws, "mcp", "login", "r", "--no-browser", "--timeout", "1")
    issuer = url.rsplit("/", 1)[0]
    assert f"{issuer}/authorize?" in first.stdout, (first.stdout, first.stderr)  # first use: bound to it
    assert [b["issuer"] for b in stored()["issuers"]] in ([issuer], [issuer + "/"])
    other_issuer = other.rsplit("/", 1)[0]
    names(url, other_issuer)  # the server now names the other authorization server
    second = kxen(kxen_home.path, ws, "mcp", "login", "r", "--no-browser", "--timeout", "1")
    assert second.returncode == 1
    assert f"now names {other_issuer}" in second.stderr and "nothing was sent there" in second.stderr, second.stderr
    assert "/authorize?" not in second.stdout
    stats = peer_stats(other)
    assert (stats["registrations"], stats["authorizations"], stats["exchanges"]) == (0, 0, 0)
    status = kxen(kxen_home.path, ws, "mcp", "status", "--wait", "30")
    assert "kxen mcp logout r --forget-client" in status.stdout, status.stdout
    assert SECRET not in first.stdout + first.stderr + second.stdout + second.stderr + status.stdout + status.stderr
    # the person confirms: forget the binding; the next sign-in goes to the new server
    assert kxen(kxen_home.path, ws, "mcp", "logout", "r", "--forget-client").returncode == 0
    third = kxen(kxen_home.path, ws, "mcp", "login", "r", "--no-browser", "--timeout", "1")
    assert f"{other_issuer}/authorize?" in third.stdout, (third.stdout, third.stderr)

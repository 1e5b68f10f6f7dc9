"""Helpers of the OAuth tests (tests/test_oauth_*.py): the OAuth peer (tests/peers/auth_peer.py),
an authorize-URL taker that follows the URL like a browser (and fills the split peer's login form),
and a runner for kxen in a second process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from kxen_core import hookimpl

PEERS = Path(__file__).resolve().parent / "peers"
AUTH_PEER = PEERS / "auth_peer.py"
RUNNER = PEERS / "oauth_runner.py"
#: the plugins an OAuth test loads: the transports and kxen-oauth
OAUTH_PLUGINS = ("http", "sse", "oauth")


def auth_peer(start_peer: Callable[..., int], *flags: str, split: bool = False) -> tuple[str, int]:
    """Start the OAuth peer; ``(MCP URL, authorization-server port or 0)``."""
    pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK (a dev dependency) is not installed")
    as_port = _free_port() if split else 0
    extra = ("--split", str(as_port)) if split else ()
    port = start_peer([sys.executable, str(AUTH_PEER), "{port}", *extra, *flags])
    return f"http://127.0.0.1:{port}/mcp", as_port


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def peer_stats(url: str) -> dict[str, Any]:
    base = url.rsplit("/", 1)[0]
    with urllib.request.urlopen(f"{base}/_peer/stats", timeout=10) as response:  # 127.0.0.1 only
        return json.loads(response.read())


def peer_expire(url: str) -> None:
    base = url.rsplit("/", 1)[0]
    request = urllib.request.Request(f"{base}/_peer/expire", method="POST", data=b"")
    with urllib.request.urlopen(request, timeout=10):
        pass


def token_hash(token: str) -> str:
    import hashlib

    return hashlib.sha256(token.encode()).hexdigest()[:16]


_FORM = re.compile(r'<form method="post" action="([^"]+)"><input type="hidden" name="tx" value="([^"]+)">')


class Follower:
    """Takes every authorization URL like a browser would: GET, follow redirects (at most 10),
    fill in the login form of the split peer when one shows, until the loopback redirect answered.
    Records the URLs it was given and where each ended."""

    def __init__(self, *, password: str = "wonderland", take: bool = True) -> None:
        self.password = password
        self.take = take
        self.urls: list[str] = []
        self.landed: list[str] = []

    async def follow(self, url: str) -> None:
        # urllib, in a thread: like a browser, it is not kxen, and it logs nothing (the URLs it
        # walks carry the code and state, which kxen itself must never log)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy: loopback only

        def walk() -> str:
            with opener.open(url, timeout=20) as response:  # 127.0.0.1 only; follows redirects
                final, body = response.geturl(), response.read(65536).decode("utf-8", "replace")
            form = _FORM.search(body)
            if form:
                target = urllib.parse.urljoin(final, form.group(1))
                data = urllib.parse.urlencode(
                    {"tx": form.group(2), "user": "alice", "password": self.password}
                ).encode()
                with opener.open(target, data=data, timeout=20) as response:
                    final = response.geturl()
            return final

        try:
            self.landed.append(await anyio.to_thread.run_sync(walk))
        except urllib.error.HTTPError as exc:  # the page refused (a wrong password): no redirect comes
            exc.close()
            raise RuntimeError(f"the sign-in page answered HTTP {exc.code}") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ConnectionError):
                raise httpx.ConnectError(f"nobody listens at the end of the walk: {exc.reason}") from None
            raise

    @hookimpl
    async def kxen_authorize_url(self, server: Any, url: str) -> bool | None:
        self.urls.append(url)
        if not self.take:
            return None
        with anyio.fail_after(30):
            await self.follow(url)
        return True


def store_file() -> Path:
    return Path(os.environ["KXEN_DATA_DIR"]) / "mcp-oauth.json"


def stored() -> dict[str, Any]:
    return json.loads(store_file().read_text())


def run_second_process(home: Path, ws: Path, *args: str, timeout: float = 60) -> subprocess.Popen:
    """Start tests/peers/oauth_runner.py (kxen in another process, same data dir); the caller waits."""
    return subprocess.Popen(
        [sys.executable, str(RUNNER), str(home), str(ws), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ},
    )

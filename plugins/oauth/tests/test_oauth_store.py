"""The token store: mode 0600, atomic replacement (a SIGKILL in the middle of a write leaves a file
that parses), cached reads, the version rule, and older shapes that are never used."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest
from kxen_oauth._records import TokenRecord
from kxen_oauth.store import StoreError, TokenStore

pytestmark = pytest.mark.anyio


def record(n: int = 0, **kw) -> TokenRecord:
    fields = dict(
        config_scope="user",
        server="r",
        resource="https://rs.example/mcp",
        issuer="https://as.example",
        client_id="c",
        access_token=f"AT-{n}",
        refresh_token=f"RT-{n}",
        expires_at=time.time() + 3600,
        home="",
    )
    fields.update(kw)
    return TokenRecord(**fields)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_created_0600_in_a_0700_directory(tmp_path):
    store = TokenStore(tmp_path / "data")
    await store.put_token(record())
    assert mode(store.path) == 0o600
    assert mode(store.dir) == 0o700
    doc = json.loads(store.path.read_text())
    assert doc["version"] == 1 and doc["tokens"][0]["accessToken"] == "AT-0"
    assert store.token(("user", "r", "https://rs.example/mcp", "")).refresh_token == "RT-0"
    assert store.token(("project", "r", "https://rs.example/mcp", "")) is None  # another config scope
    assert store.token(("user", "r", "https://rs.example/mcp?x=1", "")) is None  # another resource
    assert store.token(("user", "r", "https://rs.example/mcp", "/tmp/demo-home")) is None  # another home


async def test_a_wider_file_is_set_back_to_0600_with_a_diagnostic(tmp_path):
    said: list[str] = []
    store = TokenStore(tmp_path, diagnostic=said.append)
    await store.put_token(record())
    os.chmod(store.path, 0o644)
    store.forget_cache()
    assert store.token(("user", "r", "https://rs.example/mcp", "")) is not None
    assert mode(store.path) == 0o600
    assert said and "0644" in said[0] and "AT-0" not in said[0]


async def test_reads_are_cached_until_the_file_changes(tmp_path, monkeypatch):
    store = TokenStore(tmp_path)
    await store.put_token(record(1))
    reads = []
    original = Path.read_bytes

    def counting(self):
        reads.append(self)
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", counting)
    key = ("user", "r", "https://rs.example/mcp", "")
    for _ in range(50):
        assert store.token(key).access_token == "AT-1"
    assert len(reads) <= 1
    other = TokenStore(tmp_path)  # another process, as far as the file is concerned
    await other.put_token(record(2))
    assert store.token(key).access_token == "AT-2"


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ({"r": {"access_token": "OLD"}}, "keyed by server name or origin"),
        ({"servers": {"r": {"access_token": "OLD"}}}, "keyed by server name or origin"),
        ({"https://rs.example": {"access_token": "OLD"}}, "keyed by server name or origin"),
        ({"version": 1, "tokens": [{"server": "r", "accessToken": "OLD"}]}, "not bound to a config scope"),
        (
            {
                "version": 1,
                "tokens": [
                    {
                        "server": "r",
                        "origin": "https://rs.example",
                        "configScope": "user",
                        "resource": "https://rs.example",
                        "accessToken": "OLD",
                    }
                ],
            },
            "not bound",
        ),
        (  # bound to scope, server and exact URL, but to no home: another home may have made it
            {
                "version": 1,
                "tokens": [
                    {
                        "server": "r",
                        "configScope": "user",
                        "resource": "https://rs.example/mcp",
                        "issuer": "https://as.example",
                        "clientId": "c",
                        "accessToken": "OLD",
                    }
                ],
            },
            "not bound to a kxen home",
        ),
    ],
)
async def test_older_shapes_are_never_used(tmp_path, doc, why):
    store = TokenStore(tmp_path)
    store.path.write_text(json.dumps(doc))
    os.chmod(store.path, 0o600)
    key = ("user", "r", "https://rs.example/mcp", "")
    assert store.token(key) is None
    reason = store.older_shape("r", key[2], "https://rs.example")
    assert reason is not None and why in reason and "OLD" not in reason
    assert store.older_shape("other", "https://o.example/mcp", "https://o.example") is None
    # a new sign-in writes the current shape and keeps the old data aside, still never used
    await store.put_token(record())
    assert store.token(key).access_token == "AT-0"


async def test_an_unknown_version_is_refused_and_not_overwritten(tmp_path):
    store = TokenStore(tmp_path)
    store.path.write_text(json.dumps({"version": 99, "tokens": []}))
    os.chmod(store.path, 0o600)
    with pytest.raises(StoreError, match="version 99"):
        store.token(("user", "r", "https://rs.example/mcp"))
    with pytest.raises(StoreError):
        await store.put_token(record())
    assert json.loads(store.path.read_text())["version"] == 99


async def test_a_corrupt_file_is_refused_naming_it(tmp_path):
    store = TokenStore(tmp_path)
    store.path.write_text("{not json")
    os.chmod(store.path, 0o600)
    with pytest.raises(StoreError, match=str(store.path)):
        store.token(("user", "r", "x"))


WRITER = textwrap.dedent(
    """
    import sys, anyio, time
    from kxen_oauth.store import TokenStore
    from kxen_oauth._records import TokenRecord

    async def main():
        store = TokenStore(sys.argv[1])
        n = 0
        while True:  # ended by SIGKILL (the test bounds it in time)
            n += 1
            await store.put_token(TokenRecord(
                config_scope="user", server=f"s{n % 7}", resource="https://rs.example/mcp", issuer="https://as.example",
                client_id="c", access_token="A" * 4000 + str(n), refresh_token="R" * 4000,
                expires_at=time.time() + 60, home="",
            ))
            if n == 1:
                print("ready", flush=True)  # one whole file is on disk

    anyio.run(main)
    """
)


def test_a_sigkill_in_the_middle_of_writes_leaves_an_intact_0600_file(tmp_path):
    rng = random.Random(1313)
    for _ in range(5):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE)
        try:
            assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
            time.sleep(rng.uniform(0.05, 0.4))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()
        path = tmp_path / "mcp-oauth.json"
        doc = json.loads(path.read_text())  # parses: never half a file
        assert doc["version"] == 1 and all(t["refreshToken"] == "R" * 4000 for t in doc["tokens"])
        assert mode(path) == 0o600
    for leftover in tmp_path.glob(".mcp-oauth.*.tmp"):
        assert mode(leftover) == 0o600  # a temp file a kill left behind is private too
    # the next write (under the store's lock: nobody else writes) removes what the kills left
    (tmp_path / ".mcp-oauth.planted.tmp").write_bytes(b"left by a killed write")
    store = TokenStore(tmp_path)
    anyio.run(store.drop_tokens, "user", "s1", "")
    assert not list(tmp_path.glob(".mcp-oauth.*.tmp"))
    assert json.loads((tmp_path / "mcp-oauth.json").read_text())["version"] == 1


@pytest.mark.parametrize("dir_mode", [0o777, 0o770, 0o722, 0o1777], ids=lambda m: f"{m:04o}")
async def test_a_store_directory_others_can_write_is_refused(tmp_path, dir_mode):
    """Whoever can write the directory can swap the store file for one of theirs (or plant a
    symlink): it is neither read nor written, and the error names it, its mode and the fix."""
    store = TokenStore(tmp_path / "data")
    await store.put_token(record())
    os.chmod(store.dir, dir_mode)
    store.forget_cache()
    before = store.path.read_bytes()
    try:
        with pytest.raises(StoreError) as caught:
            store.token(("user", "r", "https://rs.example/mcp", ""))
        text = str(caught.value)
        assert str(store.dir) in text and f"{dir_mode:04o}" in text and "chmod 700" in text, text
        assert "AT-0" not in text
        with pytest.raises(StoreError):
            await store.put_token(record(1))
        with pytest.raises(StoreError):
            store.refresh_lock(("user", "r", "https://rs.example/mcp", ""))
        assert store.path.read_bytes() == before  # nothing written there
    finally:
        os.chmod(store.dir, 0o700)
    store.forget_cache()
    assert store.token(("user", "r", "https://rs.example/mcp", "")).access_token == "AT-0"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to give a directory away")
async def test_a_store_directory_another_user_owns_is_refused(tmp_path):
    store = TokenStore(tmp_path / "data")
    await store.put_token(record())
    os.chown(store.dir, 65534, -1)  # nobody's
    store.forget_cache()
    try:
        with pytest.raises(StoreError) as caught:
            store.token(("user", "r", "https://rs.example/mcp", ""))
        assert str(store.dir) in str(caught.value) and "owned by another user" in str(caught.value)
        with pytest.raises(StoreError):
            await store.put_token(record(1))
    finally:
        os.chown(store.dir, os.getuid(), -1)

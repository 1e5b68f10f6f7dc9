"""Each stdio server's stderr on disk: <home>/logs/<server>.stderr.log, private, rotated, bounded."""

from __future__ import annotations

import os
import sys

import anyio
import pytest
from kxen_testing import running
from kxen_transport_stdio import stderr_log
from kxen_transport_stdio.stderr_log import StderrLog

pytestmark = pytest.mark.anyio

SAY = "import sys, time; sys.stderr.write('warming up\\n'); sys.stderr.flush(); sys.exit(4)"
FLOOD = "import sys; [sys.stderr.write('e' * 1023 + '\\n') for _ in range(3000)]; sys.stderr.flush(); sys.exit(5)"


async def test_a_servers_stderr_is_kept_in_its_log(kxen_home, workspace):
    async with running(
        kxen_home, workspace, servers={"s": {"command": sys.executable, "args": ["-c", SAY]}}, allow=("stdio",)
    ) as rt:
        assert rt.servers["s"].state == "failed"
    log = kxen_home.path / "logs" / "s.stderr.log"
    text = log.read_text()
    assert text.startswith("--- ") and " started pid " in text and text.endswith("warming up\n")
    assert os.stat(log).st_mode & 0o777 == 0o600 and os.stat(log.parent).st_mode & 0o777 == 0o700


async def test_a_flood_is_rotated_and_bounded(kxen_home, workspace, monkeypatch):
    monkeypatch.setattr(stderr_log, "MAX_BYTES", 256 * 1024)
    async with running(
        kxen_home, workspace, servers={"f": {"command": sys.executable, "args": ["-c", FLOOD]}}, allow=("stdio",)
    ) as rt:
        with anyio.fail_after(20):
            while not rt.servers["f"].done.is_set():
                await anyio.sleep(0.05)
    log = kxen_home.path / "logs" / "f.stderr.log"
    older = log.with_name(log.name + ".1")
    assert older.exists() and log.stat().st_size <= 256 * 1024 and older.stat().st_size <= 256 * 1024


def test_a_symlinked_log_is_not_followed_and_the_log_gives_up_once(tmp_path):
    (tmp_path / "logs").mkdir(mode=0o700)
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (tmp_path / "logs" / "s.stderr.log").symlink_to(target)
    notes: list[str] = []
    log = StderrLog(tmp_path, "s", notes.append)
    log.start(1, "x")
    log.write(b"secret-ish output\n")
    log.write(b"more\n")
    assert target.read_text() == "keep" and len(notes) == 1 and "given up" in notes[0]

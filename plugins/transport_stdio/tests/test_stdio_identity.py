"""A server's start time (with its pid, the identity its tree and the ledger keep) is read after the
spawn, not during it: reading ``/proc/<pid>/stat`` while the child is still in ``exec`` waits for
the exec, and that wait would hold the event loop. It is read once the child first writes to
stdout, or ``IDENTIFY_AFTER_SECONDS`` after the spawn, or when a stop or the child's own exit needs
it -- whichever comes first, and always before the child is reaped."""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import pytest
from kxen_transport_stdio import procs
from kxen_transport_stdio import transport as stdio
from kxen_transport_stdio.transport import StdioTransport
from stdio_support import HELPER_ARGV, context

from kxen_core import ServerConfig
from kxen_core.errors import ClosedError
from kxen_core.protocol.session import Session

pytestmark = pytest.mark.anyio

LIMIT = 20


@pytest.fixture
def ledger(tmp_path):
    opened = procs.open_ledger(tmp_path)
    assert opened is not None
    try:
        yield opened
    finally:
        procs.close_ledger()


class Reads:
    """Every start-time read the transport makes: the pid, what it found, and whether the child
    (``proc``, once the test names it) had been reaped by then."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.proc: Any = None

    def pids(self) -> list[int]:
        return [c["pid"] for c in self.calls]


@pytest.fixture
def reads(monkeypatch) -> Reads:
    watch = Reads()
    real = stdio.stat

    def recording(pid: int) -> Any:
        found = real(pid)
        watch.calls.append(
            {"pid": pid, "found": found, "reaped": watch.proc is not None and watch.proc.returncode is not None}
        )
        return found

    monkeypatch.setattr(stdio, "stat", recording)
    return watch


def _recorded(ledger: procs.Ledger) -> dict[int, int]:
    if not ledger.path.exists():
        return {}
    return {s["pid"]: s["start"] for s in json.loads(ledger.path.read_text())["servers"]}


async def test_the_start_time_is_read_once_the_child_first_writes(tmp_path, ledger, reads: Reads, monkeypatch):
    monkeypatch.setattr(stdio, "IDENTIFY_AFTER_SECONDS", 3600.0)  # only the first read can have done it
    server = ServerConfig(name="s", command=sys.executable, args=HELPER_ARGV)
    t = StdioTransport(server, context(server, tmp_path))
    with anyio.fail_after(LIMIT):
        async with t as stream:
            reads.proc = t._proc
            pid = t.pid
            assert reads.calls == []  # entering did not read it
            assert pid not in _recorded(ledger)
            async with Session(stream, server="s", request_timeout=10) as session:
                await session.initialize()
                await anyio.sleep(0)  # (on asyncio it runs right after the step the first answer woke)
                now = procs.stat(pid)
                assert now is not None and _recorded(ledger)[pid] == now.start
                assert t._tree is not None and t._tree.root_start == now.start
        assert pid not in _recorded(ledger)  # stopped: forgotten
    assert reads.pids() == [pid]  # read once
    assert reads.calls[0]["found"] is not None and not reads.calls[0]["reaped"]


async def test_a_stop_before_the_delay_reads_it_before_reaping(tmp_path, ledger, reads: Reads, monkeypatch):
    monkeypatch.setattr(stdio, "IDENTIFY_AFTER_SECONDS", 3600.0)
    server = ServerConfig(name="s", command=sys.executable, args=HELPER_ARGV)
    t = StdioTransport(server, context(server, tmp_path))
    with anyio.fail_after(LIMIT):
        async with t:
            reads.proc = t._proc
            pid = t.pid
            assert reads.calls == []
    assert reads.pids() == [pid]
    assert reads.calls[0]["found"] is not None and not reads.calls[0]["reaped"]
    assert t._tree is not None and t._tree.root_start == reads.calls[0]["found"].start


async def test_a_child_that_exits_by_itself_is_identified_before_it_is_reaped(
    tmp_path, ledger, reads: Reads, monkeypatch
):
    monkeypatch.setattr(stdio, "IDENTIFY_AFTER_SECONDS", 3600.0)
    server = ServerConfig(name="s", command=sys.executable, args=HELPER_ARGV)
    t = StdioTransport(server, context(server, tmp_path))
    with anyio.fail_after(LIMIT):
        async with t as stream:
            reads.proc = t._proc
            assert t._reader is not None
            t._reader.after_first_read = None  # as if its first output had not been taken yet: settle must read it
            async with Session(stream, server="s", request_timeout=10) as session:
                await session.initialize()
                assert reads.calls == []
                with pytest.raises(ClosedError):
                    await session.request("tools/call", {"name": "die", "arguments": {"code": 3}})
            await t.settle()
            assert t._proc is not None and t._proc.returncode == 3
    assert len(reads.calls) == 1 and reads.calls[0]["found"] is not None
    assert not reads.calls[0]["reaped"]  # read while the child was a zombie at most, never after the reap


async def test_a_child_that_says_nothing_is_identified_after_the_delay(tmp_path, ledger, reads: Reads):
    """No stdout at all (a server still loading, or a silent one): the delay reads it."""
    server = ServerConfig(name="s", command=sys.executable, args=["-c", "import sys; sys.stdin.read()"])
    t = StdioTransport(server, context(server, tmp_path))
    with anyio.fail_after(LIMIT):
        async with t:
            reads.proc = t._proc
            pid = t.pid
            while pid not in _recorded(ledger):  # bounded by fail_after
                await anyio.sleep(0.01)
            assert t._reader is not None and t._reader.after_first_read is not None  # nothing was read
            now = procs.stat(pid)
            assert now is not None and _recorded(ledger)[pid] == now.start
    assert reads.pids() == [pid] and not reads.calls[0]["reaped"]

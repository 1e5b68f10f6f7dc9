"""Lifecycle: timeouts and cancellation on the wire, a dying server, process-group shutdown."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import anyio
import attrs
import pytest
from kxen_testing import running
from kxen_transport_stdio import StdioTransport
from kxen_transport_stdio.transport import EOF_GRACE_SECONDS, TERM_GRACE_SECONDS
from stdio_support import DEMO, HELPER_ARGV, STDIO, Timer, alive, context, helper, server_pid, wait_gone, wait_state

from kxen_core.config import ServerConfig
from kxen_core.errors import ClosedError, ConnectError, RequestTimeout
from kxen_core.protocol.session import Session
from kxen_core.transport import TransportContext

pytestmark = pytest.mark.anyio


def _demo(log: Path, request_seconds: float = 0.5) -> dict:
    return {
        "command": sys.executable,
        "args": [str(DEMO), "--log", str(log)],
        "defaultToolPolicy": "allow",
        "timeouts": {"requestSeconds": request_seconds},
    }


def _logged(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


async def _wait_logged(log: Path, predicate) -> dict:
    while True:
        for message in _logged(log):
            if predicate(message):
                return message
        await anyio.sleep(0.01)


async def test_hanging_call_times_out_and_is_cancelled_on_the_wire(kxen_home, workspace, tmp_path):
    log = tmp_path / "received.jsonl"
    async with running(kxen_home, workspace, servers={"demo": _demo(log)}, allow=STDIO) as rt:
        with Timer() as t, pytest.raises(RequestTimeout):
            with anyio.fail_after(5):
                await rt.call_tool("demo__slow", {"seconds": 30})
        assert 0.45 <= t.seconds < 2.0
        with anyio.fail_after(5):
            call = await _wait_logged(log, lambda m: m.get("method") == "tools/call")
            cancel = await _wait_logged(log, lambda m: m.get("method") == "notifications/cancelled")
        assert cancel["params"]["requestId"] == call["id"]
        assert "id" not in cancel and cancel["params"].get("reason")
        # the session is still usable after a timeout
        with anyio.fail_after(5):
            result = await rt.call_tool("demo__echo", {"text": "after"})
        assert result["content"][0]["text"] == "after"
    assert rt.close_seconds < 1.5


async def test_caller_cancellation_is_sent_on_the_wire(kxen_home, workspace, tmp_path):
    log = tmp_path / "received.jsonl"
    async with running(kxen_home, workspace, servers={"demo": _demo(log, request_seconds=30)}, allow=STDIO) as rt:
        with anyio.move_on_after(0.3) as scope:
            await rt.call_tool("demo__slow", {"seconds": 30})
        assert scope.cancelled_caught
        with anyio.fail_after(5):
            call = await _wait_logged(log, lambda m: m.get("method") == "tools/call")
            cancel = await _wait_logged(log, lambda m: m.get("method") == "notifications/cancelled")
        assert cancel["params"]["requestId"] == call["id"]


async def test_server_dying_mid_call_fails_the_call_at_once(kxen_home, workspace):
    entry = helper(timeouts={"requestSeconds": 30})
    async with running(kxen_home, workspace, servers={"h": entry}, allow=STDIO) as rt:
        pid = server_pid(rt, "h")
        with Timer() as t, pytest.raises(ClosedError) as info:
            with anyio.fail_after(5):
                await rt.call_tool("die", {"code": 9, "message": "oom"}, server="h")
        assert t.seconds < 1.5, t.seconds
        assert "code 9" in str(info.value) and "oom" in str(info.value)
        st = rt.servers["h"]
        with anyio.fail_after(5):
            await wait_state(st, "failed")
        assert st.phase == "transport"
        assert not alive(pid)


async def test_stop_server_fails_a_pending_call_and_cancels_it(kxen_home, workspace, tmp_path):
    log = tmp_path / "received.jsonl"
    async with running(kxen_home, workspace, servers={"demo": _demo(log, request_seconds=30)}, allow=STDIO) as rt:
        pid = server_pid(rt, "demo")
        failure: list[BaseException] = []

        async def call() -> None:
            try:
                await rt.call_tool("demo__slow", {"seconds": 30})
            except ClosedError as exc:
                failure.append(exc)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await _wait_logged(log, lambda m: m.get("method") == "tools/call")
                with Timer() as t:
                    await rt.stop_server("demo")
        assert failure and t.seconds < 1.5
        assert rt.servers["demo"].state == "stopped"
        assert not alive(pid)
        assert any(m.get("method") == "notifications/cancelled" for m in _logged(log))


async def test_grandchildren_do_not_survive_close(kxen_home, workspace):
    async with running(kxen_home, workspace, servers={"h": helper()}, allow=STDIO) as rt:
        pids = [server_pid(rt, "h")]
        with anyio.fail_after(10):
            result = await rt.call_tool("spawn", server="h")
        pids += result["structuredContent"]["pids"]
        assert len(pids) == 4 and all(alive(p) for p in pids)
    assert await wait_gone(pids, 2.0) == []
    assert rt.close_seconds < 1.5, rt.close_seconds


async def test_sigterm_ignoring_group_is_killed(kxen_home, workspace):
    # SIG_IGN is inherited: the sh and sleep grandchildren ignore SIGTERM too
    entry = helper("--ignore-term", "--ignore-eof")
    async with running(kxen_home, workspace, servers={"h": entry}, allow=STDIO) as rt:
        pids = [server_pid(rt, "h")]
        with anyio.fail_after(10):
            result = await rt.call_tool("spawn", server="h")
        pids += result["structuredContent"]["pids"]
    assert await wait_gone(pids, 0.5) == []
    assert EOF_GRACE_SECONDS + TERM_GRACE_SECONDS - 0.05 <= rt.close_seconds < 2.5, rt.close_seconds


async def test_eof_ignoring_server_gets_sigterm(kxen_home, workspace):
    async with running(kxen_home, workspace, servers={"h": helper("--ignore-eof")}, allow=STDIO) as rt:
        pid = server_pid(rt, "h")
    assert not alive(pid)
    assert rt.close_seconds < 0.8, rt.close_seconds


async def test_crashed_server_leaves_no_grandchildren(kxen_home, workspace):
    async with running(kxen_home, workspace, servers={"h": helper()}, allow=STDIO) as rt:
        with anyio.fail_after(10):
            result = await rt.call_tool("spawn", server="h")
            pids = result["structuredContent"]["pids"]
            with pytest.raises(ClosedError):
                await rt.call_tool("die", server="h")
            await wait_state(rt.servers["h"], "failed")
        # the group is stopped when the server fails, not only when the runtime closes
        assert await wait_gone(pids, 2.0) == []


async def test_close_while_connecting_is_bounded(kxen_home, workspace):
    # a server that never answers initialize: close the runtime before it settles
    kxen_home.write_servers({"h": {"command": "sleep", "args": ["1000"], "defaultToolPolicy": "allow"}})
    from kxen_core.runtime.workspace import Runtime

    async with Runtime(workspace=workspace) as rt:
        with anyio.fail_after(5):
            while rt.servers["h"].session is None:
                await anyio.sleep(0.01)
        pid = server_pid(rt, "h")
        assert rt.servers["h"].state == "initializing"
        start = time.monotonic()
    assert time.monotonic() - start < 1.5
    assert not alive(pid)


async def test_deaf_server_close_is_bounded(tmp_path):
    """A server that stops reading stdin: a blocked write must not block the close."""
    server = ServerConfig(name="s", command=sys.executable, args=[*HELPER_ARGV, "--deaf"])
    with anyio.fail_after(10):
        async with StdioTransport(server, context(server, tmp_path)) as stream:
            pid = stream.describe()["pid"]
            async with Session(stream, server="s", request_timeout=5) as s:
                await s.initialize()
                with anyio.move_on_after(0.3):
                    await s.request("tools/call", {"name": "echo", "arguments": {"text": "x" * (4 << 20)}})
            start = time.monotonic()
        assert time.monotonic() - start < 2.5
    assert not alive(pid)


async def test_request_timeout_covers_a_blocked_send(tmp_path):
    """A server that stops reading stdin: the request timeout must bound the blocked write too."""
    server = ServerConfig(name="s", command=sys.executable, args=[*HELPER_ARGV, "--deaf"])
    async with StdioTransport(server, context(server, tmp_path)) as stream:
        async with Session(stream, server="s", request_timeout=5) as s:
            with anyio.fail_after(10):
                await s.initialize()
            with anyio.fail_after(3), pytest.raises(RequestTimeout):
                await s.request("tools/call", {"name": "echo", "arguments": {"text": "x" * (4 << 20)}}, timeout=0.5)


def _open_fds() -> set[int]:
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


async def test_no_descriptor_outlives_the_transport(tmp_path):
    """Our stdin pipe: the child's end is closed in the parent at once, ours on close."""
    server = ServerConfig(name="s", command=sys.executable, args=HELPER_ARGV)
    before = _open_fds()
    with anyio.fail_after(10):
        async with StdioTransport(server, context(server, tmp_path)) as stream:
            async with Session(stream, server="s", request_timeout=5) as s:
                await s.initialize()
    assert _open_fds() - before == set()
    # a launch that cannot start leaks nothing either
    launch = context(server, tmp_path).launch
    broken = TransportContext(workspace=tmp_path, launch=attrs.evolve(launch, command=str(tmp_path / "missing")))
    with pytest.raises(ConnectError):
        async with StdioTransport(server, broken):
            pass
    assert _open_fds() - before == set()


async def test_writing_to_a_server_that_closed_its_stdin_is_a_closed_error(tmp_path):
    server = ServerConfig(name="s", command="sh", args=["-c", "exec 0<&-; echo 'stdin closed' >&2; exit 3"])
    with anyio.fail_after(10):
        async with StdioTransport(server, context(server, tmp_path)) as stream:
            with pytest.raises(ClosedError):  # stdout ends: the child is gone
                await stream.receive()
            assert not stream.send_nowait({"jsonrpc": "2.0", "method": "x"})  # EPIPE: nothing queued
            with pytest.raises(ClosedError, match="exited with code 3; stderr: stdin closed"):
                await stream.send({"jsonrpc": "2.0", "method": "x"})

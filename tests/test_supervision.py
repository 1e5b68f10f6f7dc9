"""Servers that come back: a stdio server that dies stays failed (exit code or signal, stderr) until
``Runtime.restart`` or ``reload()`` starts it again, with no process left behind and no call left
hanging; a remote server whose session expires answers the next call without the caller noticing;
a remote server that goes away and comes back within the backoff window is ready again by itself.
Against real peers: the demo stdio server and the official Python SDK server over HTTP and SSE."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from kxen_testing import running
from remote_support import REMOTE_PLUGINS, WAIT, remote, remote_on, status_of, text_of, until
from support import demo_entry

from kxen_core import Runtime
from kxen_core.errors import ClosedError, ConnectError, HTTPStatusError, RemoteError, ServerNotReady, SessionExpired
from kxen_core.plugins.manager import make_plugin_manager
from kxen_core.runtime.reconnect import Backoff, passing

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[1]
SDK_SERVER = ROOT / "tests" / "peers" / "sdk_server.py"


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pid_of(rt, name: str) -> int:
    info = status_of(rt, name)["transportInfo"]
    assert info and isinstance(info.get("pid"), int), info
    return info["pid"]


# --- local: failed until restarted ------------------------------------------------------------


async def test_a_killed_stdio_server_stays_failed_until_restart(kxen_home, ws):
    async with running(
        kxen_home, ws, servers={"d": {**demo_entry(), "defaultToolPolicy": "allow"}}, allow=("stdio",)
    ) as rt:
        first = pid_of(rt, "d")
        os.kill(first, signal.SIGKILL)
        await until(lambda: status_of(rt, "d")["state"] == "failed", WAIT)
        row = status_of(rt, "d")
        assert row["phase"] == "transport" and "killed by signal SIGKILL" in row["error"]
        await anyio.sleep(1.5)
        assert status_of(rt, "d")["state"] == "failed"  # a local server is not restarted by itself
        with pytest.raises(ServerNotReady, match="killed by signal"):
            await rt.call_tool("d__echo", {"text": "x"})
        await rt.restart("d")
        with anyio.fail_after(WAIT):
            await rt.wait_ready()
            await until(lambda: status_of(rt, "d")["state"] == "ready", WAIT)
            second = pid_of(rt, "d")
            result = await rt.call_tool("d__echo", {"text": "back"})
        assert second != first and not alive(first)
        assert text_of(result) == "back"


async def test_stopping_a_ready_server_ends_its_connection_as_a_close_without_a_cancel(kxen_home, ws):
    # a ready server's run waits for its session to close: stop closes it and the run ends the
    # connection by itself (the process ended, the state stopped); one still starting is cancelled
    servers = {"d": {**demo_entry(), "defaultToolPolicy": "allow"}, "late": {"command": sys.executable}}
    servers["late"]["args"] = ["-c", "import time; time.sleep(60)"]
    kxen_home.write_servers(servers)
    async with Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"])) as rt:
        await until(lambda: status_of(rt, "d")["state"] == "ready", WAIT)
        await until(lambda: status_of(rt, "late")["state"] == "initializing", WAIT)
        pids = pid_of(rt, "d"), pid_of(rt, "late")
        ready, late = rt.servers["d"], rt.servers["late"]
        with anyio.fail_after(WAIT):
            await rt.stop_server("d")
            await rt.stop_server("late")
        assert ready.done.is_set() and not ready._scope.cancel_called
        assert late.done.is_set() and late._scope.cancel_called  # no answer yet: cancelled
        assert [status_of(rt, n)["state"] for n in ("d", "late")] == ["stopped", "stopped"]
        assert not any(map(alive, pids))


async def test_a_call_in_flight_fails_at_once_with_the_reason_when_its_server_restarts(kxen_home, ws):
    async with running(
        kxen_home, ws, servers={"d": {**demo_entry(), "defaultToolPolicy": "allow"}}, allow=("stdio",)
    ) as rt:
        first = pid_of(rt, "d")
        outcome: list[BaseException] = []

        async def slow_call() -> None:
            try:
                await rt.call_tool("d__slow", {"seconds": 60})
            except ClosedError as exc:
                outcome.append(exc)

        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(slow_call)
                await anyio.sleep(0.3)
                await rt.restart("d")
            await until(lambda: status_of(rt, "d")["state"] == "ready", WAIT)
        assert len(outcome) == 1 and "restarting" in str(outcome[0])
        assert not alive(first) and pid_of(rt, "d") != first


async def test_reload_starts_a_failed_server_again_and_keeps_the_ready_ones(kxen_home, ws):
    servers = {"d": {**demo_entry(), "defaultToolPolicy": "allow"}, "e": {**demo_entry(), "defaultToolPolicy": "allow"}}
    async with running(kxen_home, ws, servers=servers, allow=("stdio",)) as rt:
        keep = pid_of(rt, "e")
        os.kill(pid_of(rt, "d"), signal.SIGKILL)
        await until(lambda: status_of(rt, "d")["state"] == "failed", WAIT)
        await rt.reload()
        await until(lambda: status_of(rt, "d")["state"] == "ready", WAIT)
        assert pid_of(rt, "e") == keep  # unchanged and ready: not restarted


# --- remote: an expired session is renewed under the call ---------------------------------------


async def test_an_expired_session_is_renewed_and_the_call_sent_again(kxen_home, ws, sdk_peer):
    url = sdk_peer("idle")  # the SDK server forgets a session after 1 s without requests
    kxen_home.write_settings(remote_on(url))
    # no GET stream: an open GET stream would keep the session from idling out; sessions are of the
    # handshake era (the stateless era has none to expire)
    kxen_home.write_servers({"r": remote(url, options={"getStream": False}, protocolEra="legacy")})
    async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
        with anyio.fail_after(WAIT):
            assert text_of(await rt.call_tool("r__echo", {"text": "one"})) == "one"
            await anyio.sleep(2.5)
            assert text_of(await rt.call_tool("r__echo", {"text": "two"})) == "two"  # no error for the caller
        row = status_of(rt, "r")
        assert row["state"] == "ready"
        assert any("reconnecting" in d and "session expired" in d for d in row["diagnostics"]), row["diagnostics"]


# --- remote: gone and back within the backoff window --------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_sdk(mode: str, port: int, log: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, str(SDK_SERVER), mode, str(port)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    pytest.fail(f"the SDK server did not listen: {log.read_text()[-2000:]}")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@pytest.mark.peer
@pytest.mark.parametrize("mode, kind, path", [("sse", "sse", "sse"), ("stateful", "http", "mcp")])
async def test_a_remote_server_that_comes_back_is_ready_again_by_itself(kxen_home, ws, tmp_path, mode, kind, path):
    pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK (a dev dependency) is not installed")
    port = _free_port()
    log = tmp_path / "sdk.log"
    proc = _start_sdk(mode, port, log)
    try:
        kxen_home.write_settings(remote_on(f"http://127.0.0.1:{port}/{path}"))
        kxen_home.write_servers({"r": remote(f"http://127.0.0.1:{port}/{path}", kind)})
        async with running(kxen_home, ws, allow=REMOTE_PLUGINS) as rt:
            assert status_of(rt, "r")["state"] == "ready"
            _stop(proc)
            if kind == "sse":  # the SSE stream is the session: its end is seen at once
                await until(lambda: "connecting again" in (status_of(rt, "r")["error"] or ""), WAIT)
            proc = await anyio.to_thread.run_sync(_start_sdk, mode, port, log)
            with anyio.fail_after(WAIT):
                if kind == "sse":
                    await until(lambda: status_of(rt, "r")["state"] == "ready", WAIT)
                # Streamable HTTP (the stateless era): the listen stream's reopen may have found the
                # server gone, and the call then finds it connecting again by itself (bounded by WAIT)
                while True:
                    try:
                        answer = await rt.call_tool("r__echo", {"text": "again"})
                        break
                    except ServerNotReady:
                        row = status_of(rt, "r")  # on its way back, not failed for good
                        assert row["state"] != "failed" or "connecting again" in row["error"]
                        await anyio.sleep(0.1)
                assert text_of(answer) == "again"
            assert status_of(rt, "r")["state"] == "ready"
    finally:
        _stop(proc)


# --- the backoff itself ---------------------------------------------------------------------------


def test_the_backoff_retries_what_may_pass_with_bounded_growing_waits():
    backoff = Backoff()
    refused = ConnectError("connection refused")
    assert [backoff.next(refused, False) for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 16.0, None]
    assert "gave up after 5 attempts" in backoff.gave_up("connection refused")
    assert backoff.next(refused, True) == 1.0  # ready again in between: a new budget
    fresh = Backoff()
    assert fresh.next(SessionExpired("session expired"), True) == 0.0  # only the session is gone: at once
    assert (
        passing("connection closed")
        and passing(ClosedError("x"))
        and passing(HTTPStatusError("bad gateway", status=502))
    )
    assert not passing(HTTPStatusError("unauthorized", status=401)) and not passing(RemoteError(-32603, "no"))
    assert not passing(None) and Backoff().next(RemoteError(-32603, "no"), False) is None

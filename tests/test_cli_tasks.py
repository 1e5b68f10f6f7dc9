"""``kxen mcp tasks`` and a task's status line in ``kxen mcp call``, against the stdio task peer
(tests/peers/task_peer.py), whose tasks outlive each ``kxen`` process in its state file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from kxen_testing import running

pytestmark = pytest.mark.peer

PEER = str(Path(__file__).parent / "peers" / "task_peer.py")
WAIT = 60


@pytest.fixture
def stdio_kx(kx, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory,stdio")
    return kx


def serve(kxen_home, mode: str, state: Path) -> dict[str, object]:
    servers = {
        "tp": {"command": sys.executable, "args": [PEER, mode, "--state", str(state)], "defaultToolPolicy": "allow"}
    }
    kxen_home.write_servers(servers)
    return servers


def test_tasks_lists_a_task_of_an_earlier_run_and_cancels_it(stdio_kx, kxen_home, tmp_path):
    state = tmp_path / "state.json"
    servers = serve(kxen_home, "never", state)

    async def start() -> dict[str, object]:
        async with running(kxen_home, tmp_path, servers=servers, allow=("stdio",), wait=WAIT) as rt:
            return await rt.call_tool("tp__slow", {"text": "x"}, wait=False)

    handle = anyio.run(start)
    code, out, err = stdio_kx("mcp", "tasks", "tp", "--json")
    assert code == 0, err
    listed = json.loads(out)
    [row] = listed["tasks"]
    assert listed["problems"] == []
    assert row["taskId"] == handle["taskId"] and row["status"] == "working" and row["known"] is False
    code, out, err = stdio_kx("mcp", "tasks", "tp", "--cancel", handle["taskId"], "--json")
    assert code == 0, err
    assert json.loads(out)["cancelled"]["status"] == "cancelled"
    code, out, err = stdio_kx("mcp", "tasks", "tp")
    assert code == 0 and handle["taskId"] in out and "cancelled" in out, (out, err)


def test_cancel_needs_a_server_and_names_an_unknown_task(stdio_kx, kxen_home, tmp_path):
    serve(kxen_home, "never", tmp_path / "state.json")
    code, _out, err = stdio_kx("mcp", "tasks", "--cancel", "abc")
    assert code == 2 and "needs the SERVER" in err
    code, out, err = stdio_kx("mcp", "tasks", "tp", "--cancel", "abc", "--json")
    assert code == 1 and "task not found: abc" in json.loads(out)["error"], (out, err)


def test_call_shows_the_task_status_on_a_terminal(stdio_kx, kxen_home, tmp_path, monkeypatch):
    from kxen_core.cli import contents

    monkeypatch.setattr(contents, "_on_terminal", lambda: True)
    serve(kxen_home, "finishes", tmp_path / "state.json")
    code, out, err = stdio_kx("mcp", "call", "tp", "slow", "--args", '{"text": "hi", "seconds": 1}')
    assert code == 0, err
    assert "done: hi" in out
    assert "task working: " in err and "s to go" in err, err

"""The pause-free handshake (kxen_core.protocol.handshake) against real stdio processes: what each server
receives on connecting is the plain sequence -- each message once, in order -- and every catalog
is listed whole from the pages sent ahead.

The twins of tests/session/test_handshake.py, which check the timing against a scripted peer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from kxen_testing import running
from support import DEMO

pytestmark = pytest.mark.anyio

CONTENTS = Path(__file__).parent / "hostile" / "contents_server.py"


def received(log: Path) -> list[str]:
    return [json.loads(line).get("method", "") for line in log.read_text().splitlines()]


async def test_a_server_with_every_catalog_receives_each_first_page_request_once(kxen_home, tmp_path):
    log = tmp_path / "received.jsonl"
    entry = {"command": sys.executable, "args": [str(CONTENTS), "--log", str(log)]}
    async with running(kxen_home, tmp_path, servers={"h": entry}, allow=("stdio",), wait=30) as rt:
        (status,) = rt.status()
        assert status["state"] == "ready", status
        assert status["era"] == "legacy"
        catalogs = rt.servers["h"].catalogs
        assert all(catalogs[k].complete for k in ("tools", "resources", "resourceTemplates", "prompts"))
        assert status["tools"] == len(catalogs["tools"].items) > 0
        assert status["resources"] == len(catalogs["resources"].items) > 0
        assert status["prompts"] == len(catalogs["prompts"].items) > 0
    assert received(log) == [
        "server/discover",
        "initialize",
        "notifications/initialized",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
    ]


async def test_a_tools_only_server_receives_no_other_list_request(kxen_home, tmp_path):
    log = tmp_path / "received.jsonl"
    entry = {"command": sys.executable, "args": [str(DEMO), "--log", str(log)]}
    async with running(kxen_home, tmp_path, servers={"demo": entry}, allow=("stdio",), wait=30) as rt:
        (status,) = rt.status()
        assert status["state"] == "ready" and status["tools"] > 0, status
        # the public refresh after the start is a request of its own, answered as before
        catalog = await rt.refresh("demo", "tools")
        assert catalog.complete and len(catalog.items) == status["tools"]
    methods = received(log)
    assert methods[:4] == ["server/discover", "initialize", "notifications/initialized", "tools/list"]
    assert methods.count("tools/list") == 2 and methods.count("notifications/initialized") == 1
    assert not {"resources/list", "prompts/list", "resources/templates/list"} & set(methods)


def _children() -> set[int]:
    """This process's child processes (Linux: every thread's ``children`` list)."""
    pids: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            pids.update(int(p) for p in (task / "children").read_text().split())
        except OSError:
            continue
    return pids


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")
async def test_entering_a_runtime_returns_with_its_local_servers_spawned(kxen_home, tmp_path):
    """The host gets control back only after the servers' tasks ran up to their spawn: the
    processes start while the host goes on (to ``wait_ready``, or anything else)."""
    from kxen_core import Runtime
    from kxen_core.plugins.manager import make_plugin_manager

    entries = {f"demo{i}": {"command": sys.executable, "args": [str(DEMO)]} for i in range(3)}
    kxen_home.write_servers(entries)
    before = _children()
    rt = Runtime(home=kxen_home.path, workspace=tmp_path, pm=make_plugin_manager(allow=("stdio",)))
    await rt.__aenter__()
    try:
        spawned = _children() - before
        assert len(spawned) == 3, spawned
        assert await rt.wait_ready(30)
        assert {s["state"] for s in rt.status()} == {"ready"}
    finally:
        await rt.__aexit__(None, None, None)

"""A server that floods the client with requests: past the few served at once, each costs O(1)
(no task, no queued reply), and closing the runtime stays quick."""

from __future__ import annotations

import asyncio
import sys
import tracemalloc
from pathlib import Path

import anyio
import pytest
from kxen_testing import running

pytestmark = pytest.mark.anyio

FLOOD = Path(__file__).parent / "hostile" / "flood_server.py"
COUNT = 100_000


@pytest.mark.parametrize(
    ("method", "trace"),
    [("ping", True), ("sampling/createMessage", False)],  # tracemalloc is slow: measure bytes once
)
async def test_a_request_flood_costs_bounded_memory_and_closes_fast(kxen_home, ws, method, trace):
    servers = {"flood": {"command": sys.executable, "args": [str(FLOOD), str(COUNT), method]}}
    if trace:
        tracemalloc.start()
    try:
        async with running(kxen_home, ws, servers=servers, allow=["stdio"]) as rt:
            server = rt.servers["flood"]
            assert server.state.value == "ready", rt.status()
            session = server.session
            assert session is not None
            baseline = tracemalloc.get_traced_memory()[0] if trace else 0
            if trace:
                tracemalloc.reset_peak()
            most_tasks = 0
            with anyio.fail_after(120):  # bounded: the flood is read in far less
                while session.refused_requests + session.dropped_requests < COUNT - 5_000:
                    most_tasks = max(most_tasks, len(asyncio.all_tasks()))
                    await anyio.sleep(0.02)
            if trace:
                growth = tracemalloc.get_traced_memory()[1] - baseline
                assert growth < 40 * 2**20, f"{growth / 2**20:.1f} MiB"  # a task per request: hundreds
            assert most_tasks < 200, most_tasks  # not a task per request
            assert session.dropped_requests > 0
            notes = [d for d in server.diagnostics if "dropped unanswered" in d]
            assert notes and len(notes) <= 20  # counted, not one diagnostic per request
    finally:
        if trace:
            tracemalloc.stop()
    assert rt.close_seconds < 3, rt.close_seconds

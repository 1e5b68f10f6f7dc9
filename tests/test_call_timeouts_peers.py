"""The timeout contract against a real peer: server-everything's long-running operation sends a
progress notification per step when asked, so a call longer than its timeout lives as long as the
steps keep coming (``resetOnProgress``), and ends at its timeout without them. The fake twins are
in tests/test_call_timeouts.py."""

from __future__ import annotations

import anyio
import pytest
from kxen_testing import running

from kxen_core.errors import RequestTimeout

pytestmark = [pytest.mark.anyio, pytest.mark.peer]

WAIT = 60
STDIO = ("stdio",)
LONG = "ev__trigger-long-running-operation"


def everything(everything_js: str, **timeouts: object) -> dict[str, object]:
    return {"command": "node", "args": [everything_js, "stdio"], "defaultToolPolicy": "allow", "timeouts": timeouts}


async def test_steps_keep_a_long_operation_alive(kxen_home, tmp_path, everything_js):
    # 3 s of work in 6 steps, each 0.5 s: three times the 1 s timeout, never 1 s without progress
    servers = {"ev": everything(everything_js, requestSeconds=1)}
    async with running(kxen_home, tmp_path, servers=servers, allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            result = await rt.call_tool(LONG, {"duration": 3, "steps": 6})
    assert not result.get("isError") and "completed" in result["content"][0]["text"].lower(), result


async def test_without_resets_the_same_operation_times_out(kxen_home, tmp_path, everything_js):
    servers = {"ev": everything(everything_js, requestSeconds=1, resetOnProgress=False)}
    async with running(kxen_home, tmp_path, servers=servers, allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT), pytest.raises(RequestTimeout, match="within 1 s"):
            await rt.call_tool(LONG, {"duration": 3, "steps": 6})
        # the server is still there for the next call
        with anyio.fail_after(WAIT):
            assert not (await rt.call_tool("ev__echo", {"message": "still here"})).get("isError")


async def test_the_total_ends_a_call_that_never_stops_progressing(kxen_home, tmp_path, everything_js):
    servers = {"ev": everything(everything_js, requestSeconds=1, maxTotalSeconds=2)}
    async with running(kxen_home, tmp_path, servers=servers, allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT), pytest.raises(RequestTimeout, match="2 s in all"):
            await rt.call_tool(LONG, {"duration": 5, "steps": 20})

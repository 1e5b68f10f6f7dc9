"""The timeout contract of a tool call (docs/config.md, "Timeouts"): ``requestSeconds``, per-tool
``toolSeconds``, ``resetOnProgress`` bounded by ``maxTotalSeconds``, each expiry cancelled on the
wire. The real-peer twin is tests/test_call_timeouts_peers.py (server-everything's long-running
operation)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from kxen_testing import FakeServer, mem, running, text_result

from kxen_core.errors import ConfigError, RequestTimeout
from kxen_core.protocol.clock import RequestClock
from kxen_core.protocol.waiters import AnyioWaiters, AsyncioWaiters

pytestmark = pytest.mark.anyio

WAIT = 20


def worker(beats: int, gap: float) -> FakeServer:
    """A fake whose tool ``work`` sends ``beats`` progress notifications ``gap`` seconds apart (when
    asked for progress), then answers; ``quiet`` works as long without saying anything."""
    fake = FakeServer(tools={"work": lambda a: text_result("unused"), "quiet": lambda a: text_result("unused")})

    async def call(params: dict[str, Any]) -> dict[str, Any]:
        token = (params.get("_meta") or {}).get("progressToken")
        for i in range(1, beats + 1):
            await anyio.sleep(gap)
            if token is not None and params["name"] == "work":
                await fake.notify("notifications/progress", {"progressToken": token, "progress": i, "total": beats})
        return text_result(f"{params['name']} done")

    fake.methods["tools/call"] = call
    return fake


def cancelled(fake: FakeServer) -> list[dict[str, Any]]:
    return [m["params"] for m in fake.received if m.get("method") == "notifications/cancelled"]


async def until(predicate: Any) -> None:
    with anyio.fail_after(WAIT):
        while not predicate():
            await anyio.sleep(0.02)


async def test_progress_keeps_a_call_alive_past_its_timeout(kxen_home, fakes, tmp_path):
    # 8 beats 0.25 s apart: 2 s of work, four times the 0.5 s timeout, never 0.5 s without progress
    fake = fakes.add("f", worker(8, 0.25))
    server = mem("f", defaultToolPolicy="allow", timeouts={"requestSeconds": 0.5})
    async with running(kxen_home, tmp_path, servers={"s": server}) as rt:
        with anyio.fail_after(WAIT):
            assert await rt.call_tool("s__work", {}) == text_result("work done")
            # the same work without progress: the timeout ends it, and it is cancelled on the wire
            with pytest.raises(RequestTimeout, match=r"tools/call: no reply from server 's' within 0.5 s"):
                await rt.call_tool("s__quiet", {})
        await until(lambda: len(cancelled(fake)) == 1)
    assert cancelled(fake)[0]["reason"] == "request timed out"


async def test_max_total_seconds_bounds_what_progress_extends(kxen_home, fakes, tmp_path):
    fake = fakes.add("f", worker(40, 0.1))  # 4 s of work, progress every 0.1 s
    budget = {"requestSeconds": 0.5, "maxTotalSeconds": 1}
    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow", timeouts=budget)}) as rt:
        started = anyio.current_time()
        with anyio.fail_after(WAIT), pytest.raises(RequestTimeout, match="within 1 s in all.*maxTotalSeconds"):
            await rt.call_tool("s__work", {})
        assert anyio.current_time() - started < 3  # ended by the total, not by the work
        await until(lambda: len(cancelled(fake)) == 1)


async def test_reset_on_progress_off_keeps_the_plain_timeout(kxen_home, fakes, tmp_path):
    fake = fakes.add("f", worker(8, 0.25))
    budget = {"requestSeconds": 0.5, "resetOnProgress": False}
    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow", timeouts=budget)}) as rt:
        with anyio.fail_after(WAIT), pytest.raises(RequestTimeout, match="within 0.5 s"):
            await rt.call_tool("s__work", {})
        await until(lambda: len(cancelled(fake)) == 1)
    ((call,),) = [[m for m in fake.received if m.get("method") == "tools/call"]]
    assert "_meta" not in call["params"]  # nothing to restart: no progress asked for


async def test_a_tool_s_own_timeout(kxen_home, fakes, tmp_path):
    fakes.add("f", worker(4, 0.25))  # 1 s without progress for "quiet"
    budget = {"requestSeconds": 0.3, "toolSeconds": {"quiet": 5}}
    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow", timeouts=budget)}) as rt:
        with anyio.fail_after(WAIT):
            assert await rt.call_tool("s__quiet", {}) == text_result("quiet done")
            # the host's timeout= wins over both
            with pytest.raises(RequestTimeout, match="within 0.2 s"):
                await rt.call_tool("s__quiet", {}, timeout=0.2)


async def test_progress_in_the_stateless_era_restarts_the_timeout_too(kxen_home, fakes, tmp_path):
    fake = worker(8, 0.25)
    fake.eras = ("modern",)
    fakes.add("f", fake)
    server = mem("f", defaultToolPolicy="allow", timeouts={"requestSeconds": 0.5})
    async with running(kxen_home, tmp_path, servers={"s": server}) as rt:
        assert rt.status()[0]["era"] == "modern"
        with anyio.fail_after(WAIT):
            assert await rt.call_tool("s__work", {}) == text_result("work done")
            with pytest.raises(RequestTimeout):
                await rt.call_tool("s__quiet", {})


@pytest.mark.parametrize(
    ("timeouts", "path", "rule"),
    [
        ({"toolSeconds": {"t": 0}}, "timeouts", "toolSeconds.t must be a number of seconds > 0"),
        ({"toolSeconds": {"t": True}}, "timeouts.toolSeconds['t']", "expected a number"),
        ({"toolSeconds": {"": 5}}, "timeouts", "tool names must not be empty"),
        ({"maxTotalSeconds": -1}, "timeouts", "maxTotalSeconds must be a number of seconds > 0"),
        ({"resetOnProgress": "yes"}, "timeouts.resetOnProgress", ""),
    ],
)
def test_bad_budgets_name_the_key(kxen_home, tmp_path, timeouts, path, rule):
    from kxen_core.config import load_config

    kxen_home.write_servers({"s": {"command": "x", "timeouts": timeouts}})
    with pytest.raises(ConfigError) as info:
        load_config(home=kxen_home.path, workspace=tmp_path)
    text = str(info.value)
    assert "mcp.json" in text and f"mcpServers.s.{path}" in text and rule in text, text


def test_a_project_file_may_not_set_a_tool_s_timeout(kxen_home, tmp_path):
    from kxen_core.config import load_config
    from kxen_core.config.trust import trust

    (tmp_path / ".kxen").mkdir()
    (tmp_path / ".kxen" / "mcp.json").write_text(
        '{"mcpServers": {"p": {"command": "x", "timeouts": {"requestSeconds": 5, "toolSeconds": {"t": 900}}}}}'
    )
    trust(kxen_home.path, tmp_path)
    config = load_config(kxen_home.path, tmp_path)  # the project file is rejected whole
    (problem,) = config.project_problems
    assert ".kxen/mcp.json" in problem and "p.timeouts.toolSeconds" in problem and "user config" in problem
    assert "p" not in config.servers


@pytest.mark.parametrize("kind", ["asyncio", "anyio"])
@pytest.mark.parametrize("default", [True, False])
async def test_a_waiter_with_a_clock_waits_while_progress_comes(kind, default):
    """Both waiters, on the shared default timer and on a timer of its own: progress after the
    first expiry still extends the wait, a reply then is delivered, and no progress ends it."""
    import asyncio

    waiters = AsyncioWaiters(asyncio.get_running_loop(), 0.2) if kind == "asyncio" else AnyioWaiters()
    timeout = 0.2 if default else 0.25
    clock = RequestClock(timeout, 5)
    waiter = waiters.create()

    async def beat() -> None:
        for _ in range(6):
            await anyio.sleep(timeout / 2)
            clock.touch()
        waiters.resolve(waiter, {"result": "late"})

    async with anyio.create_task_group() as tg:
        tg.start_soon(beat)
        with anyio.fail_after(WAIT):
            assert await waiters.wait(waiter, timeout, clock) == {"result": "late"}
    assert clock.touches == 6
    quiet = RequestClock(timeout, 5)
    with anyio.fail_after(WAIT):
        assert await waiters.wait(waiters.create(), timeout, quiet) is None
    assert quiet.why() == ""  # no progress: the plain timeout's message
    waiters.close()


async def test_a_call_whose_progress_stops_ends_its_timeout_after_the_last_one(kxen_home, fakes, tmp_path):
    fake = FakeServer(tools={"work": lambda a: text_result("unused")})

    async def call(params: dict[str, Any]) -> dict[str, Any]:
        token = params["_meta"]["progressToken"]
        for i in range(3):  # 0.3 s of progress, then silence
            await anyio.sleep(0.1)
            await fake.notify("notifications/progress", {"progressToken": token, "progress": i})
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    fake.methods["tools/call"] = call
    fakes.add("f", fake)
    budget = {"requestSeconds": 0.5}
    async with running(kxen_home, tmp_path, servers={"s": mem("f", defaultToolPolicy="allow", timeouts=budget)}) as rt:
        started = anyio.current_time()
        with anyio.fail_after(WAIT), pytest.raises(RequestTimeout, match="within 0.5 s since its last progress"):
            await rt.call_tool("s__work", {})
        assert 0.7 < anyio.current_time() - started < 5  # the last progress (0.3 s) + 0.5 s, not 0.5 s
        await until(lambda: len(cancelled(fake)) == 1)

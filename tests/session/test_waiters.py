"""kxen_core.protocol.waiters: the one backend-specific piece of the session, on asyncio and on trio."""

from __future__ import annotations

import anyio
import pytest

from kxen_core.protocol.waiters import AnyioWaiters, AsyncioWaiters, for_current_backend

pytestmark = pytest.mark.anyio


async def test_the_fast_path_is_chosen_on_asyncio_only(anyio_backend):
    waiters = for_current_backend(30.0)
    assert isinstance(waiters, AsyncioWaiters if anyio_backend == "asyncio" else AnyioWaiters)


@pytest.mark.parametrize("timeout", [30.0, 10.0])  # the default timeout (shared timer), another one
async def test_resolve_keeps_the_first_value(timeout):
    waiters = for_current_backend(30.0)
    waiter = waiters.create()
    waiters.resolve(waiter, {"first": 1})
    waiters.resolve(waiter, {"second": 2})
    with anyio.fail_after(5):
        assert await waiters.wait(waiter, timeout) == {"first": 1}


@pytest.mark.parametrize("timeout", [0.05, 0.06])  # 0.05 is the default: the shared timer
async def test_wait_gives_none_when_the_time_runs_out(timeout):
    waiters = for_current_backend(0.05)
    waiter = waiters.create()
    with anyio.fail_after(5):
        assert await waiters.wait(waiter, timeout) is None
    waiters.resolve(waiter, {"late": True})  # a late answer is dropped quietly
    waiters.close()


async def test_a_value_wakes_the_wait():
    waiters = for_current_backend(30.0)
    waiter = waiters.create()
    got = []

    async def wait() -> None:
        got.append(await waiters.wait(waiter, 30.0))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            waiters.resolve(waiter, {"ok": True})
    assert got == [{"ok": True}]
    waiters.close()


@pytest.mark.parametrize("timeout", [30.0, 10.0])
async def test_the_callers_cancellation_propagates(timeout):
    waiters = for_current_backend(30.0)
    waiter = waiters.create()
    with anyio.fail_after(5):
        with anyio.move_on_after(0.05) as scope:
            await waiters.wait(waiter, timeout)
    assert scope.cancelled_caught
    waiters.resolve(waiter, {"after": True})  # no error once the wait is gone
    waiters.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_asyncio_close_drops_the_shared_timer(anyio_backend):
    """asyncio-only internals: the shared deadline timer is disarmed when the session closes."""
    waiters = for_current_backend(30.0)
    assert isinstance(waiters, AsyncioWaiters)
    waiter = waiters.create()
    async with anyio.create_task_group() as tg:
        tg.start_soon(waiters.wait, waiter, 30.0)
        await anyio.wait_all_tasks_blocked()
        assert waiters._sweeper is not None and len(waiters._deadlines) == 1
        waiters.resolve(waiter, {"done": True})
    waiters.close()
    assert waiters._sweeper is None and not waiters._deadlines

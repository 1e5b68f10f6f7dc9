"""Tool calls that run as 2025-11-25 tasks, against real peers: server-everything's
``simulate-research-query`` (``taskSupport: required``; ~4 s in four stages, and with ``ambiguous``
an ``elicitation/create`` delivered through ``tasks/result``), and tests/peers/task_peer.py, a stdio
peer whose task finishes, never ends, floods status notifications or is lost by the server. The
unit twins are in tests/test_tasks.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from kxen_testing import running

from kxen_core import hookimpl
from kxen_core.errors import InvalidArguments, RequestTimeout, TaskFailed
from kxen_core.runtime.tasks import MAX_TASKS_PER_SERVER

pytestmark = [pytest.mark.anyio, pytest.mark.peer]

WAIT = 60
STDIO = ("stdio",)
RESEARCH = "ev__simulate-research-query"
PEER = str(Path(__file__).parent / "peers" / "task_peer.py")
FLOOD = 2000  # status notifications before each tasks/get answer (task_peer.FLOOD)


class Clarifies:
    """An elicitation channel that answers the research tool's question."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    @hookimpl
    def kxen_elicitation_request(self, server, request):
        self.asked.append(request.message)
        return {"action": "accept", "content": {"interpretation": "historical"}}


def everything(everything_js: str) -> dict[str, object]:
    return {"ev": {"command": "node", "args": [everything_js, "stdio"], "defaultToolPolicy": "allow"}}


def peer(mode: str, state: Path, **timeouts: object) -> dict[str, object]:
    entry = {"command": sys.executable, "args": [PEER, mode, "--state", str(state)], "defaultToolPolicy": "allow"}
    return {"tp": {**entry, "timeouts": timeouts}} if timeouts else {"tp": entry}


def wire(state: Path) -> list[str]:
    """The request methods the task peer got, in order."""
    return [method for method, _task in json.loads(state.read_text())["requests"]]


async def test_a_research_task_completes_through_polling(kxen_home, tmp_path, everything_js):
    seen: list[str] = []
    async with running(kxen_home, tmp_path, servers=everything(everything_js), allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            result = await rt.call_tool(RESEARCH, {"topic": "tides"}, on_progress=lambda p: seen.append(p.message))
        assert rt.tasks() == []  # collected: nothing left to resume
    assert "Research Report: tides" in result["content"][0]["text"], result
    # the stages' status messages reached the host, each once
    assert "task working: Gathering sources..." in seen and len(seen) == len(set(seen)), seen


async def test_input_required_goes_through_the_elicitation_hook(kxen_home, tmp_path, everything_js):
    channel = Clarifies()
    servers = everything(everything_js)
    async with running(kxen_home, tmp_path, channel, servers=servers, allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            result = await rt.call_tool(RESEARCH, {"topic": "python", "ambiguous": True})
    assert len(channel.asked) == 1 and "python" in channel.asked[0]
    assert "**Clarification**: historical" in result["content"][0]["text"], result


async def test_a_handle_is_returned_at_once_and_collected_later(kxen_home, tmp_path, everything_js):
    async with running(kxen_home, tmp_path, servers=everything(everything_js), allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            handle = await rt.call_tool(RESEARCH, {"topic": "moss"}, wait=False)
            stored = json.loads(json.dumps(handle))  # what a host keeps is plain JSON
            assert set(stored) == {"server", "taskId", "tool", "ttl", "created", "pollInterval"}
            assert stored["server"] == "ev" and stored["tool"] == "simulate-research-query"
            assert stored["ttl"] == 300000 and stored["pollInterval"] == 1000  # what the server gave
            [known] = rt.tasks("ev")
            assert known["taskId"] == stored["taskId"] and known["status"] == "working"
            [status] = [s for s in rt.status() if s["name"] == "ev"]
            assert status["tasks"]["running"] == 1 and stored["taskId"] in status["tasks"]["lines"][0]
            assert (await rt.task_status(stored))["status"] in ("working", "completed")
            result = await rt.task_result(stored)
        assert rt.tasks() == []
    assert "Research Report: moss" in result["content"][0]["text"], result


async def test_a_caller_that_gives_up_cancels_the_task_on_the_wire(kxen_home, tmp_path, everything_js):
    async with running(kxen_home, tmp_path, servers=everything(everything_js), allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            with anyio.move_on_after(1.5) as scope:
                await rt.call_tool(RESEARCH, {"topic": "gives up"})
            assert scope.cancelled_caught
            assert rt.tasks() == []
            # the server's own list (tasks/list) says what tasks/cancel did
            listed = await rt.servers["ev"].session.request("tasks/list", {})
    [task] = listed["tasks"]
    assert task["status"] == "cancelled", task


async def test_a_tool_that_is_no_task_gets_no_handle(kxen_home, tmp_path, everything_js):
    async with running(kxen_home, tmp_path, servers=everything(everything_js), allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT), pytest.raises(InvalidArguments, match="does not run as a task.*nothing was sent"):
            await rt.call_tool("ev__echo", {"message": "hi"}, wait=False)


async def test_a_task_that_never_ends_is_cut_by_the_budget_and_cancelled(kxen_home, tmp_path):
    state = tmp_path / "never.json"
    servers = peer("never", state, maxTotalSeconds=1.5)
    async with running(kxen_home, tmp_path, servers=servers, allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT), pytest.raises(RequestTimeout, match=r"1\.5 s \(timeouts.maxTotalSeconds\)"):
            await rt.call_tool("tp__slow", {"text": "x"})
        assert rt.tasks() == []
    methods = wire(state)
    assert methods[-1] == "tasks/cancel" and methods.count("tasks/cancel") == 1, methods
    # polled at kxen's floor (0.25 s), not the peer's 0.1 s: a bounded count in 1.5 s
    assert 1 <= methods.count("tasks/get") <= 8, methods


async def test_a_flood_of_status_notifications_costs_bounded_work(kxen_home, tmp_path):
    state = tmp_path / "flood.json"
    async with running(kxen_home, tmp_path, servers=peer("flood", state), allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("tp__slow", {"text": "flooded", "seconds": 1})
        book = rt.servers["tp"].tasks
        # every notification reached the book (one status slot each: no queue, no task) and it is empty again
        assert len(book) == 0 and book.notified >= FLOOD, book.notified
    assert result["content"][0]["text"] == "done: flooded"


async def test_a_task_the_server_loses_is_a_clear_error_with_no_retry_loop(kxen_home, tmp_path):
    state = tmp_path / "loses.json"
    async with running(kxen_home, tmp_path, servers=peer("loses", state), allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT), pytest.raises(TaskFailed, match="no longer knows task") as caught:
            await rt.call_tool("tp__slow", {"text": "x"})
    assert caught.value.status == "lost" and caught.value.server == "tp"
    assert wire(state).count("tasks/get") == 1


async def test_a_handle_resumes_in_a_new_runtime(kxen_home, tmp_path):
    state = tmp_path / "restart.json"
    servers = peer("finishes", state)
    async with running(kxen_home, tmp_path, servers=servers, allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            handle = await rt.call_tool("tp__slow", {"text": "after restart", "seconds": 1.5}, wait=False)
    assert "tasks/cancel" not in wire(state)  # a handle the host keeps outlives the runtime
    stored = json.dumps(handle)
    async with running(kxen_home, tmp_path, servers=servers, allow=STDIO, wait=WAIT) as rt:
        assert rt.tasks() == []  # this runtime never saw it
        with anyio.fail_after(WAIT):
            result = await rt.task_result(json.loads(stored))
    assert result["content"][0]["text"] == "done: after restart"


async def test_the_runtime_stopping_cancels_a_task_a_call_waits_for(kxen_home, tmp_path):
    state = tmp_path / "stop.json"
    async with running(kxen_home, tmp_path, servers=peer("never", state), allow=STDIO, wait=WAIT) as rt:
        outcome: list[BaseException] = []

        async def call() -> None:
            try:
                await rt.call_tool("tp__slow", {"text": "x"})
            except Exception as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(WAIT):
                while not rt.tasks():
                    await anyio.sleep(0.05)
            assert rt.tasks()[0]["waiting"] is True
            await rt.stop_server("tp")
    assert outcome and "tasks/cancel" in wire(state), (outcome, wire(state))


async def test_tasks_per_server_are_bounded(kxen_home, tmp_path):
    state = tmp_path / "bound.json"
    async with running(kxen_home, tmp_path, servers=peer("never", state), allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            handles = [await rt.call_tool("tp__slow", {}, wait=False) for _ in range(MAX_TASKS_PER_SERVER)]
            sent = wire(state).count("tools/call")
            with pytest.raises(InvalidArguments, match=f"has {MAX_TASKS_PER_SERVER} tasks.*nothing was sent"):
                await rt.call_tool("tp__slow", {}, wait=False)
            assert wire(state).count("tools/call") == sent
            cancelled = await rt.cancel_task(handles[0])
            assert cancelled["status"] == "cancelled"
            assert len(rt.tasks("tp")) == MAX_TASKS_PER_SERVER - 1
            await rt.call_tool("tp__slow", {}, wait=False)  # room again


async def test_an_optional_task_tool_runs_as_a_task_only_when_the_host_asks(kxen_home, tmp_path):
    state = tmp_path / "optional.json"
    async with running(kxen_home, tmp_path, servers=peer("finishes", state), allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            at_once = await rt.call_tool("tp__maybe", {"text": "a", "seconds": 0.3})
            as_task = await rt.call_tool("tp__maybe", {"text": "b", "seconds": 0.3}, as_task=True)
    assert at_once["content"][0]["text"] == "now: a"
    assert as_task["content"][0]["text"] == "done: b"
    assert wire(state).count("tasks/result") == 1


async def test_the_agent_gets_a_task_result_and_a_lost_task_as_text(kxen_home, tmp_path, everything_js):
    async with running(kxen_home, tmp_path, servers=everything(everything_js), allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            out = await rt.agent_call(RESEARCH, {"topic": "ferns"})
    assert not out.is_error and "Research Report: ferns" in out.text
    state = tmp_path / "lost.json"
    async with running(kxen_home, tmp_path, servers=peer("loses", state), allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            lost = await rt.agent_call("tp__slow", {"text": "x"})
    assert lost.is_error and "no longer knows task" in lost.text


async def test_what_kxen_holds_as_secret_is_scrubbed_from_task_status(kxen_home, tmp_path):
    secret = "kx-tasks-secret-9f3a7c2e"
    servers = peer("finishes", tmp_path / "secret.json")
    servers["tp"]["env"] = {"API_TOKEN": secret}
    async with running(kxen_home, tmp_path, servers=servers, allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            handle = await rt.call_tool("tp__slow", {"text": "using", "seconds": 30}, wait=False)
            polled = await rt.task_status(handle)
            shown = json.dumps([rt.tasks(), polled, rt.status()])
            await rt.cancel_task(handle)
    assert polled["statusMessage"].startswith("using with ***") and secret not in shown


async def test_a_failed_task_gives_its_kept_result_or_a_clear_error(kxen_home, tmp_path):
    state = tmp_path / "fails.json"
    async with running(kxen_home, tmp_path, servers=peer("fails", state), allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            kept = await rt.call_tool("tp__slow", {"text": "kept", "seconds": 0.3})
            with pytest.raises(TaskFailed, match="failed") as caught:
                await rt.call_tool("tp__slow", {"text": "gone", "seconds": 0.3})
    assert kept["isError"] is True and kept["content"][0]["text"] == "it broke"
    assert caught.value.status == "failed" and "tasks/cancel" not in wire(state)


async def test_a_task_the_server_cancels_ends_the_call_without_a_cancel_of_ours(kxen_home, tmp_path):
    state = tmp_path / "drops.json"
    async with running(kxen_home, tmp_path, servers=peer("drops", state), allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT), pytest.raises(TaskFailed, match="was cancelled by the server") as caught:
            await rt.call_tool("tp__slow", {"text": "x", "seconds": 0.3})
    assert caught.value.status == "cancelled" and "tasks/cancel" not in wire(state)

"""Tasks in the 2026-07-28 era: the ``io.modelcontextprotocol/tasks`` extension (SEP-2663), against
tests/peers/tasks_ext_peer.py, a stdio peer that follows the conformance harness's ``tasks-*``
scenarios: the server answers a ``tools/call`` with a flat ``resultType: "task"``, ``tasks/get``
inlines the result (or the error, or the input requests), ``tasks/update`` carries the answers and
``tasks/cancel`` is acknowledged empty. The handshake era's tasks: tests/test_tasks_peers.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from kxen_testing import running

from kxen_core import hookimpl
from kxen_core.errors import InvalidArguments, RequestTimeout, TaskFailed

pytestmark = [pytest.mark.anyio, pytest.mark.peer]

WAIT = 60
STDIO = ("stdio",)
PEER = str(Path(__file__).parent / "peers" / "tasks_ext_peer.py")


class Confirms:
    def __init__(self) -> None:
        self.asked: list[str] = []

    @hookimpl
    def kxen_elicitation_request(self, server, request):
        self.asked.append(request.message)
        return {"action": "accept", "content": {"confirm": True}}


def peer(state: Path, **timeouts: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "command": sys.executable,
        "args": [PEER, "--state", str(state)],
        "defaultToolPolicy": "allow",
    }
    if timeouts:
        entry["timeouts"] = timeouts
    return {"tx": entry}


def requests(state: Path) -> list[dict[str, object]]:
    return json.loads(state.read_text())["requests"]


def methods(state: Path) -> list[object]:
    return [r["method"] for r in requests(state)]


async def test_a_task_completes_with_its_result_inlined_in_tasks_get(kxen_home, tmp_path):
    state = tmp_path / "s.json"
    seen: list[str] = []
    async with running(kxen_home, tmp_path, servers=peer(state), allow=STDIO, wait=WAIT) as rt:
        assert rt.status()[0]["era"] == "modern"
        with anyio.fail_after(WAIT):
            result = await rt.call_tool(
                "tx__slow_compute", {"seconds": 0.6, "label": "pi"}, on_progress=lambda p: seen.append(p.message)
            )
            assert (await rt.call_tool("tx__greet", {"name": "sync"}))["content"][0]["text"] == "Hello, sync!"
        assert rt.tasks() == []
    assert result["content"][0]["text"] == "computed: pi" and not result.get("isError")
    assert "task working: computing" in seen
    sent = requests(state)
    # the extension declared in every request after the discovery that offered it; never a task hint
    assert all(r["declared"] for r in sent if r["method"] != "server/discover")
    assert not any(r["hint"] for r in sent)
    assert "tasks/result" not in methods(state) and "tasks/list" not in methods(state)


async def test_input_required_is_answered_with_tasks_update_through_the_elicitation_hook(kxen_home, tmp_path):
    state = tmp_path / "s.json"
    channel = Confirms()
    async with running(kxen_home, tmp_path, channel, servers=peer(state), allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("tx__confirm_delete", {"filename": "a.txt", "seconds": 0})
    assert channel.asked == ["Delete a.txt?"]
    assert result["content"][0]["text"] == "deleted a.txt"
    assert methods(state).count("tasks/update") == 1


async def test_a_tool_error_is_a_result_and_a_protocol_error_a_failed_task(kxen_home, tmp_path):
    state = tmp_path / "s.json"
    async with running(kxen_home, tmp_path, servers=peer(state), allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            tool_error = await rt.call_tool("tx__failing_job", {"seconds": 0.3})
            with pytest.raises(TaskFailed, match=r"failed \(server error -32603: the job broke\)") as caught:
                await rt.call_tool("tx__protocol_error_job", {"seconds": 0.3})
            agent = await rt.agent_call("tx__protocol_error_job", {"seconds": 0.3})
    assert tool_error["isError"] is True and tool_error["content"][0]["text"] == "the job reported an error"
    assert caught.value.status == "failed" and agent.is_error and "the job broke" in agent.text


async def test_a_task_past_the_budget_is_cancelled_on_the_wire(kxen_home, tmp_path):
    state = tmp_path / "s.json"
    async with running(kxen_home, tmp_path, servers=peer(state, maxTotalSeconds=1), allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT), pytest.raises(RequestTimeout, match=r"1 s \(timeouts.maxTotalSeconds\)"):
            await rt.call_tool("tx__slow_compute", {"seconds": 60, "label": "long"})
        with anyio.fail_after(WAIT):
            with anyio.move_on_after(1) as scope:  # a caller that gives up cancels it too
                await rt.call_tool("tx__slow_compute", {"seconds": 60, "label": "given up"}, timeout=30)
        assert scope.cancelled_caught and rt.tasks() == []
    assert methods(state).count("tasks/cancel") == 2
    assert methods(state)[-1] == "tasks/cancel"


async def test_a_handle_is_followed_by_tasks_get_and_cancelled_with_tasks_cancel(kxen_home, tmp_path):
    state = tmp_path / "s.json"
    async with running(kxen_home, tmp_path, servers=peer(state), allow=STDIO, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            handle = await rt.call_tool("tx__slow_compute", {"seconds": 0.6, "label": "later"}, wait=False)
            assert set(handle) == {"server", "taskId", "tool", "ttl", "created", "pollInterval"}
            assert (handle["ttl"], handle["pollInterval"]) == (60000, 100)  # ttlMs, pollIntervalMs
            assert (await rt.task_status(handle))["status"] in ("working", "completed")
            result = await rt.task_result(json.loads(json.dumps(handle)))
            # a sync tool answers at once: its result, as the server gave it
            greeted = await rt.call_tool("tx__greet", {"name": "now"}, wait=False)
            other = await rt.call_tool("tx__slow_compute", {"seconds": 60, "label": "dropped"}, wait=False)
            cancelled = await rt.cancel_task(other)
            with pytest.raises(TaskFailed, match="was cancelled") as caught:
                await rt.task_result(other)
    assert result["content"][0]["text"] == "computed: later"
    assert greeted["content"][0]["text"] == "Hello, now!"
    assert cancelled["status"] == "cancelled" and caught.value.status == "cancelled"
    assert "tasks/result" not in methods(state)


async def test_a_server_without_the_extension_gets_no_handle(kxen_home, tmp_path, fakes):
    from kxen_testing import mem, text_result

    fakes.add("f", tools={"echo": lambda a: text_result("x")}, eras=("modern",))
    async with running(kxen_home, tmp_path, servers={"m": mem("f", defaultToolPolicy="allow")}) as rt:
        assert rt.status()[0]["era"] == "modern"
        with anyio.fail_after(WAIT), pytest.raises(InvalidArguments, match="does not run as a task.*nothing was sent"):
            await rt.call_tool("m__echo", {}, wait=False)

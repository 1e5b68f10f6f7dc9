"""The parts of tasks (2025-11-25) that need no server: a task's fields checked and bounded, the
poll interval clamped, a stored handle checked, a server's task book bounded. The real-peer twins
are in tests/test_tasks_peers.py."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kxen_core.errors import InvalidArguments, TaskFailed
from kxen_core.protocol.tasks import (
    MAX_POLL_SECONDS,
    MIN_POLL_SECONDS,
    is_created,
    parse_task,
    poll_seconds,
    server_runs_tool_tasks,
    task_support,
)
from kxen_core.runtime.tasks import MAX_TASKS_PER_SERVER, TaskBook, check_handle, make_handle, seconds_left


def task(**over: object) -> dict[str, object]:
    return {"taskId": "t1", "status": "working", "ttl": 60000, "pollInterval": 500, **over}


@given(st.one_of(st.none(), st.integers(-10, 10**9), st.floats(allow_nan=True), st.booleans(), st.text()))
def test_the_poll_interval_is_always_within_the_bounds(interval):
    parsed = parse_task(task(pollInterval=interval), "s")
    assert MIN_POLL_SECONDS <= poll_seconds(parsed) <= MAX_POLL_SECONDS


def test_a_missing_interval_polls_each_second_and_a_fast_one_at_the_floor():
    assert poll_seconds(parse_task(task(pollInterval=None), "s")) == 1.0
    assert poll_seconds(parse_task(task(pollInterval=1), "s")) == MIN_POLL_SECONDS
    assert poll_seconds(parse_task(task(pollInterval=10**8), "s")) == MAX_POLL_SECONDS


@pytest.mark.parametrize(
    "bad, why",
    [
        ("not a task", "not an object"),
        (task(taskId=""), "no usable taskId"),
        (task(taskId="x" * 257), "no usable taskId"),
        (task(taskId=7), "no usable taskId"),
        (task(status="sleeping"), "unknown status"),
    ],
)
def test_an_unusable_task_is_a_clear_error(bad, why):
    with pytest.raises(TaskFailed, match=why):
        parse_task(bad, "s")


def test_a_status_message_is_escaped_and_cut():
    parsed = parse_task(task(statusMessage="\x1b[2J" + "m" * 5000), "s")
    assert "\x1b" not in parsed["statusMessage"] and len(parsed["statusMessage"]) < 600


def test_what_runs_as_a_task():
    assert task_support({"execution": {"taskSupport": "required"}}) == "required"
    assert task_support({"execution": {"taskSupport": "optional"}}) == "optional"
    assert task_support({"execution": {"taskSupport": "always"}}) == "forbidden"
    assert task_support({}) == "forbidden"
    assert server_runs_tool_tasks({"tasks": {"requests": {"tools": {"call": {}}}}})
    assert not server_runs_tool_tasks({"tasks": {"requests": {}}}) and not server_runs_tool_tasks({})
    assert is_created({"task": task()}) and not is_created({"content": [], "task": task()})


def test_a_handle_is_plain_json_and_checked_when_given_back():
    handle = make_handle("s", "slow", parse_task(task(), "s"))
    assert check_handle(json.loads(json.dumps(handle))) == handle
    assert 59 < seconds_left(handle) <= 60
    assert seconds_left({**handle, "ttl": None}) == float("inf")
    for broken, key in [
        ({**handle, "server": ""}, "'server'"),
        ({**handle, "taskId": 3}, "'taskId'"),
        ({**handle, "ttl": -1}, "'ttl'"),
        ({**handle, "created": "today"}, "'created'"),
    ]:
        with pytest.raises(InvalidArguments, match=key):
            check_handle(broken)
    with pytest.raises(InvalidArguments, match="is a dict"):
        check_handle("t1")


def test_the_book_is_bounded_and_finished_tasks_make_room():
    book = TaskBook("s")
    for i in range(MAX_TASKS_PER_SERVER):
        book.add(make_handle("s", "slow", parse_task(task(taskId=f"t{i}"), "s")), "working", None, waiting=False)
    with pytest.raises(InvalidArguments, match="nothing was sent"):
        book.room()
    book.notify(task(taskId="t3", status="completed", statusMessage="done"))
    book.room()  # t3 is finished: it makes room
    assert len(book) == MAX_TASKS_PER_SERVER - 1 and book.get("t3") is None
    assert book.status_view()["running"] == MAX_TASKS_PER_SERVER - 1


def test_status_notifications_for_unknown_or_malformed_tasks_are_counted_and_dropped():
    book = TaskBook("s")
    book.add(make_handle("s", "slow", parse_task(task(), "s")), "working", None, waiting=True)
    for params in (task(taskId="other"), "junk", {"taskId": "t1", "status": "sleeping"}):
        book.notify(params)
    assert book.unmatched == 3 and book.get("t1").status == "working"
    book.notify(task(statusMessage="half way"))
    assert book.get("t1").message == "half way" and book.status_view()["lines"] == ["t1 slow: working -- half way"]

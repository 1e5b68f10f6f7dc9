"""Failure reasons reach a status as their real cause and phase, never as a task group's wrapper
("ExceptionGroup: unhandled errors in a TaskGroup")."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from kxen_testing import FakeError, mem, running
from support import settle, state

from kxen_core.errors import ClosedError, RemoteError, RequestTimeout
from kxen_core.runtime.server import failure_text, real_cause
from kxen_core.runtime.workspace import Runtime

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup, ExceptionGroup

pytestmark = pytest.mark.anyio


def _no_group(status: list[dict[str, Any]]) -> None:
    for entry in status:
        assert "ExceptionGroup" not in str(entry["error"]) and "TaskGroup" not in str(entry["error"])
        assert "unhandled errors" not in str(entry["error"])


async def test_a_failing_first_tools_list_is_reported_as_itself(kxen_home, ws, fakes):
    def refuse(params: dict[str, Any]) -> Any:
        raise FakeError(-32000, "listing is broken today")

    fakes.add("err", methods={"tools/list": refuse})
    fakes.add("slow", hang={"tools/list"})
    dies = fakes.add("dies")
    dies.die_after = 4  # the era probe, initialize, notifications/initialized, tools/list: then the connection closes
    servers = {
        "err": mem("err"),
        "slow": mem("slow", timeouts={"requestSeconds": 0.3}),
        "dies": mem("dies"),
    }
    async with running(kxen_home, ws, servers=servers) as rt:
        status = {s["name"]: s for s in rt.status()}
    _no_group(list(status.values()))
    assert status["err"]["state"] == "failed" and status["err"]["phase"] == "catalog"
    assert "listing is broken today" in status["err"]["error"]
    assert status["slow"]["state"] == "failed" and status["slow"]["phase"] == "catalog"
    assert "tools/list: no reply" in status["slow"]["error"]
    assert status["dies"]["state"] == "failed" and status["dies"]["phase"] == "catalog"
    assert status["dies"]["error"]  # the close reason, not a wrapper


def test_the_real_cause_is_found_in_nested_groups():
    timeout = RequestTimeout("tools/list", 1.0, server="s")
    group = BaseExceptionGroup("outer", [ExceptionGroup("inner", [ValueError("noise"), timeout])])
    assert real_cause(group) is timeout
    assert failure_text(group) == str(timeout)
    plain = ExceptionGroup("unhandled errors in a TaskGroup", [KeyError("k")])
    assert failure_text(plain) == "KeyError: 'k'"
    closed = ClosedError("gone", server="s")
    assert real_cause(closed) is closed
    remote = RemoteError(-32000, "no", None, method="tools/list")
    assert real_cause(ExceptionGroup("g", [remote])) is remote


async def test_status_rows_carry_no_raw_control_characters_for_an_embedding_host(kxen_home, ws):
    """A host's Settings screen shows ``Runtime.status()`` as it is: what a server said (its stderr
    in a failure reason, a diagnostic) arrives escaped, one safe line each."""
    import sys

    script = "import sys; sys.stderr.write('\\x1b[2J\\x1b]8;;http://127.0.0.1/\\x07boom\\u202e'); sys.exit(3)"
    kxen_home.write_servers({"bad": {"command": sys.executable, "args": ["-c", script]}})
    async with Runtime(workspace=ws) as rt:
        await settle(rt)
        row = state(rt, "bad")
    assert row["state"] == "failed" and "boom" in row["error"]
    for text in [row["error"], row["note"] or "", *row["diagnostics"]]:
        assert text.isprintable(), text
    assert "\\x1b[2J" in row["error"] and "\\u202e" in row["error"]

"""The audit trail against real peers: the demo server over stdio (allowed, denied, asked and
approved, asked and denied, asked and timed out, a failing tool, a call remembered), the SDK's
contents server over stdio (resources/read, prompts/get), the SDK server over Streamable HTTP; and
hypothesis over argument values carrying a marker and a configured secret: none ever reaches the
file (kxen_core.policy.audit)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kxen_testing import Channel, running
from remote_support import REMOTE_PLUGINS, remote, remote_on
from support import demo_entry

from kxen_core import Runtime
from kxen_core.errors import ApprovalDenied, PolicyDenied
from kxen_core.plugins import make_plugin_manager
from kxen_core.policy import audit_file, audit_read
from kxen_core.policy.approvals import canonical_url
from kxen_core.policy.audit_shape import SECRET_KEY, pin_digest

pytestmark = pytest.mark.anyio

WAIT = 30
CONTENTS_SERVER = Path(__file__).parent / "peers" / "contents_server.py"
#: planted in every argument value of the property test: never in the file
MARKER = "ZQXJ"
#: a value the user holds as secret (a sensitive env value of a configured server)
SECRET = "s3cr3t-audit-Value-9f2a7c41"


def data_dir() -> Path:
    return Path(os.environ["KXEN_DATA_DIR"])


async def written() -> list[dict[str, Any]]:
    """Every record written so far (after the writer caught up), oldest first."""
    with anyio.fail_after(10):
        assert await anyio.to_thread.run_sync(audit_file.flush, 5.0)
    return [json.loads(line) for line in audit_read.lines(data_dir())]


def calls(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The decided calls, each merged with its end (as ``kxen mcp audit`` shows them)."""
    entries, skipped, _ = audit_read.read(data_dir(), limit=10_000)
    assert skipped == 0
    return entries


def demo(**extra: Any) -> dict[str, Any]:
    policies = {"add": "allow", "fail": "allow", "echo": "ask", "slow": "deny"}
    return {**demo_entry(), "toolPolicies": policies, "env": {"DEMO_API_TOKEN": SECRET}, **extra}


async def test_the_demo_servers_calls_are_recorded_with_who_decided(kxen_home, ws):
    """Every verdict over stdio, with the core's reasons, the channel and how a yes was remembered."""
    yes, no = Channel(approved=True, name="yes-channel"), Channel(approved=False, name="no-channel")
    async with running(kxen_home, ws, yes, servers={"demo": demo()}, allow=("stdio",), audit=True) as rt:
        assert rt.audit_path == data_dir() / "audit.jsonl"
        assert (await rt.call_tool("demo__add", {"a": 1, "b": 2}))["structuredContent"] == {"sum": 3}
        with pytest.raises(PolicyDenied):
            await rt.call_tool("demo__slow", {"seconds": 1})
        await rt.call_tool("demo__echo", {"text": "hello"})  # asked: yes
        await rt.call_tool("demo__echo", {"text": "hello"})  # the same call: remembered
        assert (await rt.call_tool("demo__fail", {}))["isError"] is True
        yes.approved = None  # passes: the next channel says no
        rt.pm.register(no, name="no-channel")
        with pytest.raises(ApprovalDenied):
            await rt.call_tool("demo__echo", {"text": "other"})
        async with rt.hold_approvals(bound=0.2):  # nobody answers
            with pytest.raises(ApprovalDenied):
                await rt.call_tool("demo__echo", {"text": "late"})
        info = rt.servers["demo"].tools_by_name
        entries = calls(await written())
    by_tool = [(e["tool"], e["verdict"]) for e in entries]
    assert by_tool == [
        ("add", "allow"),
        ("slow", "deny"),
        ("echo", "asked-approved"),
        ("echo", "asked-approved"),
        ("fail", "allow"),
        ("echo", "asked-denied"),
        ("echo", "asked-timeout"),
    ]
    add, slow, asked, again, fail, declined, late = entries
    assert add["by"] == [{"plugin": "kxen.config-policy", "vote": "allow", "reason": "toolPolicies.add"}]
    assert add["args"] == {"a": "int", "b": "int"} and add["sent"] is True and add["result"]["items"] == 1
    assert add["identity"]["scope"] == "user" and add["identity"]["kind"] == "stdio" and "launch" in add["identity"]
    assert add["pin"] == pin_digest(info["add"]) and fail["pin"] == pin_digest(info["fail"])
    assert add["serverMs"] >= 0 and add["voteMs"] >= 0 and "error" not in add
    assert slow["sent"] is False and "serverMs" not in slow and slow["by"][0]["vote"] == "deny"
    assert asked["approval"] == {"channel": "yes-channel", "remember": "call"} and asked["askMs"] >= 0
    assert again["approval"] == {"channel": "process", "remember": "earlier"}
    assert fail["error"] == {"isError": True} and fail["result"]["chars"] > 0
    assert declined["approval"] == {"channel": "no-channel", "remember": None} and declined["sent"] is False
    assert late["approval"]["channel"] == "kxen-held-approvals" and late["sent"] is False
    assert len({e["id"] for e in entries}) == len(entries) and {e["pid"] for e in entries} == {os.getpid()}


async def test_a_failed_request_records_its_kxen_error_class(kxen_home, ws):
    async with running(kxen_home, ws, servers={"demo": demo(toolPolicies={"slow": "allow"})}, allow=("stdio",)) as rt:
        pass  # off by default for an embedding host
    assert not (data_dir() / "audit.jsonl").exists()
    kxen_home.write_settings("[audit]\nenabled = true\n")  # the user's setting turns it on for every host
    async with running(kxen_home, ws, servers={"demo": demo(toolPolicies={"slow": "allow"})}, allow=("stdio",)) as rt:
        with pytest.raises(Exception) as timed_out:
            await rt.call_tool("demo__slow", {"seconds": 5}, timeout=0.2)
        records = await written()
        (entry,) = calls(records)
    assert entry["error"] == {"type": type(timed_out.value).__name__, "kxen": "RequestError"}
    assert entry["sent"] is True and entry["verdict"] == "allow" and "result" not in entry
    assert [r["event"] for r in records] in (["decided", "ended"], ["call"])  # one line if it ended in time


async def test_a_call_still_running_is_on_record_before_it_ends(kxen_home, ws):
    """The decided line is written while the call waits for the server; the end comes on its own
    line (here: the host cancels the call)."""
    servers = {"demo": demo(toolPolicies={"slow": "allow"})}
    async with running(kxen_home, ws, servers=servers, allow=("stdio",), audit=True) as rt:
        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(rt.call_tool, "demo__slow", {"seconds": 30})
                while not [r for r in await written() if r["event"] == "decided"]:
                    await anyio.sleep(0.01)
                tg.cancel_scope.cancel()
        records = await written()
    decided, ended = records
    assert (decided["event"], decided["tool"], decided["sent"]) == ("decided", "slow", True)
    assert (ended["event"], ended["id"]) == ("ended", decided["id"]) and ended["error"]["type"] == "CancelledError"


async def test_the_users_setting_turns_the_kxen_commands_trail_off(kxen_home, ws):
    kxen_home.write_settings("[audit]\nenabled = false\n")
    async with running(kxen_home, ws, servers={"demo": demo()}, allow=("stdio",), audit=True) as rt:
        assert rt.audit_path is None
        await rt.call_tool("demo__add", {"a": 1, "b": 2})
    assert audit_read.files(data_dir()) == []


async def test_resources_read_and_prompts_get_are_recorded_as_the_policy_sees_them(kxen_home, ws):
    """The SDK's contents server over stdio: a read and a prompt get, their shape only."""
    pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK (a dev dependency) is not installed")
    entry = {"command": sys.executable, "args": [str(CONTENTS_SERVER)], "toolPolicies": {"prompts/get": "deny"}}
    async with running(kxen_home, ws, servers={"sdk": entry}, allow=("stdio",), audit=True, wait=WAIT) as rt:
        with anyio.fail_after(WAIT):
            assert (await rt.read_resource("sdk", "note://hello")).text == "hello from the SDK"
            with pytest.raises(PolicyDenied):
                await rt.get_prompt("sdk", "review", {"code": f"{MARKER} = 1"})
        records = await written()
    read, got = calls(records)
    assert (read["tool"], read["method"], read["verdict"], read["pin"]) == ("resources/read",) * 2 + ("allow", None)
    assert read["args"] == {"uri": "str:12"} and read["result"]["chars"] >= len("hello from the SDK")
    assert read["by"] == [
        {"plugin": "kxen.config-policy", "vote": "allow", "reason": "read-only (resources and prompts)"}
    ]
    assert (got["method"], got["verdict"], got["sent"]) == ("prompts/get", "deny", False)
    assert got["args"] == {"name": "str:6", "arguments": {"code": f"str:{len(MARKER) + 4}"}}
    assert MARKER not in (data_dir() / "audit.jsonl").read_text()


async def test_the_sdk_server_over_streamable_http(kxen_home, ws, peers):
    """A remote identity is its canonical URL; the SDK's error result is an isError end."""
    url, kind = peers.sdk("stateful")
    kxen_home.write_settings(remote_on(url))
    kxen_home.write_servers({"r": remote(url, kind)})
    pm = make_plugin_manager(allow=list(REMOTE_PLUGINS))
    async with Runtime(home=kxen_home.path, workspace=ws, pm=pm, audit=True) as rt:
        with anyio.fail_after(WAIT):
            assert await rt.wait_ready()
            assert (await rt.call_tool("r__add", {"a": 2, "b": 3}))["content"][0]["text"] == "5"
            assert (await rt.call_tool("r__boom", {}))["isError"] is True
        entries = calls(await written())
    add, boom = entries
    assert add["identity"] == {"scope": "user", "kind": "http", "url": canonical_url(url)}
    assert add["verdict"] == "allow" and add["by"][0]["reason"] == "defaultToolPolicy"
    assert add["args"] == {"a": "int", "b": "int"} and add["result"]["chars"] >= 1
    assert boom["error"] == {"isError": True} and boom["args"] == {}


# --- no argument value ever reaches the file ---------------------------------------------------

keys = st.text(alphabet="abcdefghijklmnop_", min_size=1, max_size=12)
values = st.builds(lambda a, b: f"{a}{MARKER}{b}", st.text(max_size=6), st.text(max_size=6))
nested = st.recursive(
    values | st.integers() | st.floats(allow_nan=False) | st.booleans() | st.none(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=16,
)


async def test_no_argument_value_and_no_secret_ever_reaches_the_file(kxen_home, ws):
    """Hypothesis over argument values (strings carrying a marker, nested in objects and arrays),
    with the user's secret planted in a value and in a key, sent to the demo server (its ``fail``
    tool takes any object, ``echo`` a text); the file holds neither, and each call is there."""
    channel = Channel(approved=True)  # the guard asks about the secret: yes, so it is sent
    servers = {"demo": demo(toolPolicies={"fail": "allow", "echo": "allow"})}
    async with running(kxen_home, ws, channel, servers=servers, allow=("stdio",), audit=True) as rt:
        made = [0]

        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
        @given(arguments=st.dictionaries(keys, nested, max_size=5), secret_in=st.sampled_from(["value", "key", None]))
        def example(arguments: dict[str, Any], secret_in: str | None) -> None:
            if secret_in == "value":
                arguments = {**arguments, "deep": [{"x": f"..{SECRET}.."}]}
            elif secret_in == "key":
                arguments = {**arguments, f"k{SECRET}": 1}
            anyio.from_thread.run(rt.call_tool, "demo__fail", arguments)
            anyio.from_thread.run(rt.call_tool, "demo__echo", {"text": f"{MARKER}{SECRET}"})
            made[0] += 2

        with anyio.fail_after(300):
            await anyio.to_thread.run_sync(example)
        records = await written()
    text = "".join(path.read_text() for path in audit_read.files(data_dir()))
    assert MARKER not in text and SECRET not in text and SECRET[:12] not in text
    assert len(calls(records)) == made[0] and f'"{SECRET_KEY}":"int"' in text
    assert {r["verdict"] for r in calls(records)} <= {"allow", "asked-approved"}

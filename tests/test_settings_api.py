"""The Settings API through the public Runtime, as a host's own UI uses it (no page): the first
snapshot waits for the initial load, the event stream is bounded for a reader that never reads,
approvals held here are listed and answered (a project launch, an ``ask`` call while its caller
waits, the remote switch), and a held approval nobody answers is denied."""

from __future__ import annotations

import shutil
import sys

import anyio
import pytest
from kxen_testing import mem, running, text_result
from remote_support import REMOTE_OFF, REMOTE_PLUGINS, SDK_TOOLS, remote, remote_on, status_of
from support import DEMO, demo_entry, write_project

from kxen_core import Runtime
from kxen_core.config.trust import trust
from kxen_core.errors import ApprovalDenied, InvalidArguments
from kxen_core.plugins import make_plugin_manager

pytestmark = pytest.mark.anyio

WAIT = 30


async def _next(events, kind: str, where=lambda event: True) -> dict:
    """The next event of ``kind`` that ``where`` accepts (bounded: WAIT seconds)."""
    with anyio.fail_after(WAIT):
        async for event in events:
            if event["type"] == kind and where(event):
                return event
    raise AssertionError(f"the stream ended before a {kind} event")


async def test_the_first_snapshot_waits_for_the_initial_load(kxen_home, ws):
    """Real demo server over stdio, started slowly: before the runtime is entered the snapshot says
    loading (never "no servers"); a snapshot asked while it starts returns once it is ready, with
    the status fields and the counts."""
    slow = {"command": "sh", "args": ["-c", f'sleep 1; exec "{sys.executable}" "{DEMO}"']}
    kxen_home.write_servers({"demo": demo_entry(), "slow": slow})
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))
    early = await rt.settings_snapshot(wait=0)
    assert (early["loading"], early["servers"]) == (True, [])

    got: dict = {}

    async def snapshot() -> None:
        got["snapshot"] = await rt.settings_snapshot(wait=WAIT)

    async with anyio.create_task_group() as tg:
        tg.start_soon(snapshot)
        await anyio.lowlevel.checkpoint()
        async with rt:
            with anyio.fail_after(WAIT + 5):
                while "snapshot" not in got:
                    await anyio.sleep(0.05)
            snap = got["snapshot"]
            assert snap["loading"] is False
            servers = {s["name"]: s for s in snap["servers"]}
            assert {n: s["state"] for n, s in servers.items()} == {"demo": "ready", "slow": "ready"}
            status = {s["name"]: s for s in rt.status()}
            assert servers["slow"]["tools"] == status["slow"]["tools"] > 0
            # the status entries, with stderr added: one source for status() and the Settings API
            assert set(servers["demo"]) == set(status["demo"]) | {"stderr"}
            assert snap["remote"] == {"enabled": False, "question": snap["remote"]["question"], "servers": []}
            assert snap["approvals"] == {"held": False, "pending": []}
            assert snap["logins"] == [] and snap["problems"] == []
            assert snap["seq"] >= 1


async def test_the_event_stream_is_bounded_when_nobody_reads(kxen_home, ws, fakes):
    """A subscriber that never reads holds at most its buffer; its next read says how many events
    it missed; a reader that reads gets every event in order."""
    fakes.add("f", tools={"echo": lambda a: text_result("x")})
    async with running(kxen_home, ws, servers={"f": mem("f", defaultToolPolicy="allow")}) as rt:
        idle = rt.settings_events(max_events=4)
        async with rt.settings_events(max_events=1000) as reader:
            for _ in range(10):
                await rt.restart("f")
                with anyio.fail_after(WAIT):
                    assert await rt.wait_ready()
            assert len(idle.buffer) <= 4
            first = idle.take()
            assert first is not None and first["type"] == "overflow" and first["missed"] > 4
            seqs = []
            while (event := reader.take()) is not None:
                seqs.append(event["seq"])
            assert len(seqs) > 10 and seqs == list(range(seqs[0], seqs[0] + len(seqs)))
            assert seqs[-1] == first["seq"]  # the overflow names the last event it missed
        idle.close()
        with pytest.raises(InvalidArguments, match="max_events"):
            rt.settings_events(max_events=0)


async def test_a_pending_launch_is_approved_from_the_api(kxen_home, ws):
    """A project demo server (real, stdio) waits for its launch approval; the API lists it (with
    its fingerprint and launch) and approving it starts exactly that launch."""
    write_project(ws, {"p": demo_entry()})
    trust(kxen_home.path, ws)
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))
    async with rt.hold_approvals(bound=WAIT) as held, rt:
        async with rt.settings_events() as events:
            snap = await rt.settings_snapshot(wait=WAIT)
            assert snap["loading"] is False  # a server waiting for a person is not loading
            assert status_of(rt, "p")["state"] == "awaiting_approval"
            (pending,) = snap["approvals"]["pending"]
            assert (pending["kind"], pending["server"]) == ("stdio_launch", "p")
            assert pending["fingerprint"] == status_of(rt, "p")["fingerprint"]
            assert pending["details"]["command"] == sys.executable and pending["choices"] == ["call"]
            with pytest.raises(InvalidArguments, match="remember must be one of: call"):
                rt.answer_approval(pending["id"], True, remember="always")
            rt.answer_approval(pending["id"], True)
            await _next(events, "approvals", lambda e: e["pending"] == [])  # answered: no longer listed
            with anyio.fail_after(WAIT):
                assert await rt.wait_ready()
        assert status_of(rt, "p")["state"] == "ready" and status_of(rt, "p")["tools"] > 0
        assert held.pending() == []
        with pytest.raises(InvalidArguments, match="is waiting"):
            rt.answer_approval(pending["id"], False)


async def test_a_held_approval_nobody_answers_is_denied(kxen_home, ws):
    write_project(ws, {"p": demo_entry()})
    trust(kxen_home.path, ws)
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))
    async with rt.hold_approvals(bound=0.5), rt:
        with anyio.fail_after(WAIT):
            assert await rt.wait_ready()
        s = status_of(rt, "p")
        assert s["state"] == "awaiting_approval" and "nobody answered within 0.5 s" in s["error"]
        assert rt.pending_approvals() == []
    with pytest.raises(InvalidArguments, match="not held"):
        rt.answer_approval("x", True)


async def _answer_ask_calls(rt: Runtime, name: str, arguments: dict) -> tuple[BaseException, dict, dict]:
    """Call ``name`` twice while approvals are held: deny the first from the API, allow the second;
    return what the waiting callers got and the second request as listed."""
    outcome: dict = {}

    async def call(key: str) -> None:
        try:
            outcome[key] = await rt.call_tool(name, arguments)
        except ApprovalDenied as exc:
            outcome[key] = exc

    async with rt.settings_events() as events, anyio.create_task_group() as tg:
        for key, approve in (("denied", False), ("allowed", True)):
            tg.start_soon(call, key)
            event = await _next(events, "approvals", lambda e: bool(e["pending"]))
            (pending,) = event["pending"]
            rt.answer_approval(pending["id"], approve)
            with anyio.fail_after(WAIT):
                while key not in outcome:
                    await anyio.sleep(0.02)
    return outcome["denied"], outcome["allowed"], pending


async def test_an_ask_call_is_answered_from_the_api_while_its_caller_waits(kxen_home, ws, fakes):
    fakes.add("f", tools={"echo": lambda a: text_result(a["text"])})
    kxen_home.write_servers({"f": mem("f", defaultToolPolicy="ask")})
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["memory"]))
    async with rt.hold_approvals(bound=WAIT), rt:
        await rt.settings_snapshot(wait=WAIT)
        denied, allowed, pending = await _answer_ask_calls(rt, "f__echo", {"text": "hi"})
    assert isinstance(denied, ApprovalDenied) and "denied" in str(denied)
    assert allowed["content"][0]["text"] == "hi"
    assert (pending["kind"], pending["server"]) == ("tool_call", "f")
    assert pending["details"]["arguments"] == {"text": "hi"}
    assert pending["choices"] == ["once", "call", "tool", "always"]


async def test_server_everything_ask_call_answered_from_the_api(kxen_home, ws, everything_js):
    """The twin over a real peer: server-everything over stdio, its echo tool asked for."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    kxen_home.write_servers({"ev": {"command": node, "args": [everything_js, "stdio"]}})
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))
    async with rt.hold_approvals(bound=WAIT), rt:
        snap = await rt.settings_snapshot(wait=60)
        assert snap["loading"] is False and snap["servers"][0]["tools"] > 0
        denied, allowed, pending = await _answer_ask_calls(rt, "ev__echo", {"message": "hi"})
    assert isinstance(denied, ApprovalDenied)
    assert "hi" in allowed["content"][0]["text"]
    assert pending["details"]["arguments"] == {"message": "hi"}


@pytest.mark.peer
async def test_remote_on_and_off_from_the_api(kxen_home, ws, peers):
    """Real SDK server on loopback: turning remote on waits in the held approvals with each remote
    server listed; approving it records the confirmation and the server comes; off, it goes."""
    url, kind = peers.sdk("stateful")
    kxen_home.write_settings(REMOTE_OFF)
    kxen_home.write_servers({"r": remote(url, kind)})
    pm = make_plugin_manager(allow=list(REMOTE_PLUGINS))
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=pm)
    async with rt.hold_approvals(bound=WAIT), rt:
        snap = await rt.settings_snapshot(wait=WAIT)
        assert snap["remote"]["enabled"] is False
        assert [(r["name"], r["host"], r["acknowledged"]) for r in snap["remote"]["servers"]] == [
            ("r", "127.0.0.1", False)  # nothing confirmed yet
        ]
        async with rt.settings_events() as events, anyio.create_task_group() as tg:
            tg.start_soon(rt.set_remote_enabled, True)
            (pending,) = (await _next(events, "approvals", lambda e: bool(e["pending"])))["pending"]
            assert pending["kind"] == "remote_enable"
            assert [s["url"] for s in pending["details"]["servers"]] == [url]
            rt.answer_approval(pending["id"], True)
            assert (await _next(events, "remote"))["enabled"] is True
        with anyio.fail_after(WAIT):
            assert await rt.wait_ready()
        snap = await rt.settings_snapshot(wait=WAIT)
        (entry,) = snap["servers"]
        assert (entry["state"], entry["tools"]) == ("ready", len(SDK_TOOLS))
        assert snap["remote"]["servers"][0]["acknowledged"] is True
        assert rt.config.settings.mcp.remote_acknowledged == [snap["remote"]["servers"][0]["key"]]

        with anyio.fail_after(WAIT):
            assert await rt.set_remote_enabled(False) is False
        snap = await rt.settings_snapshot(wait=WAIT)
        assert snap["remote"]["enabled"] is False and snap["servers"][0]["state"] == "disabled"


async def test_the_stderr_tail_is_escaped_and_has_secrets_scrubbed(kxen_home, ws):
    """A real demo server whose stderr carries its token and a terminal escape: the snapshot's
    ``stderr`` shows neither as is."""
    noisy = {
        "command": "sh",
        "args": ["-c", f'printf "token=%s \\033[31mred\\n" "$API_TOKEN" >&2; exec "{sys.executable}" "{DEMO}"'],
        "env": {"API_TOKEN": "s3cr3t-zzz-0123"},
    }
    kxen_home.write_servers({"noisy": noisy})
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))
    async with rt:
        with anyio.fail_after(WAIT):
            while True:  # until the line was drained from its stderr (bounded by the fail_after)
                snap = await rt.settings_snapshot(wait=WAIT)
                (entry,) = snap["servers"]
                if entry["stderr"] and "red" in entry["stderr"]:
                    break
                await anyio.sleep(0.05)
    assert "s3cr3t-zzz-0123" not in entry["stderr"] and "token=***" in entry["stderr"]
    assert "\x1b" not in entry["stderr"]


async def test_held_approvals_are_one_runtimes_and_come_before_the_channels(kxen_home, ws, fakes):
    """Two runtimes on one plugin manager with a channel that says no: the one holding approvals
    gets its call answered from the API; the other's call still goes to the channel."""
    from kxen_testing import Channel

    fakes.add("f", tools={"echo": lambda a: text_result(a["text"])})
    kxen_home.write_servers({"f": mem("f", defaultToolPolicy="ask")})
    no = Channel(approved=False, reason="the channel says no")
    pm = make_plugin_manager(allow=["memory"], extra=[no])
    holding = Runtime(home=kxen_home.path, workspace=ws, pm=pm)
    other = Runtime(home=kxen_home.path, workspace=ws, pm=pm)
    async with holding.hold_approvals(bound=WAIT), holding, other:
        with anyio.fail_after(WAIT):
            assert await holding.wait_ready() and await other.wait_ready()
        with pytest.raises(ApprovalDenied, match="the channel says no"):
            await other.call_tool("f__echo", {"text": "other"})
        _, allowed, _ = await _answer_ask_calls(holding, "f__echo", {"text": "held"})
    assert allowed["content"][0]["text"] == "held"
    assert [r.details["arguments"] for r in no.requests] == [{"text": "other"}]


async def test_a_sign_in_through_the_settings_api(kxen_home, ws, start_peer):
    """The real SDK server behind a Bearer gate: the snapshot shows it needs a sign-in and the next
    step; the login API starts and completes it; the event stream shows the server going ready;
    no token is in any snapshot or event."""
    import json

    from auth_support import Credentials, SignIn, assert_no_token, gated

    url = gated(start_peer, "stateful")
    creds = Credentials(first=None)
    sign_in = SignIn(creds)
    kxen_home.write_settings(remote_on(url))
    kxen_home.write_servers({"r": remote(url, "http")})
    rt = Runtime(
        home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=REMOTE_PLUGINS, extra=[creds, sign_in])
    )
    seen: list[dict] = []
    async with rt:
        snap = await rt.settings_snapshot(wait=WAIT)
        (entry,) = snap["servers"]
        assert (entry["state"], entry["next"]) == ("needs_login", "kxen mcp login r")
        async with rt.settings_events() as events:
            started = await rt.login_start("r")
            (flow,) = sign_in.flows
            flow.release.set()
            with anyio.fail_after(WAIT):
                async for event in events:
                    seen.append(event)
                    if event["type"] == "server" and event["server"]["state"] == "ready":
                        break
            assert rt.login_poll(started.flow_id).state == "complete"
            with anyio.fail_after(WAIT):  # the flow's end is published once its task finished
                while rt.logins()[-1]["state"] != "complete":
                    seen.append(await events.next())
        snap = await rt.settings_snapshot(wait=WAIT)
        assert snap["servers"][0]["state"] == "ready" and snap["servers"][0]["tools"] > 0
        assert snap["logins"] == [
            {"flowId": started.flow_id, "server": "r", "state": "complete", "reason": None, "notes": []}
        ]
    logins = [e["login"]["state"] for e in seen if e["type"] == "login"]
    assert logins[0] == "pending" and logins[-1] == "complete"
    assert_no_token("the Settings API", json.dumps([snap, *seen], default=str))


async def test_a_pending_launch_denied_from_the_api_never_runs(kxen_home, ws, tmp_path):
    marker = tmp_path / "ran"
    write_project(ws, {"p": {"command": "sh", "args": ["-c", f'touch "{marker}"']}})
    trust(kxen_home.path, ws)
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))
    async with rt.hold_approvals(bound=WAIT), rt:
        (pending,) = (await rt.settings_snapshot(wait=WAIT))["approvals"]["pending"]
        rt.answer_approval(pending["id"], False, reason="not this one")
        with anyio.fail_after(WAIT):
            assert await rt.wait_ready()
        s = status_of(rt, "p")
        assert s["state"] == "awaiting_approval" and "not approved (not this one)" in s["error"]
    assert not marker.exists()


async def test_a_host_that_asked_itself_confirms_remote_without_a_channel(kxen_home, ws, peers):
    """Real SDK server on loopback, no approval channel at all: turning remote on asks a channel and
    is denied (fail closed); with ``confirmed=True`` (a Settings page asked the person, per server)
    the named server is recorded and runs, and the one not named stays off with its next step."""
    url, kind = peers.sdk("stateful")
    other, other_kind = peers.sdk("stateless")
    kxen_home.write_settings(REMOTE_OFF)
    kxen_home.write_servers({"r": remote(url, kind), "s": remote(other, other_kind)})
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=list(REMOTE_PLUGINS)))
    async with rt:
        with pytest.raises(ApprovalDenied, match="remote MCP stays off"):
            await rt.set_remote_enabled(True)
        assert "remote_acknowledged" not in (kxen_home.path / "config.toml").read_text()
        with anyio.fail_after(WAIT):
            assert await rt.set_remote_enabled(True, acknowledge=["r"], confirmed=True) is True
            await rt.wait_ready()
        snap = await rt.settings_snapshot(wait=WAIT)
        states = {s["name"]: (s["state"], s["next"]) for s in snap["servers"]}
        assert states["r"] == ("ready", None)
        assert states["s"][0] == "disabled" and "kxen remote on" in states["s"][1]
        keys = {r["name"]: r["key"] for r in snap["remote"]["servers"]}
        assert rt.config.settings.mcp.remote_acknowledged == [keys["r"]]
        assert snap["remote"]["question"].startswith("do you know who operates it")
        with anyio.fail_after(WAIT):
            await rt.acknowledge_remote(["s"], confirmed=True)
            await rt.wait_ready()
        assert status_of(rt, "s")["state"] == "ready"


async def test_a_refused_reload_keeps_its_problems_until_a_good_one(kxen_home, ws):
    """Real demo server: a reload of a broken user mcp.json is refused, the server keeps running,
    and ``problems`` (snapshot and a ``problems`` event) names the file, key path and rule until a
    reload succeeds."""
    from kxen_core.errors import ConfigError

    kxen_home.write_servers({"demo": demo_entry()})
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))
    async with rt:
        with anyio.fail_after(WAIT):
            assert await rt.wait_ready()
        pid = status_of(rt, "demo")["transportInfo"]["pid"]
        kxen_home.write_servers({"demo": {**demo_entry(), "enabled": "yes"}})
        async with rt.settings_events() as events:
            with pytest.raises(ConfigError):
                await rt.reload()
            event = await _next(events, "problems")
        (problem,) = event["problems"]
        assert "mcp.json" in problem and "demo.enabled" in problem
        snap = await rt.settings_snapshot(wait=WAIT)
        assert snap["problems"] == [problem]
        assert status_of(rt, "demo")["state"] == "ready" and status_of(rt, "demo")["transportInfo"]["pid"] == pid
        kxen_home.write_servers({"demo": demo_entry()})
        async with rt.settings_events() as events:
            await rt.reload()
            assert (await _next(events, "problems"))["problems"] == []
        assert (await rt.settings_snapshot(wait=WAIT))["problems"] == []

"""The Settings page's API over real HTTP (``kxen_settings_web.serve`` on 127.0.0.1, httpx): an
``ask`` call that waits for its answer on the page and gets what the agent would get, approvals
answered and refused, a refused reload that lists its problems while the servers keep running,
and the live stream's bounds (at most MAX_STREAMS at once; a stream nobody reads holds a bounded
buffer, and still renders the current state when it is read again)."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from kxen_settings_web.app import MAX_STREAMS
from page_http import WAIT, Page, Stream, demo_entry, pid_of, served, state, states, write_project

from kxen_core import Runtime
from kxen_core.config.trust import trust
from kxen_core.errors import ConfigError
from kxen_core.plugins import make_plugin_manager

pytestmark = pytest.mark.anyio


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path.resolve()


class Caller:
    """POST /api/call in the background: ``answer`` once the page answered."""

    def __init__(self, page: Page, tool: str, arguments: dict[str, Any]) -> None:
        self.page, self.body = page, {"tool": tool, "arguments": arguments}
        self.answer: httpx.Response | None = None

    async def run(self) -> None:
        self.answer = await self.page.post("/api/call", self.body)

    async def result(self) -> dict[str, Any]:
        with anyio.fail_after(WAIT):
            while self.answer is None:
                await anyio.sleep(0.02)
        assert self.answer.status_code == 200, self.answer.text
        return self.answer.json()


async def test_an_ask_call_waits_on_the_page_and_gets_the_answer_the_agent_would(kxen_home, ws):
    """The demo server (real, stdio) with every tool ``ask``, and a project server whose launch
    waits: each approval is listed, refused answers change nothing, and the waiting call gets the
    denial (an error result, as the agent sees it) or the result."""
    kxen_home.write_servers({"demo": demo_entry(defaultToolPolicy="ask")})
    write_project(ws, {"p": demo_entry()})
    trust(kxen_home.path, ws)
    files = [kxen_home.path / "config.toml", kxen_home.path / "mcp.json", ws / ".kxen" / "mcp.json"]
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))
    async with served(rt) as page:
        snap = await page.until("p's launch waiting", lambda s: bool(s["approvals"]["pending"]))
        (launch,) = snap["approvals"]["pending"]
        assert (launch["kind"], launch["server"], launch["choices"]) == ("stdio_launch", "p", ["call"])

        async def refused(path: str, body: Any, status: int, says: str) -> None:
            before = await state(rt, files)
            answer = await page.post(path, body)
            assert (answer.status_code, says in answer.json()["error"]) == (status, True), answer.text
            assert await state(rt, files) == before, f"{path} {body}: something changed"

        await refused(f"/api/approvals/{launch['id']}", {"approved": True, "remember": "always"}, 400, "one of: call")
        await refused("/api/approvals/0123456789abcdef", {"approved": True}, 400, "is waiting")
        await refused("/api/approvals/" + "x" * 300, {"approved": False}, 400, "is waiting")
        assert (await page.post(f"/api/approvals/{launch['id']}", {"approved": True, "remember": "call"})).json() == {
            "ok": True
        }
        await page.until("p ready", lambda s: states(s).get("p") == "ready" and not s["approvals"]["pending"])
        await refused(f"/api/approvals/{launch['id']}", {"approved": True}, 400, "is waiting")  # answered already

        async with anyio.create_task_group() as tg:
            # denied: the call answers with the denial, as the agent gets it (a host's own agent
            # call, answered on the page the same way, gets the same text)
            denied = Caller(page, "demo__echo", {"text": "hi"})
            tg.start_soon(denied.run)
            snap = await page.until("the call's approval", lambda s: bool(s["approvals"]["pending"]))
            (ask,) = snap["approvals"]["pending"]
            assert (ask["kind"], ask["server"]) == ("tool_call", "demo")
            assert ask["details"]["arguments"] == {"text": "hi"} and ask["details"]["tool"] == "echo"
            assert ask["choices"] == ["once", "call", "tool", "always"]
            assert denied.answer is None  # it waits
            listed = (await page.get("/")).text
            assert f'data-approval="{ask["id"]}"' in listed and "Allow this tool (this run)" in listed
            await refused("/api/approvals/0123456789abcdef", {"approved": False}, 400, "is waiting")
            await refused(f"/api/approvals/{ask['id']}", {"approved": True, "remember": "forever"}, 400, "one of:")
            await refused(f"/api/approvals/{ask['id']}", {"approved": "no"}, 400, "true or false")
            assert denied.answer is None  # still waiting
            assert (await page.post(f"/api/approvals/{ask['id']}", {"approved": False})).status_code == 200
            got = await denied.result()
            assert got["isError"] is True and "demo__echo was not run" in got["text"], got

            host: dict[str, Any] = {}

            async def host_agent() -> None:
                host["out"] = await rt.agent_call("demo__echo", {"text": "hi"})

            tg.start_soon(host_agent)
            (ask,) = (await page.until("the host's call", lambda s: bool(s["approvals"]["pending"])))["approvals"][
                "pending"
            ]
            assert (await page.post(f"/api/approvals/{ask['id']}", {"approved": False})).status_code == 200
            with anyio.fail_after(WAIT):
                while "out" not in host:
                    await anyio.sleep(0.02)
            assert (host["out"].text, host["out"].is_error) == (got["text"], True)

            # allowed once: the result; the next call asks again
            allowed = Caller(page, "demo__echo", {"text": "hello"})
            tg.start_soon(allowed.run)
            (ask,) = (await page.until("the next approval", lambda s: bool(s["approvals"]["pending"])))["approvals"][
                "pending"
            ]
            assert (await page.post(f"/api/approvals/{ask['id']}", {"approved": True, "remember": "once"})).json() == {
                "ok": True
            }
            got = await allowed.result()
            assert (got["isError"], got["text"]) == (False, "hello"), got

            # allowed for this tool (this run): the call after it does not ask
            first = Caller(page, "demo__echo", {"text": "one"})
            tg.start_soon(first.run)
            (ask,) = (await page.until("the third approval", lambda s: bool(s["approvals"]["pending"])))["approvals"][
                "pending"
            ]
            assert (
                await page.post(f"/api/approvals/{ask['id']}", {"approved": True, "remember": "tool"})
            ).status_code == 200
            assert (await first.result())["text"] == "one"
        again = await page.post("/api/call", {"tool": "demo__echo", "arguments": {"text": "two"}})
        assert again.json()["text"] == "two"
        assert (await page.snapshot())["approvals"]["pending"] == []


async def test_a_refused_reload_lists_its_problems_and_the_servers_keep_running(kxen_home, ws):
    kxen_home.write_servers({"demo": demo_entry(defaultToolPolicy="allow")})
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))
    async with served(rt) as page, page.stream() as stream:
        snap = await page.until("demo ready", lambda s: states(s) == {"demo": "ready"})
        pid = pid_of(snap, "demo")
        user_file = kxen_home.path / "mcp.json"
        user_file.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "demo": {**demo_entry(defaultToolPolicy="allow"), "timeouts": {"requestSeconds": "soon"}},
                        "other": {"command": 5},
                    }
                }
            )
        )
        refused = await page.post("/api/reload")
        assert refused.status_code == 409, refused.text
        body = refused.json()
        assert "invalid configuration" in body["error"]
        problems = body["problems"]
        assert len(problems) >= 2, problems
        for key_path in ("mcpServers.demo.timeouts.requestSeconds", "mcpServers.other.command"):
            (line,) = [p for p in problems if f": {key_path}" in p]
            file, path, rule = line.split(": ", 2)
            assert (file, path) == (str(user_file), key_path) and rule, line  # file, key path, rule
        snap = await page.snapshot()
        assert snap["problems"] == problems
        assert states(snap) == {"demo": "ready"} and pid_of(snap, "demo") == pid  # it kept running
        assert (await page.post("/api/call", {"tool": "demo__echo", "arguments": {"text": "up"}})).json()[
            "text"
        ] == "up"
        shown = await stream.until("the problems", lambda p: "mcpServers.other.command" in p.get("problems", ""))
        assert 'data-testid="problems"' in shown["problems"] and "was not applied" in shown["problems"]

        user_file.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "demo": demo_entry(defaultToolPolicy="allow"),
                        "second": demo_entry(defaultToolPolicy="allow"),
                    }
                }
            )
        )
        assert (await page.post("/api/reload")).json() == {"ok": True}
        snap = await page.until("second ready", lambda s: states(s) == {"demo": "ready", "second": "ready"})
        assert snap["problems"] == [] and pid_of(snap, "demo") == pid
        await stream.until("no problem", lambda p: "Every config file was read and applied" in p.get("problems", ""))


async def test_actions_on_what_is_not_there_are_refused_and_change_nothing(kxen_home, ws):
    kxen_home.write_servers({"demo": demo_entry()})
    files = [kxen_home.path / "config.toml", kxen_home.path / "mcp.json"]
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))
    async with served(rt) as page:
        await page.until("demo ready", lambda s: states(s) == {"demo": "ready"})
        for path, body, status, says in [
            ("/api/servers/nope/restart", {}, 404, "nope"),
            ("/api/servers/demo/explode", {}, 404, "no action 'explode'"),
            ("/api/servers/nope/login", {}, 404, "nope"),
            ("/api/servers/demo/login", {}, 409, "sign in"),  # a stdio server: nothing signs in to it
            ("/api/logins/login-1-000000000000/cancel", {}, 400, "login-1-000000000000"),
            ("/api/remote/acknowledge", {"names": []}, 400, "tick at least one"),
            ("/api/remote/acknowledge", {"names": ["demo"]}, 409, "not configured remote servers: demo"),
            ("/api/remote", {"enabled": True, "acknowledge": ["nope"]}, 409, "not configured remote servers: nope"),
            ("/api/call", {"tool": "demo__echo", "arguments": []}, 400, "must be a JSON object"),
            ("/api/call", {"arguments": {}}, 400, "tool: must be a string"),
            ("/api/pins/demo/accept", {"tool": "echo"}, 400, "digest: must be a string"),
            ("/api/pins/demo/accept", {"tool": "echo", "digest": "0" * 64}, 400, "waits for no acceptance"),
            ("/api/pins/nope/accept", {"tool": "echo", "digest": "0" * 64}, 404, "nope"),
            ("/api/nothing-here", {}, 404, ""),
        ]:
            before = await state(rt, files)
            answer = await page.post(path, body)
            assert answer.status_code == status, (path, body, answer.status_code, answer.text)
            if says:
                assert says in answer.json()["error"] + " ".join(answer.json().get("problems", [])), answer.text
            assert await state(rt, files) == before, f"{path} {body}: something changed"
        unknown = await page.post("/api/call", {"tool": "nope__x", "arguments": {}})
        assert unknown.status_code == 200 and unknown.json()["isError"] is True  # the agent's view of it


async def test_at_most_max_streams_at_once(kxen_home, ws):
    kxen_home.write_servers({"demo": demo_entry()})
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))
    async with served(rt) as page:
        await page.until("demo ready", lambda s: states(s) == {"demo": "ready"})
        async with AsyncExitStack() as streams:
            opened = [await streams.enter_async_context(page.stream()) for _ in range(MAX_STREAMS)]
            for stream in opened:
                assert stream.status == 200
                await stream.until("the servers", lambda p: "servers" in p)
            one_more = await page.get("/events", headers={"accept": "text/event-stream"})
            assert one_more.status_code == 429 and f"at most {MAX_STREAMS}" in one_more.json()["error"]
            assert (await page.get("/api/snapshot")).status_code == 200  # the rest of the page still answers
        # the streams closed: their places are free again (the page notices a leaving reader)
        with anyio.fail_after(WAIT):
            while len(rt._events.subscribers) > 0:
                await anyio.sleep(0.02)
        async with page.stream() as stream:
            assert stream.status == 200
            await stream.until("the servers", lambda p: "Ready" in p.get("servers", ""))


async def test_a_stream_nobody_reads_holds_a_bounded_buffer_and_still_shows_the_current_state(kxen_home, ws):
    """The page's stream reads the core's subscription with a bounded buffer: while its reader
    does not read, a burst of changes overflows it (the core's overflow path: the buffer is
    emptied and counted), and once read again the stream renders a fresh snapshot."""
    user_file = kxen_home.path / "mcp.json"
    kxen_home.write_servers({"demo": demo_entry()})
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))
    async with served(rt) as page:
        await page.until("demo ready", lambda s: states(s) == {"demo": "ready"})
        headers = {"cookie": page.cookie, "accept": "text/event-stream"}
        async with page.client.stream("GET", "/events", headers=headers, timeout=httpx.Timeout(WAIT, read=None)) as r:
            assert r.status_code == 200
            with anyio.fail_after(WAIT):
                while len(rt._events.subscribers) < 1:
                    await anyio.sleep(0.02)
            (sub,) = rt._events.subscribers
            assert sub.max_events == 64
            # a burst while nobody reads: every refused reload is one event, published at once
            user_file.write_text('{"mcpServers": {"demo": {"command": 5}}}')
            for _ in range(10 * sub.max_events):
                try:
                    await rt.reload()
                except ConfigError as exc:  # each one published as a problems event
                    assert "mcpServers.demo.command" in str(exc)
            assert len(sub.buffer) <= sub.max_events and sub.missed > 0  # bounded: the rest was counted
            # the state now: the file fixed, a server added
            user_file.write_text(json.dumps({"mcpServers": {"demo": demo_entry(), "late": demo_entry()}}))
            await rt.reload()
            assert len(sub.buffer) <= sub.max_events
            stream = Stream()
            with anyio.fail_after(WAIT):
                async for chunk in r.aiter_raw():
                    stream.feed(chunk)
                    parts = stream.parts
                    if 'data-server="late"' in parts.get("servers", "") and "Every config file" in parts.get(
                        "problems", ""
                    ):
                        break
            assert len(stream.events) >= 1


RUG = Path(__file__).resolve().parents[3] / "tests" / "peers" / "rug_pull_server.py"


async def test_accept_takes_only_the_definition_the_page_showed(kxen_home, ws, tmp_path):
    """The rug-pull server (real, stdio) changes echo twice: the page's "Accept" carries the
    digest of the definition it showed, so the second change is not accepted under the first."""
    import sys

    pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK (a dev dependency) is not installed")
    state_file = tmp_path / "rug.json"
    state_file.write_text(json.dumps({"description": "Echo the text back."}))
    entry = {"command": sys.executable, "args": [str(RUG), "stdio", "--state", str(state_file)],
             "pinning": "hold", "defaultToolPolicy": "allow", "protocolEra": "legacy"}  # fmt: skip
    kxen_home.write_servers({"rug": entry})
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"]))
    async with served(rt) as page:
        await page.until("rug ready", lambda s: states(s) == {"rug": "ready"})
        await rt.call_tool("rug__flip", {"text": "First change."})
        snap = await page.until("echo held", lambda s: [p["tool"] for p in s["pins"]] == ["echo"])
        assert snap["pins"][0]["held"] is True and snap["pins"][0]["state"] == "changed"
        shown = rt.pin_diff("rug", "echo")["listed"]
        await rt.call_tool("rug__flip", {"text": "Second change."})
        with anyio.fail_after(WAIT):
            while rt.pin_diff("rug", "echo")["listed"] == shown:
                await anyio.sleep(0.02)
        stale = await page.post("/api/pins/rug/accept", {"tool": "echo", "digest": shown})
        assert stale.status_code == 400 and "now waits with definition" in stale.json()["error"], stale.text
        assert "rug__echo" not in {t["qualifiedName"] for t in rt.tools()}
        current = rt.pin_diff("rug", "echo")["listed"]
        done = await page.post("/api/pins/rug/accept", {"tool": "echo", "digest": current})
        assert done.json() == {"ok": True, "accepted": ["echo"]}
        await page.until("nothing held", lambda s: s["pins"] == [])
        assert (await rt.call_tool("rug__echo", {"text": "hi"}))["content"][0]["text"] == "hi"

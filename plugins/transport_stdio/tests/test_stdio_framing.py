"""Framing: newline-delimited JSON on stdout; junk and oversized lines are diagnostics; stderr is bounded."""

from __future__ import annotations

import sys

import anyio
import pytest
from kxen_testing import running
from kxen_transport_stdio import StdioTransport
from kxen_transport_stdio.framing import LineReader
from kxen_transport_stdio.transport import STDERR_TAIL_BYTES
from stdio_support import HELPER_ARGV, STDIO, context, helper, wait_state

from kxen_core.config import ServerConfig
from kxen_core.errors import ClosedError, ProtocolError
from kxen_core.protocol.session import Session

pytestmark = pytest.mark.anyio


def test_stdio_config_accepts_options(kxen_home, workspace):
    from kxen_core.config import load_config
    from kxen_core.config.converter import make_converter
    from kxen_core.plugins.manager import make_plugin_manager

    kxen_home.write_servers({"h": helper(transport="stdio", options={"maxLineBytes": 1024})})
    pm = make_plugin_manager()
    server = load_config(None, workspace, pm=pm).servers["h"]
    assert server.kind == "stdio" and server.options == {"maxLineBytes": 1024}
    # the options reach the transport structured by the registry, as the Runtime hands them over
    options = pm.transports.options_for(server, make_converter())
    assert StdioTransport(server, context(server, workspace, options=options)).max_line_bytes == 1024


async def test_junk_and_oversized_lines_are_diagnostics(kxen_home, workspace):
    entry = helper("--startup-noise", transport="stdio", options={"maxLineBytes": 1024})
    async with running(kxen_home, workspace, servers={"h": entry}, allow=STDIO) as rt:
        st = rt.servers["h"]
        assert st.state == "ready", st.snapshot()
        with anyio.fail_after(10):
            # 5000 bytes: oversized inside one chunk; 600 KiB: oversized across many chunks
            for size in (5000, 600 * 1024):
                result = await rt.call_tool("noise", {"size": size}, server="h")
                assert result["content"][0]["text"] == "after noise"
            result = await rt.call_tool("echo", {"text": "still alive"}, server="h")
        assert result["content"][0]["text"] == "still alive"
        assert st.state == "ready"
        diags = list(st.diagnostics)
    assert any("starting up (not JSON)" in d for d in diags), diags
    assert any("non-JSON" in d and "print() debugging output" in d for d in diags), diags
    assert any("{broken json" in d for d in diags), diags
    assert sum("longer than 1024 bytes" in d for d in diags) == 2, diags
    assert all(len(d) < 400 for d in diags), diags  # a junk line is shown truncated


async def test_too_deeply_nested_line_is_a_diagnostic(tmp_path):
    diags: list[str] = []
    server = ServerConfig(name="s", command=sys.executable, args=HELPER_ARGV)
    with anyio.fail_after(15):
        async with StdioTransport(server, context(server, tmp_path, diagnostic=diags.append)) as stream:
            async with Session(stream, server="s", request_timeout=10) as s:
                await s.initialize()
                result = await s.request("tools/call", {"name": "noise", "arguments": {"size": 10, "deep": True}})
                assert result["content"][0]["text"] == "after noise"
                result = await s.request("tools/call", {"name": "echo", "arguments": {"text": "ok"}})
                assert result["content"][0]["text"] == "ok"
    assert any("nested too deeply" in d for d in diags), diags


@pytest.mark.parametrize("id_last", [False, True])
async def test_a_reply_too_deeply_nested_fails_its_request_at_once(tmp_path, id_last):
    """Not left to its timeout (120 s here): the id at the reply's top level names the request."""
    diags: list[str] = []
    server = ServerConfig(name="s", command=sys.executable, args=HELPER_ARGV)
    with anyio.fail_after(30):
        async with StdioTransport(server, context(server, tmp_path, diagnostic=diags.append)) as stream:
            async with Session(stream, server="s", request_timeout=120) as s:
                await s.initialize()
                with pytest.raises(ProtocolError, match="nested too deeply"):
                    await s.request("tools/call", {"name": "deep_reply", "arguments": {"id_last": id_last}})
                result = await s.request("tools/call", {"name": "echo", "arguments": {"text": "ok"}})
                assert result["content"][0]["text"] == "ok"  # the session goes on
    assert any("nested too deeply" in d for d in diags), diags


def test_the_id_of_a_deep_line_is_found_only_at_its_top_level():
    from kxen_transport_stdio.framing import deep_reply_id

    deep = b"[" * 5000 + b"]" * 5000
    assert deep_reply_id(b'{"jsonrpc":"2.0","id":12,"result":' + deep + b"}") == 12
    assert deep_reply_id(b'{"result":' + deep + b',"id":-4}') == -4
    assert deep_reply_id(b'{"result":' + deep + b"}") is None
    assert deep_reply_id(b'{"result":{"id":5,"x":' + deep + b"}}") is None  # nested, not the reply's
    assert deep_reply_id(b'{"id":"abc","result":' + deep + b"}") is None  # kxen's ids are integers
    assert deep_reply_id(b'{"id":' + b"9" * 40 + b',"result":' + deep + b"}") is None  # not an id of ours


async def test_large_messages_pass_under_the_default_bound(kxen_home, workspace):
    async with running(kxen_home, workspace, servers={"h": helper()}, allow=STDIO) as rt:
        with anyio.fail_after(20):
            result = await rt.call_tool("big", {"size": 8 * 1024 * 1024}, server="h")
            assert len(result["content"][0]["text"]) == 8 * 1024 * 1024
            text = "z" * 300_000 + "\u00e9\u4e2d\U0001f600"  # a >64 KiB request line, non-ASCII
            result = await rt.call_tool("echo", {"text": text}, server="h")
            assert result["content"][0]["text"] == text


async def test_lone_surrogate_in_arguments_is_still_sent(kxen_home, workspace):
    async with running(kxen_home, workspace, servers={"h": helper()}, allow=STDIO) as rt:
        with anyio.fail_after(10):
            result = await rt.call_tool("echo", {"text": "a\ud800b"}, server="h")
    assert result["content"][0]["text"] == "a\ud800b"


class _Fake:
    """Collects the line splitter's diagnostics (it runs without a process)."""

    def __init__(self) -> None:
        self.diags: list[str] = []


def _splitter(max_line: int = 100) -> tuple[LineReader, _Fake]:
    fake = _Fake()
    return LineReader(max_line, fake.diags.append), fake


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 10_000])
def test_splitter_any_chunking(chunk):
    msgs = [{"i": i, "t": "x" * (i * 13 % 90)} for i in range(40)]
    data = b"".join(
        (b'{"i":%d,"t":"%s"}' % (m["i"], m["t"].encode())) + (b"\r\n" if m["i"] % 3 else b"\n") for m in msgs
    )
    data += b"not json\n" + b"{" + b"y" * 200 + b"}\n" + b"\n\n" + b'{"last":true}\n'
    s, fake = _splitter(100)
    for i in range(0, len(data), chunk):
        s.feed(data[i : i + chunk])
    assert list(s.ready) == msgs + [{"last": True}]
    assert len(fake.diags) == 2 and "non-JSON" in fake.diags[0] and "longer than 100" in fake.diags[1]
    assert not s._skipping


def test_splitter_memory_stays_bounded_inside_an_oversized_line():
    s, fake = _splitter(1000)
    for _ in range(1000):
        s.feed(b"q" * 4096)
    assert s._skipping and sum(map(len, s._parts)) <= 1000
    s.feed(b"tail\n{}\n")
    assert list(s.ready) == [{}] and fake.diags == ["stdout line longer than 1000 bytes skipped"]


def test_splitter_exact_bound_is_kept():
    s, fake = _splitter(10)
    s.feed(b'"12345678"\n"123456789"\n')
    assert list(s.ready) == ["12345678"] and len(fake.diags) == 1


async def test_stderr_tail_is_bounded_and_in_the_failure_reason(kxen_home, workspace):
    async with running(kxen_home, workspace, servers={"h": helper("--stderr", "booting\n")}, allow=STDIO) as rt:
        st = rt.servers["h"]
        stream = st.session._stream
        with anyio.fail_after(10):
            await rt.call_tool("stderr_flood", {"kib": 512}, server="h")
            assert stream._t._stderr_size <= 2 * STDERR_TAIL_BYTES
            with pytest.raises(ClosedError) as info:
                await rt.call_tool("die", {"code": 7, "message": "FATAL-MARKER: disk on fire"}, server="h")
            await wait_state(st, "failed")
        assert len(stream.describe()["stderr"]) <= 2000
        state = (st.state, st.phase, st.error)
    message = str(info.value)
    assert "exited with code 7" in message and "FATAL-MARKER: disk on fire" in message, message
    assert len(message) < 1000
    assert state[:2] == ("failed", "transport")
    assert "FATAL-MARKER" in state[2] and "code 7" in state[2], state


async def test_stderr_output_is_not_an_error(kxen_home, workspace):
    servers = {"h": helper("--stderr", "WARNING: all is fine\n")}
    async with running(kxen_home, workspace, servers=servers, allow=STDIO) as rt:
        with anyio.fail_after(10):
            await rt.call_tool("stderr_flood", {"kib": 64}, server="h")
            result = await rt.call_tool("echo", {"text": "x"}, server="h")
        assert rt.servers["h"].state == "ready" and result["content"][0]["text"] == "x"


async def test_exit_at_startup_reports_code_and_stderr(kxen_home, workspace):
    entry = {"command": "sh", "args": ["-c", "echo 'no config found' >&2; exit 4"], "defaultToolPolicy": "allow"}
    async with running(kxen_home, workspace, servers={"h": entry}, allow=STDIO) as rt:
        st = rt.status()[0]
    assert (st["state"], st["phase"]) == ("failed", "initialize")
    assert "code 4" in st["error"] and "no config found" in st["error"], st["error"]


async def test_status_shows_the_stderr_tail_of_a_running_server(kxen_home, workspace):

    servers = {"h": helper("--stderr", "STDERR-MARKER ready\n")}
    async with running(kxen_home, workspace, servers=servers, allow=STDIO) as rt:
        with anyio.fail_after(5):
            await rt.call_tool("echo", {"text": "x"}, server="h")
            while "STDERR-MARKER" not in rt.servers["h"].session._stream.describe()["stderr"]:
                await anyio.sleep(0.01)
        snapshot = rt.status()[0]
    assert "STDERR-MARKER" in snapshot["transportInfo"]["stderr"], snapshot
    assert isinstance(snapshot["transportInfo"]["pid"], int)


async def test_last_line_without_newline_then_exit(tmp_path):
    reply = '{"jsonrpc":"2.0","id":1,"result":{}}'
    server = ServerConfig(name="s", command="sh", args=["-c", f"printf '%s' '{reply}'; echo bye >&2"])
    with anyio.fail_after(5):
        async with StdioTransport(server, context(server, tmp_path)) as stream:
            assert await stream.receive() == {"jsonrpc": "2.0", "id": 1, "result": {}}
            with pytest.raises(ClosedError, match="exited with code 0; stderr: bye"):
                await stream.receive()
            with pytest.raises(ClosedError):  # and it stays closed
                await stream.receive()


async def test_many_concurrent_calls(kxen_home, workspace):
    async with running(kxen_home, workspace, servers={"h": helper()}, allow=STDIO) as rt:
        results: dict[int, str] = {}

        async def one(i: int) -> None:
            r = await rt.call_tool("echo", {"text": f"{i}:" + "w" * (i * 997)}, server="h")
            results[i] = r["content"][0]["text"]

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for i in range(100):
                    tg.start_soon(one, i)
    assert results == {i: f"{i}:" + "w" * (i * 997) for i in range(100)}


try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    given = None

if given is not None:
    _json = st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
        max_leaves=10,
    )
    _line = st.one_of(
        _json.map(lambda v: ("msg", v)),
        st.binary(max_size=60).filter(lambda b: b"\n" not in b).map(lambda b: ("junk", b)),
        st.integers(200, 400).map(lambda n: ("big", n)),
    )

    @settings(max_examples=200, deadline=None)
    @given(st.lists(_line, max_size=30), st.lists(st.integers(1, 50), min_size=1, max_size=20), st.booleans())
    def test_splitter_property(lines, cuts, crlf):
        import json as _j

        bound = 150
        data = b""
        expected = []
        for kind, value in lines:
            if kind == "msg":
                raw = _j.dumps(value, separators=(",", ":")).encode()
                if len(raw) + crlf <= bound:  # the bound counts every byte before the newline
                    expected.append(value)
            elif kind == "junk":
                raw = value
                try:
                    expected.append(_j.loads(raw)) if raw.strip() else None
                except (ValueError, RecursionError):
                    pass
            else:
                raw = b"[" + b"1," * value + b"1]"
            data += raw + (b"\r\n" if crlf else b"\n")
        s, _ = _splitter(bound)
        i = 0
        for n in cuts * (len(data) // sum(cuts) + 1):
            if i >= len(data):
                break
            s.feed(data[i : i + n])
            i += n
        assert list(s.ready) == expected
        assert s._held <= bound and not s._parts

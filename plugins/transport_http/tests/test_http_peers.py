"""Streamable HTTP against real servers: the official Python SDK (three modes) and server-everything."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from kxen_testing import returned_by_receive
from kxen_transport_http.streamable import open_streamable_http

from kxen_core.config.models import ServerConfig
from kxen_core.errors import ClosedError
from kxen_core.protocol.session import Session
from kxen_core.transport import TransportContext

pytestmark = [pytest.mark.anyio, pytest.mark.peer]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the real peers run on asyncio only; the mock tests cover trio too


LIMIT = 20  # seconds for any one scenario


def _server(url: str) -> ServerConfig:
    return ServerConfig(name="t", url=url, transport="http")


@pytest.mark.parametrize("mode", ["stateful", "json", "stateless"])
async def test_python_sdk(sdk_peer, mode: str) -> None:
    url = sdk_peer(mode)
    diagnostics: list[str] = []
    context = TransportContext(workspace=Path.cwd(), diagnostic=diagnostics.append)
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(_server(url), context) as stream:
            async with Session(stream, server="t") as session:
                init = await session.initialize()
                assert init.protocol_version == "2025-11-25"
                assert init.server_info["name"] == "kxen-sdk-peer"
                tools = {t["name"] for t in (await session.request("tools/list"))["tools"]}
                assert {"add", "echo", "boom"} <= tools

                added = await session.request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
                assert added["structuredContent"] == {"result": 5}
                assert not added.get("isError")
                echoed = await session.request("tools/call", {"name": "echo", "arguments": {"text": "hé 👋"}})
                assert echoed["content"][0]["text"] == "hé 👋"
                failed = await session.request("tools/call", {"name": "boom", "arguments": {}})
                assert failed["isError"] is True

                # several requests in flight at once, each answered on its own POST
                results: dict[int, int] = {}

                async def call(i: int) -> None:
                    r = await session.request("tools/call", {"name": "add", "arguments": {"a": i, "b": i}})
                    results[i] = r["structuredContent"]["result"]

                async with anyio.create_task_group() as tg:
                    for i in range(8):
                        tg.start_soon(call, i)
                assert results == {i: 2 * i for i in range(8)}

                facts = stream.describe()
                assert facts["session"] is (mode != "stateless")
                assert facts["protocolVersion"] == "2025-11-25"
    assert not [d for d in diagnostics if "rejected" in d or "refused" in d], diagnostics


async def test_python_sdk_resumes_a_closed_answer_stream(sdk_peer) -> None:
    """The SDK closes the POST stream (``close_sse_stream``) and replays the answer on GET + Last-Event-ID."""
    url = sdk_peer("resumable")
    context = TransportContext(workspace=Path.cwd())
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(_server(url), context) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                result = await session.request("tools/call", {"name": "poll", "arguments": {}})
                assert result["content"][0]["text"] == "resumed"
                assert stream.describe()["resumes"] >= 1
                added = await session.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})
                assert added["structuredContent"] == {"result": 2}


async def test_python_sdk_expired_session_closes_the_transport(sdk_peer) -> None:
    """After the session idles out the SDK answers 404: kxen closes with ClosedError("session expired")."""
    url = sdk_peer("idle")
    context = TransportContext(workspace=Path.cwd())
    # no GET stream: an open GET stream could keep the session from idling out
    server = ServerConfig(name="t", url=url, transport="http", options={"getStream": False})
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server, context) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                await session.request("tools/list")
                await anyio.sleep(2.5)
                with pytest.raises(ClosedError, match="session expired"):
                    await session.request("tools/list")
            assert "session expired" in stream.describe()["closed"]


async def test_everything_streamable_http(everything_peer) -> None:
    port = everything_peer("streamableHttp")
    notes: list[str] = []
    context = TransportContext(workspace=Path.cwd())
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(_server(f"http://127.0.0.1:{port}/mcp"), context) as stream:
            async with Session(stream, server="t", on_notification=lambda m, p: notes.append(m)) as session:
                init = await session.initialize()
                assert init.protocol_version == "2025-11-25"
                tools = {t["name"] for t in (await session.request("tools/list"))["tools"]}
                assert {"echo", "get-sum", "get-structured-content"} <= tools
                echoed = await session.request("tools/call", {"name": "echo", "arguments": {"message": "hi"}})
                assert "hi" in echoed["content"][0]["text"]
                summed = await session.request("tools/call", {"name": "get-sum", "arguments": {"a": 2, "b": 40}})
                assert "42" in summed["content"][0]["text"]
                structured = await session.request(
                    "tools/call", {"name": "get-structured-content", "arguments": {"location": "New York"}}
                )
                assert isinstance(structured["structuredContent"], dict)
                missing = await session.request("tools/call", {"name": "nope", "arguments": {}})
                assert missing["isError"] is True
                assert stream.describe()["session"] is True


@pytest.mark.parametrize("peer", ["sdk-stateful", "sdk-json", "everything"])
async def test_answers_are_pushed_to_the_session(request: pytest.FixtureRequest, peer: str) -> None:
    """The twin of test_http_push against real servers: every answer (JSON body or SSE stream)
    reaches its caller pushed by the stream; the session's reader gets nothing from ``receive``.
    (Each case asks only for its own peer's fixture: the SDK cases need no node.)"""
    if peer == "everything":
        port = request.getfixturevalue("everything_peer")("streamableHttp")
        url, call = f"http://127.0.0.1:{port}/mcp", ("echo", {"message": "hi"})
    else:
        url, call = request.getfixturevalue("sdk_peer")(peer.removeprefix("sdk-")), ("echo", {"text": "hi"})
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(_server(url), TransportContext(workspace=Path.cwd())) as stream:
            returned = returned_by_receive(stream)
            async with Session(stream, server="t") as session:
                await session.initialize()
                assert (await session.request("tools/list"))["tools"]
                async with anyio.create_task_group() as tg:
                    for _ in range(4):
                        tg.start_soon(session.request, "tools/call", {"name": call[0], "arguments": call[1]})
                echoed = await session.request("tools/call", {"name": call[0], "arguments": call[1]})
                assert "hi" in echoed["content"][0]["text"]
                assert stream.describe()["received"] >= 7
    assert returned == []

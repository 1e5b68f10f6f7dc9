"""Legacy HTTP+SSE against real servers: the official Python SDK and server-everything."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from kxen_testing import returned_by_receive
from kxen_transport_sse.legacy import open_legacy_sse

from kxen_core.config.models import ServerConfig
from kxen_core.protocol.session import Session
from kxen_core.transport import TransportContext

pytestmark = [pytest.mark.anyio, pytest.mark.peer]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the real peers run on asyncio only; the mock tests cover trio too


LIMIT = 20


def _server(url: str) -> ServerConfig:
    return ServerConfig(name="t", url=url, transport="sse")


async def test_python_sdk_sse(sdk_peer) -> None:
    url = sdk_peer("sse")
    diagnostics: list[str] = []
    with anyio.fail_after(LIMIT):
        async with open_legacy_sse(
            _server(url), TransportContext(workspace=Path.cwd(), diagnostic=diagnostics.append)
        ) as stream:
            assert stream.describe()["endpoint"].endswith("/messages/")
            async with Session(stream, server="t") as session:
                init = await session.initialize()
                assert init.server_info["name"] == "kxen-sdk-peer"
                tools = {t["name"] for t in (await session.request("tools/list"))["tools"]}
                assert {"add", "echo", "boom"} <= tools
                added = await session.request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
                assert added["structuredContent"] == {"result": 5}
                echoed = await session.request("tools/call", {"name": "echo", "arguments": {"text": "hé"}})
                assert echoed["content"][0]["text"] == "hé"
                failed = await session.request("tools/call", {"name": "boom", "arguments": {}})
                assert failed["isError"] is True

                results: dict[int, int] = {}

                async def call(i: int) -> None:
                    r = await session.request("tools/call", {"name": "add", "arguments": {"a": i, "b": 1}})
                    results[i] = r["structuredContent"]["result"]

                async with anyio.create_task_group() as tg:
                    for i in range(8):
                        tg.start_soon(call, i)
                assert results == {i: i + 1 for i in range(8)}
    assert diagnostics == []


async def test_everything_sse(everything_peer) -> None:
    port = everything_peer("sse")
    with anyio.fail_after(LIMIT):
        async with open_legacy_sse(
            _server(f"http://127.0.0.1:{port}/sse"), TransportContext(workspace=Path.cwd())
        ) as stream:
            async with Session(stream, server="t") as session:
                init = await session.initialize()
                assert init.protocol_version == "2025-11-25"
                tools = {t["name"] for t in (await session.request("tools/list"))["tools"]}
                assert {"echo", "get-sum"} <= tools
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


async def test_python_sdk_sse_answers_are_pushed_to_the_session(sdk_peer) -> None:
    """Answers arrive on the SSE stream and are pushed to the session as they are read: the
    session's reader gets nothing from ``receive``."""
    with anyio.fail_after(LIMIT):
        async with open_legacy_sse(_server(sdk_peer("sse")), TransportContext(workspace=Path.cwd())) as stream:
            returned = returned_by_receive(stream)
            async with Session(stream, server="t") as session:
                await session.initialize()
                added = await session.request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
                assert added["structuredContent"] == {"result": 5}
                assert stream.describe()["received"] >= 2
    assert returned == []

"""The HTTP stream hands messages to the session as they arrive (``set_receiver``): in order,
after whatever waited in the queue; a ``RequestFailed`` still goes through the queue, so the
session takes it before it learns that the failure ended the transport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from kxen_testing import returned_by_receive
from kxen_transport_http.options import HttpOptions
from kxen_transport_http.plumbing import HttpMessageStream
from kxen_transport_http.streamable import open_streamable_http
from test_http_mock import LIMIT, App

from kxen_core import RequestFailed
from kxen_core.config.models import ServerConfig
from kxen_core.errors import ClosedError, ProtocolError
from kxen_core.protocol.session import Session
from kxen_core.transport import TransportContext

pytestmark = pytest.mark.anyio


@pytest.fixture
async def stream() -> AsyncIterator[HttpMessageStream]:
    """The stream's skeleton alone (no task group, no requests: only the queue and the push)."""
    server = ServerConfig(name="t", url="http://mock.test/mcp", transport="http")
    async with httpx.AsyncClient() as client:
        s = HttpMessageStream(server, TransportContext(workspace=Path.cwd()), client, None, HttpOptions(queueSize=8))  # type: ignore[arg-type]
        try:
            yield s
        finally:
            s._feed.close()
            s._inbox.close()


async def test_queued_messages_are_pushed_first_then_each_new_one(stream: HttpMessageStream) -> None:
    await stream.deliver({"id": 1})
    await stream.deliver({"id": 2})
    pushed: list[Any] = []
    assert stream.set_receiver(pushed.append) is True
    assert pushed == []  # setting the receiver hands nothing over by itself
    await stream.deliver({"id": 3})
    assert pushed == [{"id": 1}, {"id": 2}, {"id": 3}]
    await stream.deliver({"id": 4})
    assert pushed[-1] == {"id": 4} and len(pushed) == 4
    assert stream.received == 4
    with pytest.raises(anyio.WouldBlock):
        stream._inbox.receive_nowait()  # nothing was left behind in the queue


async def test_a_request_failure_waits_in_the_queue_for_the_reader(stream: HttpMessageStream) -> None:
    pushed: list[Any] = []
    stream.set_receiver(pushed.append)
    failed = RequestFailed(7, ProtocolError("lost", server="t"))
    await stream.deliver(failed)
    assert pushed == []
    with anyio.fail_after(LIMIT):
        assert await stream.receive() is failed
    # a message after it still comes after it: the next delivery takes the queue first
    await stream.deliver(RequestFailed(8, ProtocolError("lost", server="t")))
    await stream.deliver({"id": 9})
    assert [type(m).__name__ for m in pushed] == ["RequestFailed", "dict"] and pushed[1] == {"id": 9}


async def test_stopping_the_push_queues_again_and_a_failed_stream_drops(stream: HttpMessageStream) -> None:
    pushed: list[Any] = []
    stream.set_receiver(pushed.append)
    await stream.deliver({"id": 1})
    assert stream.set_receiver(None) is True
    await stream.deliver({"id": 2})
    assert pushed == [{"id": 1}]
    with anyio.fail_after(LIMIT):
        assert await stream.receive() == {"id": 2}
    stream.set_receiver(pushed.append)
    stream.fail(ClosedError("gone", server="t"))
    await stream.deliver({"id": 3})  # after the failure nobody takes anything
    assert pushed == [{"id": 1}]
    with anyio.fail_after(LIMIT), pytest.raises(ClosedError, match="gone"):
        await stream.receive()


async def test_the_session_gets_its_answers_pushed_and_the_reader_only_the_end() -> None:
    """Over a whole Session: every answer reaches its caller without ``receive`` returning it;
    a request the transport fails (an answer that is not JSON-RPC) fails alone, and in order."""

    class Garbled(App):
        async def call(self, rid, method, params, request):
            if params and params.get("name") == "garbled":
                return httpx.Response(200, headers={"content-type": "application/json"}, content=b"{not json")
            return await super().call(rid, method, params, request)

    with anyio.fail_after(LIMIT):
        async with open_streamable_http(
            ServerConfig(name="t", url="http://mock.test/mcp", transport="http"),
            TransportContext(workspace=Path.cwd()),
            http_transport=httpx.MockTransport(Garbled()),
        ) as stream:
            returned = returned_by_receive(stream)
            async with Session(stream, server="t") as session:
                await session.initialize()
                answers = [await session.request("tools/call", {"name": "x", "arguments": {"i": i}}) for i in range(5)]
                with pytest.raises(ProtocolError, match="not JSON-RPC"):
                    await session.request("tools/call", {"name": "garbled"})
                assert (await session.request("tools/list")) == {"tools": []}
    assert [a["content"][0]["text"] for a in answers] == ["ok"] * 5
    assert [type(m).__name__ for m in returned] == ["RequestFailed"], returned  # the answers were all pushed

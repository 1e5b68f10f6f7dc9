"""A server floods the client with requests on the GET stream: past the 32 served at once each costs
O(1) (the replies are POSTs, which cannot go out without waiting: a bounded few refusals, the rest
dropped and counted), and closing stays quick.

The refusal bound is on refusals *in flight*: each waits at most ``REFUSAL_SEND_SECONDS`` (1 s), then
its slot takes the next one. So how many of the flood are refused depends on how long the client takes
to read it (on a loaded machine more than 1 s: 32 more refusals per second). The test holds every wait
open for its whole life (the refusal wait and the request timeout past its own 60 s bound), so the
counts are exact whatever the machine's speed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest
from kxen_transport_http.streamable import open_streamable_http

import kxen_core.protocol.serving
from kxen_core.config.models import ServerConfig
from kxen_core.protocol.session import MAX_REFUSALS_IN_FLIGHT, MAX_SERVER_REQUESTS_IN_FLIGHT, Session
from kxen_core.transport import TransportContext

pytestmark = pytest.mark.anyio

FLOOD = 20_000
LONGER_THAN_THE_TEST = 600.0  # seconds: no wait of the client ends while the test runs (fail_after(60))
INIT = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "flood"}}


class Flood(httpx.AsyncByteStream):
    """``FLOOD`` ping requests as SSE events, in network-sized chunks, then it hangs until closed."""

    def __init__(self) -> None:
        self.closed = anyio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        events = b"".join(b'data: {"jsonrpc":"2.0","id":%d,"method":"ping"}\n\n' % i for i in range(FLOOD))
        for i in range(0, len(events), 16 * 1024):
            yield events[i : i + 16 * 1024]
        await self.closed.wait()

    async def aclose(self) -> None:
        self.closed.set()


class App:
    def __init__(self) -> None:
        self.replies = 0
        self.release = anyio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Flood())
        if request.method == "DELETE":
            return httpx.Response(200)
        body = json.loads(request.content)
        if "method" not in body:  # a reply of ours: the server is slow to take it
            self.replies += 1
            await self.release.wait()
            return httpx.Response(202)
        if "id" not in body:
            return httpx.Response(202)
        answer = {"jsonrpc": "2.0", "id": body["id"], "result": INIT if body["method"] == "initialize" else {}}
        return httpx.Response(200, headers={"content-type": "application/json"}, json=answer)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_request_flood_on_the_get_stream_is_bounded_and_closes_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    # a refusal's slot must not come free mid-flood (the count would depend on the machine's speed)
    monkeypatch.setattr(kxen_core.protocol.serving, "REFUSAL_SEND_SECONDS", LONGER_THAN_THE_TEST)
    app = App()
    server = ServerConfig(name="t", url="http://mock.test/mcp", transport="http")
    context = TransportContext(workspace=Path.cwd(), diagnostic=lambda m: None)
    most_tasks = 0
    with anyio.fail_after(60):
        async with open_streamable_http(server, context, http_transport=httpx.MockTransport(app)) as stream:
            # nor a served request's reply (bounded by the request timeout)
            async with Session(stream, server="t", request_timeout=LONGER_THAN_THE_TEST) as session:
                await session.initialize()
                while session.refused_requests + session.dropped_requests < FLOOD - MAX_SERVER_REQUESTS_IN_FLIGHT:
                    most_tasks = max(most_tasks, len(asyncio.all_tasks()))
                    await anyio.sleep(0.01)
                assert session._server_requests == MAX_SERVER_REQUESTS_IN_FLIGHT  # the served ones, no more
                assert await session.request("ping") == {}  # still serving its own requests
                closing = time.monotonic()
        took = time.monotonic() - closing
    limit = MAX_SERVER_REQUESTS_IN_FLIGHT + MAX_REFUSALS_IN_FLIGHT + 30
    assert most_tasks < limit, most_tasks  # not a task per request
    # the refusals that must wait: a bounded few, all still waiting; the rest dropped and counted
    assert session.refused_requests == MAX_REFUSALS_IN_FLIGHT, session.refused_requests
    assert session.dropped_requests == FLOOD - MAX_SERVER_REQUESTS_IN_FLIGHT - MAX_REFUSALS_IN_FLIGHT
    assert took < 5, took  # bounded steps, not one per flooded request

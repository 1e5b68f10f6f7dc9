"""kxen_transport_http.plumbing, the public HTTP API both transports share: unit by unit."""

from __future__ import annotations

import ast
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from kxen_transport_http import plumbing
from kxen_transport_http.options import HttpOptions, SseOptions
from kxen_transport_http.plumbing import (
    MessageTooLarge,
    Redactor,
    SseCursor,
    SseFollower,
    check_event_stream,
    map_errors,
    transport_options,
)

from kxen_core import ServerConfig, TransportContext
from kxen_core.errors import ClosedError, ConfigError, ConnectError, ProtocolError

LIMIT = 10
SRC = Path(__file__).parents[1] / "src" / "kxen_transport_http"
SECRET = "Bearer plumb-s3cret-1"


def test_every_module_stays_small_and_plumbing_is_the_public_surface() -> None:
    for module in SRC.rglob("*.py"):
        assert len(module.read_text().splitlines()) < 400, module
    assert "public API" in (plumbing.__doc__ or "")
    assert all(hasattr(plumbing, name) for name in plumbing.__all__)
    # the transport's rooms import the shared code through the public module, not its parts
    for module in SRC.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("plumbing._"), (module, node.module)


# --- errors at the boundary -----------------------------------------------------------------------


def _redactor() -> Redactor:
    redact = Redactor()
    redact.remember([SECRET])
    return redact


@pytest.mark.parametrize(
    "raised, expected",
    [
        (httpx.ConnectError(f"no route with {SECRET}"), ConnectError),
        (httpx.ConnectTimeout("slow"), ConnectError),
        (httpx.ReadError(f"reset, token {SECRET.split()[1]}"), ClosedError),
        (httpx.RemoteProtocolError("garbage"), ProtocolError),
        (ValueError("anything else"), ProtocolError),
    ],
)
def test_map_errors_maps_once_with_redacted_text_and_no_chain(raised: Exception, expected: type) -> None:
    with pytest.raises(expected) as err:
        with map_errors("POST http://x.test/mcp", _redactor(), "srv"):
            raise raised
    text = str(err.value)
    assert text.startswith(f"POST http://x.test/mcp: {type(raised).__name__}")
    assert "plumb-s3cret-1" not in text and err.value.server == "srv"
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_map_errors_lets_kxen_errors_and_cancellation_through() -> None:
    mine = MessageTooLarge("body over 10 bytes")
    with pytest.raises(MessageTooLarge) as err:
        with map_errors("GET", _redactor(), "srv"):
            raise mine
    assert err.value is mine
    with pytest.raises(KeyboardInterrupt):
        with map_errors("GET", _redactor(), "srv"):
            raise KeyboardInterrupt


# --- options ------------------------------------------------------------------------------------------


def _context(options: Any = None) -> TransportContext:
    return TransportContext(workspace=Path.cwd(), options=options)


def test_transport_options_prefers_the_context_then_the_host_converter() -> None:
    given = HttpOptions(queueSize=3)
    server = ServerConfig(name="t", url="http://x.test/mcp", transport="http", options={"queueSize": 9})
    assert transport_options(server, _context(given), HttpOptions) is given
    assert transport_options(server, _context(), HttpOptions) == HttpOptions(queueSize=9)
    bare = ServerConfig(name="t", url="http://x.test/sse", transport="sse")
    assert transport_options(bare, _context(), SseOptions) == SseOptions()
    bad = ServerConfig(name="t", url="http://x.test/sse", transport="sse", options={"queueSize": 0})
    with pytest.raises(
        ConfigError, match=r"mcpServers\.t\.options\.queueSize: queueSize must be an integer from 1 to 65536"
    ):
        transport_options(bad, _context(), SseOptions)


# --- the SSE follower -----------------------------------------------------------------------------


class Body(httpx.AsyncByteStream):
    """A streamed body (not read into memory up front, as ``content=`` would be)."""

    def __init__(self, data: bytes) -> None:
        self.chunks = [data]

    def __aiter__(self) -> Body:
        return self

    async def __anext__(self) -> bytes:
        if not self.chunks:
            raise StopAsyncIteration
        return self.chunks.pop(0)


class Server:
    """Answers GET /events from a script: one ``(status, body)`` per connection, the last repeated."""

    def __init__(self, *script: tuple[int, bytes]) -> None:
        self.script = list(script)
        self.last_ids: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.last_ids.append(request.headers.get("last-event-id"))
        status, body = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        ctype = "text/event-stream" if status == 200 else "text/plain"
        return httpx.Response(status, headers={"content-type": ctype}, stream=Body(body))


def event(rid: int, id_: str = "", retry: int | None = None) -> bytes:
    lines = [f"id: {id_}"] if id_ else []
    if retry is not None:
        lines.append(f"retry: {retry}")
    lines.append("data: " + json.dumps({"jsonrpc": "2.0", "id": rid, "result": {}}))
    return ("\n".join(lines) + "\n\n").encode()


async def follow(server: Server, attempts: int, **kwargs: Any) -> tuple[plumbing.FollowEnd, list[int], list[str]]:
    seen: list[int] = []
    diagnostics: list[str] = []

    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as client:

        @asynccontextmanager
        async def connect(cursor: SseCursor) -> AsyncIterator[httpx.Response]:
            headers = {"last-event-id": cursor.last_id} if cursor.last_id else {}
            async with client.stream("GET", "http://x.test/events", headers=headers) as response:
                check_event_stream(response)
                yield response

        async def on_event(ev: Any) -> bool:
            seen.append(json.loads(ev.data)["id"])
            return seen[-1] == 99

        follower = SseFollower(
            limit=4096, redact=Redactor(), diag=diagnostics.append, attempts=attempts, default_retry_ms=0
        )
        with anyio.fail_after(LIMIT):
            end = await follower.follow(connect, SseCursor(), on_event, label="test stream", **kwargs)
    return end, seen, diagnostics


@pytest.mark.anyio
async def test_follower_reconnects_a_bounded_number_of_times() -> None:
    end, seen, diagnostics = await follow(Server((200, b""), (500, b"down")), attempts=2)
    assert not end.done and end.attempts == 2 and "HTTP 500" in end.reason
    assert seen == [] and len(diagnostics) == 2 and "reconnecting (2 of 2)" in diagnostics[-1]


@pytest.mark.anyio
async def test_follower_resumes_from_the_last_event_id_and_progress_restores_the_count() -> None:
    server = Server((200, event(1, "a", retry=0)), (200, event(2, "b")), (200, event(3, "c")), (200, event(99, "d")))
    end, seen, _ = await follow(server, attempts=1)
    assert end.done and end.attempts == 3 and seen == [1, 2, 3, 99]
    assert server.last_ids == [None, "a", "b", "c"]


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 404, 405])
async def test_follower_does_not_retry_a_stream_the_server_does_not_offer(status: int) -> None:
    end, _, diagnostics = await follow(Server((status, b"")), attempts=3)
    assert end.unsupported == status and end.attempts == 0 and diagnostics == []


@pytest.mark.anyio
async def test_follower_needs_an_event_id_to_resume_an_answer() -> None:
    end, _, _ = await follow(Server((200, event(1))), attempts=3, dropped="ended", need_event_id=True)
    assert not end.resumable and end.attempts == 0


@pytest.mark.anyio
async def test_an_oversized_event_is_a_drop_like_any_other() -> None:
    big = b"data: " + b"x" * 5000 + b"\n\n"
    end, _, _ = await follow(Server((200, big)), attempts=0)
    assert isinstance(end.error, MessageTooLarge) and "over 4096 bytes" in end.reason

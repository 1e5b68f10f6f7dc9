"""Hostile bodies on every HTTP path: compression bombs, encodings not asked for, JSON nested too
deeply. Bounds count decoded bytes, a compressed chunk is inflated piece by piece, and one bad
answer fails that request (or is a diagnostic), never the connection.

Servers are scripted in process (``httpx.MockTransport``); memory is measured with tracemalloc.
"""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest
from kxen_transport_http.plumbing import DECODE_CHUNK, Inflater, SseParser
from kxen_transport_http.streamable import open_streamable_http
from kxen_transport_sse.legacy import open_legacy_sse

from kxen_core.config.models import ServerConfig
from kxen_core.errors import HTTPStatusError, ProtocolError, RemoteError
from kxen_core.protocol.session import Session
from kxen_core.transport import TransportContext

pytestmark = pytest.mark.anyio

LIMIT = 20
MiB = 2**20
#: maxMessageBytes in these tests
MAX = 1 * MiB
#: a bomb inflates to this much (its compressed size is about a thousandth of it)
BOMB = 64 * MiB
#: what reading a bomb may cost at most, in traced bytes (the old readers took a whole chunk's worth)
BOUND = 12 * MiB
INIT = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "hostile"}}
DEEP = "[" * 200_000 + "]" * 200_000

_bombs: dict[tuple[bytes, bytes, str], bytes] = {}


def compress(data_parts: list[bytes] | bytes, coding: str = "gzip") -> bytes:
    wbits = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS, "raw-deflate": -zlib.MAX_WBITS}[coding]
    c = zlib.compressobj(9, zlib.DEFLATED, wbits)
    parts = [data_parts] if isinstance(data_parts, bytes) else data_parts
    return b"".join(c.compress(p) for p in parts) + c.flush()


def bomb(prefix: bytes, filler: bytes = b" ", coding: str = "gzip") -> bytes:
    """``prefix`` and then ``BOMB`` bytes of ``filler``, compressed (made once per module)."""
    key = (prefix, filler, coding)
    if key not in _bombs:
        block = filler * MiB
        _bombs[key] = compress([prefix] + [block] * (BOMB // MiB), coding)
    return _bombs[key]


class Chunks(httpx.AsyncByteStream):
    """A body sent in network-sized pieces, then ends or hangs until closed."""

    def __init__(self, data: bytes, size: int = 16 * 1024, hang: bool = False) -> None:
        self.data, self.size, self.hang = data, size, hang
        self.closed = anyio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for i in range(0, len(self.data), self.size):
            yield self.data[i : i + self.size]
        if self.hang:
            await self.closed.wait()

    async def aclose(self) -> None:
        self.closed.set()


def result(rid: Any, value: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": value}).encode()


Answer = Callable[[Any, str], Awaitable[httpx.Response]]


class App:
    """Streamable HTTP: initialize and notifications are answered plainly; ``answer`` makes the
    answer to every other request; ``get`` the GET stream (405 by default)."""

    def __init__(self, answer: Answer, get: Callable[[], httpx.Response] | None = None) -> None:
        self.answer = answer
        self.get = get
        self.accept_encoding: list[str] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.accept_encoding.append(request.headers.get("accept-encoding", ""))
        if request.method == "GET":
            return self.get() if self.get is not None else httpx.Response(405)
        if request.method == "DELETE":
            return httpx.Response(200, headers={"content-encoding": "gzip"}, stream=Chunks(bomb(b"")))
        body = json.loads(request.content)
        if "id" not in body:
            return httpx.Response(202)
        if body["method"] == "initialize":
            return httpx.Response(
                200,
                headers={"mcp-session-id": "s1", "content-type": "application/json"},
                content=result(body["id"], INIT),
            )
        return await self.answer(body["id"], body["method"])


def server(kind: str = "http", url: str = "http://mock.test/mcp") -> ServerConfig:
    return ServerConfig(name="t", url=url, transport=kind, options={"maxMessageBytes": MAX})


def context(diagnostics: list[str]) -> TransportContext:
    return TransportContext(workspace=Path.cwd(), diagnostic=diagnostics.append)


class Peak:
    """Traced memory growth while the block runs."""

    def __enter__(self) -> Peak:
        tracemalloc.start()
        self.base = tracemalloc.get_traced_memory()[0]
        return self

    def __exit__(self, *exc: Any) -> None:
        self.growth = tracemalloc.get_traced_memory()[1] - self.base
        tracemalloc.stop()


def gzip_json(rid: Any) -> httpx.Response:
    return httpx.Response(
        200, headers={"content-type": "application/json", "content-encoding": "gzip"}, stream=Chunks(bomb(b""))
    )


def sse_headers(coding: str = "gzip") -> dict[str, str]:
    return {"content-type": "text/event-stream", "content-encoding": coding}


def ok_answer(rid: Any) -> httpx.Response:
    return httpx.Response(200, content=result(rid, {"tools": []}), headers={"content-type": "application/json"})


async def run_bombed(answer_for: Callable[[Any], httpx.Response], diagnostics: list[str]) -> BaseException:
    """Initialize, send ``tools/call`` (answered by ``answer_for``), then prove the session lives."""

    async def answer(rid: Any, method: str) -> httpx.Response:
        return answer_for(rid) if method == "tools/call" else ok_answer(rid)

    app = App(answer)
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(
            server(), context(diagnostics), http_transport=httpx.MockTransport(app)
        ) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                with pytest.raises(Exception) as caught:
                    await session.request("tools/call", {"name": "x"})
                assert await session.request("tools/list") == {"tools": []}  # the connection lives on
    assert set(app.accept_encoding) == {"gzip, deflate"}
    return caught.value


@pytest.mark.parametrize(
    "answer_for",
    [
        pytest.param(gzip_json, id="json-body"),
        pytest.param(
            lambda rid: httpx.Response(200, headers=sse_headers(), stream=Chunks(bomb(b"data: "))), id="sse-answer"
        ),
        pytest.param(
            lambda rid: httpx.Response(
                200, headers=sse_headers("deflate"), stream=Chunks(bomb(b"data: ", coding="deflate"))
            ),
            id="sse-answer-deflate",
        ),
    ],
)
async def test_a_compression_bomb_answer_fails_its_request_within_the_decoded_bound(answer_for) -> None:
    diagnostics: list[str] = []
    with Peak() as peak:
        error = await run_bombed(answer_for, diagnostics)
    assert isinstance(error, ProtocolError) and "too large" in str(error), error
    assert peak.growth < BOUND, f"{peak.growth / MiB:.1f} MiB"


async def test_a_compression_bomb_error_body_is_read_only_to_its_bound() -> None:
    def failing(rid: Any) -> httpx.Response:
        return httpx.Response(500, headers={"content-encoding": "gzip"}, stream=Chunks(bomb(b"")))

    with Peak() as peak:
        error = await run_bombed(failing, [])
    assert isinstance(error, HTTPStatusError) and error.status == 500
    assert peak.growth < BOUND, f"{peak.growth / MiB:.1f} MiB"


@pytest.mark.parametrize("coding", ["br", "zstd", "gzip, gzip", "compress"])
async def test_an_encoding_not_asked_for_fails_its_request_only(coding: str) -> None:
    def odd(rid: Any) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "application/json", "content-encoding": coding}, stream=Chunks(b"{}")
        )

    error = await run_bombed(odd, [])
    assert isinstance(error, ProtocolError) and "cannot be decoded" in str(error) and "Content-Encoding" in str(error)


async def test_corrupt_compressed_data_fails_its_request_only() -> None:
    def corrupt(rid: Any) -> httpx.Response:
        data = bytearray(compress(result(rid, {"ok": True})))
        data[12:20] = b"\xff" * 8
        return httpx.Response(
            200, headers={"content-type": "application/json", "content-encoding": "gzip"}, stream=Chunks(bytes(data))
        )

    error = await run_bombed(corrupt, [])
    assert isinstance(error, ProtocolError) and "corrupt" in str(error)


async def test_a_deeply_nested_json_answer_fails_its_request_only() -> None:
    def deep(rid: Any) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "application/json"}, content=DEEP.encode())

    error = await run_bombed(deep, [])
    assert isinstance(error, ProtocolError) and "nested too deeply" in str(error)


async def test_a_deeply_nested_sse_event_is_a_diagnostic_and_the_answer_still_comes() -> None:
    diagnostics: list[str] = []

    async def answer(rid: Any, method: str) -> httpx.Response:
        body = b"data: " + DEEP.encode() + b"\n\n" + b"data: " + result(rid, {"deep": False}) + b"\n\n"
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Chunks(body))

    with anyio.fail_after(LIMIT):
        async with open_streamable_http(
            server(), context(diagnostics), http_transport=httpx.MockTransport(App(answer))
        ) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                assert await session.request("tools/call") == {"deep": False}
    assert any("nested too deeply" in d for d in diagnostics), diagnostics


@pytest.mark.parametrize("coding", ["gzip", "deflate", "raw-deflate"])
async def test_compressed_answers_within_the_bound_are_read_whole(coding: str) -> None:
    header = "deflate" if coding == "raw-deflate" else coding
    big = {"pad": "x" * (MAX // 2)}

    async def answer(rid: Any, method: str) -> httpx.Response:
        if method == "tools/list":
            data = compress(result(rid, big), coding)
            return httpx.Response(
                200, headers={"content-type": "application/json", "content-encoding": header}, stream=Chunks(data, 1000)
            )
        events = b"id: 1\r\ndata: \r\n\r\n: a comment\r\ndata: " + result(rid, {"sse": True}) + b"\r\n\r\n"
        return httpx.Response(200, headers=sse_headers(header), stream=Chunks(compress(events, coding), 7))

    with anyio.fail_after(LIMIT):
        async with open_streamable_http(
            server(), context([]), http_transport=httpx.MockTransport(App(answer))
        ) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                assert await session.request("tools/list") == big
                assert await session.request("tools/call") == {"sse": True}


async def test_a_compression_bomb_on_the_get_stream_closes_only_the_get_stream() -> None:
    diagnostics: list[str] = []

    def get() -> httpx.Response:
        return httpx.Response(200, headers=sse_headers(), stream=Chunks(bomb(b"data: ")))

    async def answer(rid: Any, method: str) -> httpx.Response:
        return ok_answer(rid)

    with Peak() as peak:
        with anyio.fail_after(LIMIT):
            async with open_streamable_http(
                server(), context(diagnostics), http_transport=httpx.MockTransport(App(answer, get))
            ) as stream:
                async with Session(stream, server="t") as session:
                    await session.initialize()
                    while not any("GET stream" in d and "over" in d for d in diagnostics):
                        await anyio.sleep(0.01)
                    assert await session.request("tools/list") == {"tools": []}
    assert peak.growth < BOUND, f"{peak.growth / MiB:.1f} MiB"


async def test_a_compression_bomb_on_the_legacy_sse_stream_closes_it_within_the_bound() -> None:
    diagnostics: list[str] = []
    endpoint = b"event: endpoint\ndata: /messages\n\n"

    async def app(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, headers=sse_headers(), stream=Chunks(bomb(endpoint + b"event: message\ndata: ")))
        return httpx.Response(202)

    with Peak() as peak:
        with anyio.fail_after(LIMIT):
            async with open_legacy_sse(
                server("sse", "http://mock.test/sse"), context(diagnostics), http_transport=httpx.MockTransport(app)
            ) as stream:
                with pytest.raises(Exception, match="over"):
                    while True:
                        await stream.receive()
    assert peak.growth < BOUND, f"{peak.growth / MiB:.1f} MiB"


async def test_a_deeply_nested_legacy_sse_message_is_a_diagnostic() -> None:
    diagnostics: list[str] = []
    body = (
        b"event: endpoint\ndata: /messages\n\n"
        + b"event: message\ndata: "
        + DEEP.encode()
        + b"\n\n"
        + b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/ok"}\n\n'
    )

    async def app(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Chunks(body, hang=True))
        return httpx.Response(202)

    with anyio.fail_after(LIMIT):
        async with open_legacy_sse(
            server("sse", "http://mock.test/sse"), context(diagnostics), http_transport=httpx.MockTransport(app)
        ) as stream:
            assert (await stream.receive())["method"] == "notifications/ok"
    assert any("nested too deeply" in d for d in diagnostics), diagnostics


# --- the pieces -------------------------------------------------------------------------------


def test_one_compressed_chunk_is_inflated_in_bounded_pieces() -> None:
    data = gzip.compress(b"\0" * (16 * MiB))
    inflater = Inflater("gzip")
    sizes = [len(p) for p in inflater.feed(data)]
    assert max(sizes) <= DECODE_CHUNK and sum(sizes) + len(inflater.flush()) == 16 * MiB


def test_the_sse_parser_bounds_what_one_event_keeps_not_what_it_skips() -> None:
    parser = SseParser(limit=1024)
    for _ in range(100):  # comments keep nothing: a long keep-alive stream is fine
        assert parser.feed(b": keep-alive " + b"x" * 100 + b"\n") == []
    events = parser.feed(b"id: 7\rdata: a\r\ndata: b\n\n")
    assert [(e.id, e.data) for e in events] == [("7", "a\nb")]
    assert parser.feed(b"data: c\r") == [] and [e.data for e in parser.feed(b"\n\r\n")] == ["c"]
    with pytest.raises(ProtocolError, match="over 1024"):
        for _ in range(20):
            parser.feed(b"data: " + b"y" * 100 + b"\n")
    with pytest.raises(ProtocolError, match="over 1024"):
        SseParser(limit=1024).feed(b"data: " + b"z" * 2000)


# --- over a real socket -----------------------------------------------------------------------


async def _serve_one(conn: Any) -> None:
    """A hostile Streamable HTTP server on 127.0.0.1, one request per connection: ``tools/call``
    is answered with a gzip bomb as a chunked SSE stream; everything else plainly."""
    async with conn:
        buf = b""
        try:
            with anyio.fail_after(LIMIT):
                while b"\r\n\r\n" not in buf:
                    buf += await conn.receive()
                head, _, body = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method = lines[0].split(" ")[0]
                length = next(
                    (int(v) for k, _, v in (ln.partition(":") for ln in lines[1:]) if k.lower() == "content-length"), 0
                )
                while len(body) < length:
                    body += await conn.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return
        plain = "HTTP/1.1 {} X\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n"
        try:
            if method != "POST":
                await conn.send(plain.format(405 if method == "GET" else 200, 0).encode())
                return
            message = json.loads(body)
            if "id" not in message:
                await conn.send(plain.format(202, 0).encode())
                return
            if message["method"] == "tools/call":
                await conn.send(
                    b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/event-stream\r\n"
                    b"Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
                )
                data = bomb(b"data: ")
                for i in range(0, len(data), 32 * 1024):
                    chunk = data[i : i + 32 * 1024]
                    await conn.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                await conn.send(b"0\r\n\r\n")
                return
            answer = result(message["id"], INIT if message["method"] == "initialize" else {"tools": []})
            await conn.send(plain.format(200, len(answer)).encode() + answer)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return


async def test_a_compression_bomb_over_a_real_socket_fails_its_request_within_the_bound() -> None:
    bomb(b"data: ")  # made before measuring
    diagnostics: list[str] = []
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, _serve_one)
        with Peak() as peak, anyio.fail_after(LIMIT):
            url = f"http://127.0.0.1:{port}/mcp"
            async with open_streamable_http(server(url=url), context(diagnostics)) as stream:
                async with Session(stream, server="t") as session:
                    await session.initialize()
                    with pytest.raises(ProtocolError, match="too large"):
                        await session.request("tools/call", {"name": "x"})
                    assert await session.request("tools/list") == {"tools": []}
        tg.cancel_scope.cancel()
    assert peak.growth < BOUND, f"{peak.growth / MiB:.1f} MiB"


@pytest.mark.parametrize("depth", [900, 30_000])  # both within ERROR_BODY_LIMIT
async def test_a_deeply_nested_error_body_fails_its_request_only(depth: int) -> None:
    nested = "[" * depth + "]" * depth

    def refuse(rid: Any) -> httpx.Response:
        body = f'{{"jsonrpc":"2.0","id":{json.dumps(rid)},"error":{{"code":-32000,"message":"no","data":{nested}}}}}'
        return httpx.Response(400, headers={"content-type": "application/json"}, content=body.encode())

    error = await run_bombed(refuse, [])
    assert isinstance(error, (HTTPStatusError, RemoteError)), error

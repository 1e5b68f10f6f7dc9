"""Legacy HTTP+SSE edge cases against scripted servers (httpx.MockTransport)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from kxen_transport_http.options import SseOptions
from kxen_transport_sse import hooks
from kxen_transport_sse.legacy import open_legacy_sse, resolve_endpoint

from kxen_core import hookimpl
from kxen_core.config.models import ServerConfig
from kxen_core.errors import AuthRequired, ClosedError, ConfigError, ConnectError, HTTPStatusError
from kxen_core.plugins.manager import KxenPluginManager
from kxen_core.protocol.session import Session
from kxen_core.transport import MessageStream, TransportContext

pytestmark = pytest.mark.anyio

LIMIT = 10
SECRET = "Bearer sse-s3cr3t-token"
CRED = "plugin-cred-7777"


class Feed(httpx.AsyncByteStream):
    """An SSE body fed by the test: ``push`` chunks, ``end()`` to finish; closing it is recorded."""

    def __init__(self) -> None:
        self._send, self._recv = anyio.create_memory_object_stream[bytes | None](100)
        self.closed = False

    def push(self, chunk: bytes) -> None:
        self._send.send_nowait(chunk)

    def event(self, name: str, data: Any) -> None:
        text = data if isinstance(data, str) else json.dumps(data)
        self.push(f"event: {name}\ndata: {text}\n\n".encode())

    def end(self) -> None:
        self._send.send_nowait(None)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            chunk = await self._recv.receive()
            if chunk is None:
                return
            yield chunk

    async def aclose(self) -> None:
        self.closed = True
        self._send.close()
        self._recv.close()


class App:
    """A scripted HTTP+SSE server: GET /sse opens ``feed``; POSTs are answered on it."""

    def __init__(self, endpoint: str = "/messages?session_id=abc") -> None:
        self.endpoint = endpoint
        self.feed = Feed()
        self.requests: list[httpx.Request] = []
        self.post_status = 202

    def answer(self, body: dict[str, Any]) -> None:
        if body.get("method") == "initialize":
            result = {"protocolVersion": "2024-11-05", "capabilities": {}, "serverInfo": {"name": "mock"}}
        else:
            result = {"content": [{"type": "text", "text": "ok"}]}
        self.feed.event("message", {"jsonrpc": "2.0", "id": body["id"], "result": result})

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.method == "GET":
            if self.endpoint is not None:
                self.feed.event("endpoint", self.endpoint)
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=self.feed)
        body = json.loads(request.content)
        if "id" in body and "method" in body:
            if self.post_status != 202:
                return httpx.Response(self.post_status, text="nope")
            self.answer(body)
        return httpx.Response(202, text="Accepted")


def server(**kwargs: Any) -> ServerConfig:
    return ServerConfig(**{"name": "t", "url": "http://mock.test:8080/sse", "transport": "sse", **kwargs})


def context(diagnostics: list[str] | None = None, pm: Any = None) -> TransportContext:
    return TransportContext(
        workspace=Path.cwd(), diagnostic=diagnostics.append if diagnostics is not None else (lambda m: None), pm=pm
    )


async def test_the_plugin_registers_only_sse() -> None:
    pm = KxenPluginManager()
    pm.register(hooks)
    assert pm.transports.names() == ["sse"]
    kind = pm.transports.get("sse")
    assert kind.options is SseOptions
    assert kind.opener(server(), context()) is not None


def test_resolve_endpoint_same_origin_only() -> None:
    base = "http://mock.test:8080/sse"
    assert resolve_endpoint(base, "/messages/?session_id=1") == "http://mock.test:8080/messages/?session_id=1"
    assert resolve_endpoint(base, "messages?x=1") == "http://mock.test:8080/messages?x=1"
    assert resolve_endpoint(base, "http://MOCK.test:8080/m") == "http://MOCK.test:8080/m"
    assert resolve_endpoint("https://a.test/sse", "https://a.test:443/m") == "https://a.test:443/m"
    for bad in ("http://evil.test:8080/m", "http://mock.test:9090/m", "https://mock.test:8080/m", "//evil.test/m", " "):
        with pytest.raises(ConnectError):
            resolve_endpoint(base, bad)


async def test_round_trip_and_posts_go_to_the_endpoint() -> None:
    app = App()
    with anyio.fail_after(LIMIT):
        async with open_legacy_sse(server(), context(), http_transport=httpx.MockTransport(app)) as stream:
            assert isinstance(stream, MessageStream)
            facts = stream.describe()
            assert facts["endpoint"] == "http://mock.test:8080/messages" and "abc" not in json.dumps(facts)
            async with Session(stream, server="t") as session:
                init = await session.initialize()
                assert init.protocol_version == "2024-11-05"
                assert (await session.request("tools/call", {"name": "x"}))["content"][0]["text"] == "ok"
    get, *posts = app.requests
    assert get.method == "GET" and get.headers["accept"] == "text/event-stream"
    assert [str(p.url) for p in posts] == ["http://mock.test:8080/messages?session_id=abc"] * 3
    assert all(p.headers["content-type"] == "application/json" for p in posts)
    assert app.feed.closed


@pytest.mark.parametrize("endpoint", ["http://evil.test/messages", "https://mock.test:8080/messages"])
async def test_foreign_endpoint_is_refused(endpoint: str) -> None:
    app = App(endpoint=endpoint)
    with anyio.fail_after(LIMIT):
        with pytest.raises(ConnectError, match="another origin"):
            async with open_legacy_sse(server(), context(), http_transport=httpx.MockTransport(app)):
                pass
    assert app.feed.closed and len(app.requests) == 1


async def test_no_endpoint_in_time_is_a_connect_error() -> None:
    app = App(endpoint=None)
    started = time.monotonic()
    with anyio.fail_after(LIMIT):
        with pytest.raises(ConnectError, match="within 0.2 s"):
            async with open_legacy_sse(
                server(options={"endpointTimeoutSeconds": 0.2}), context(), http_transport=httpx.MockTransport(app)
            ):
                pass
    assert time.monotonic() - started < 2


async def test_stream_ending_before_the_endpoint_is_a_connect_error() -> None:
    app = App(endpoint=None)
    app.feed.event("message", {"jsonrpc": "2.0", "method": "early"})
    app.feed.end()
    with anyio.fail_after(LIMIT):
        with pytest.raises(ConnectError, match="before the stream ended"):
            async with open_legacy_sse(server(), context(), http_transport=httpx.MockTransport(app)):
                pass


@pytest.mark.parametrize("status, ctype", [(404, "text/plain"), (200, "application/json")])
async def test_not_an_sse_stream_is_a_connect_error(status: int, ctype: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers={"content-type": ctype}, text="{}")

    with anyio.fail_after(LIMIT):
        with pytest.raises(ConnectError, match=f"HTTP {status}"):
            async with open_legacy_sse(server(), context(), http_transport=httpx.MockTransport(handler)):
                pass


async def test_stream_end_closes_pending_requests() -> None:
    class Silent(App):
        def answer(self, body):
            if body.get("method") == "initialize":
                super().answer(body)
            else:
                self.feed.end()

    app = Silent()
    with anyio.fail_after(LIMIT):
        async with open_legacy_sse(server(), context(), http_transport=httpx.MockTransport(app)) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                with pytest.raises(ClosedError, match="ended"):
                    await session.request("tools/call", {"name": "x"})
            with pytest.raises(ClosedError):
                await stream.receive()
            with pytest.raises(ClosedError):
                await stream.send({"jsonrpc": "2.0", "method": "notifications/x"})


async def test_post_error_becomes_remote_error_and_the_transport_goes_on() -> None:
    app = App()
    with anyio.fail_after(LIMIT):
        async with open_legacy_sse(server(), context(), http_transport=httpx.MockTransport(app)) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                app.post_status = 500
                with pytest.raises(HTTPStatusError) as failed:
                    await session.request("tools/call", {"name": "x"})
                assert (failed.value.status, failed.value.body) == (500, "nope")
                app.post_status = 202
                assert (await session.request("tools/call", {"name": "x"}))["content"][0]["text"] == "ok"


async def test_oversized_event_abandons_the_stream() -> None:
    class Big(App):
        def answer(self, body):
            if body.get("method") == "initialize":
                return super().answer(body)
            self.feed.event("message", {"jsonrpc": "2.0", "id": body["id"], "result": {"x": "y" * 4000}})

    with anyio.fail_after(LIMIT):
        async with open_legacy_sse(
            server(options={"maxMessageBytes": 2048}), context(), http_transport=httpx.MockTransport(Big())
        ) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                with pytest.raises(ClosedError, match="maxMessageBytes"):
                    await session.request("tools/call", {"name": "x"})


async def test_close_is_bounded_when_cancelled() -> None:
    class Hanging(App):
        def answer(self, body):
            if body.get("method") == "initialize":
                super().answer(body)

    started = time.monotonic()
    with anyio.move_on_after(0.3):
        async with open_legacy_sse(server(), context(), http_transport=httpx.MockTransport(Hanging())) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                await session.request("tools/call", {"name": "x"})
    assert time.monotonic() - started < 3


async def test_header_values_never_leak() -> None:
    class Credentials:
        @hookimpl
        def kxen_credential_lookup(self, server, request):
            return {"X-Api-Key": CRED}

    pm = KxenPluginManager()
    pm.register(Credentials())
    seen: list[httpx.Request] = []

    class Leaky(App):
        async def __call__(self, request):
            seen.append(request)
            echoed = f"{request.headers['authorization']} {request.headers['x-api-key']}"
            if request.method == "POST":
                body = json.loads(request.content)
                if body.get("method") == "tools/call":
                    if body["params"]["name"] == "text":
                        return httpx.Response(500, text=f"denied {echoed}")
                    if body["params"]["name"] == "auth":
                        challenge = f'Bearer error="invalid_token", error_description="bad {echoed}"'
                        return httpx.Response(401, headers={"WWW-Authenticate": challenge}, text=f"denied {echoed}")
                    raise httpx.ConnectError(f"refused {echoed}", request=request)
            return await super().__call__(request)

    diagnostics: list[str] = []
    texts: list[str] = []
    srv = server(url="http://mock.test:8080/sse?key=url-secret-55", headers={"Authorization": SECRET})
    with anyio.fail_after(LIMIT):
        async with open_legacy_sse(
            srv, context(diagnostics, pm), http_transport=httpx.MockTransport(Leaky())
        ) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                with pytest.raises(HTTPStatusError) as err:
                    await session.request("tools/call", {"name": "text"})
                texts.append(f"{err.value} {err.value.body}")
                with pytest.raises(ClosedError) as closed:
                    await session.request("tools/call", {"name": "connect"})
                texts.append(f"{closed.value} {closed.value.__cause__}")
                texts.append(json.dumps(stream.describe()))
        async with open_legacy_sse(
            srv, context(diagnostics, pm), http_transport=httpx.MockTransport(Leaky())
        ) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                with pytest.raises(AuthRequired) as auth:  # the plugin has nothing better on the challenge
                    await session.request("tools/call", {"name": "auth"})
                assert str(auth.value).startswith(
                    "HTTP 401 Unauthorized from http://mock.test:8080/messages: invalid_token: bad ***"
                )
                texts.append(f"{auth.value} {auth.value!r} {auth.value.next_step}")

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"no route for {request.headers['authorization']}", request=request)

    with pytest.raises(ConnectError) as opening:
        async with open_legacy_sse(srv, context(diagnostics, pm), http_transport=httpx.MockTransport(refused)):
            pass
    texts.append(str(opening.value))
    assert seen[0].headers["authorization"] == SECRET and seen[0].headers["x-api-key"] == CRED
    everything = "\n".join(texts + diagnostics)
    assert "***" in everything
    for secret in (SECRET, "sse-s3cr3t-token", CRED, "url-secret-55"):
        assert secret not in everything


async def test_invalid_options_raise_config_error() -> None:
    with pytest.raises(ConfigError, match="getStream"):
        async with open_legacy_sse(
            server(options={"getStream": True}),
            context(),
            http_transport=httpx.MockTransport(lambda r: httpx.Response(500)),
        ):
            pass


async def test_errors_in_the_body_pass_through_unwrapped() -> None:
    with anyio.fail_after(LIMIT):
        with pytest.raises(KeyError):
            async with open_legacy_sse(server(), context(), http_transport=httpx.MockTransport(App())):
                raise KeyError("mine")

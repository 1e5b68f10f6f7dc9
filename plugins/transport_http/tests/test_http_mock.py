"""Streamable HTTP edge cases against scripted servers (httpx.MockTransport)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from kxen_transport_http import hooks
from kxen_transport_http.options import HttpOptions
from kxen_transport_http.streamable import open_streamable_http

from kxen_core import hookimpl
from kxen_core.config.models import ServerConfig
from kxen_core.errors import (
    AuthRequired,
    ClosedError,
    ConfigError,
    ConnectError,
    HTTPStatusError,
    ProtocolError,
    RemoteError,
)
from kxen_core.plugins.manager import KxenPluginManager
from kxen_core.protocol.session import Session
from kxen_core.transport import MessageStream, TransportContext

pytestmark = pytest.mark.anyio

LIMIT = 10
INIT_RESULT = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "mock"}}
SECRET = "Bearer s3cr3t-config-token"
CRED = "cr3d-from-plugin-42"


class Stream(httpx.AsyncByteStream):
    """A response body that yields ``chunks``, then ends, raises, or hangs until closed."""

    def __init__(self, chunks: list[bytes], then: str = "end") -> None:
        self.chunks = chunks
        self.then = then
        self.closed = anyio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.then == "drop":
            raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")
        if self.then == "hang":
            await self.closed.wait()

    async def aclose(self) -> None:
        self.closed.set()


def sse(*events: dict[str, Any]) -> list[bytes]:
    out = []
    for ev in events:
        lines = []
        if "id" in ev:
            lines.append(f"id: {ev['id']}")
        if "retry" in ev:
            lines.append(f"retry: {ev['retry']}")
        if "data" in ev:
            data = ev["data"] if isinstance(ev["data"], str) else json.dumps(ev["data"])
            lines.append(f"data: {data}")
        out.append(("\n".join(lines) + "\n\n").encode())
    return out


def result(rid: Any, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": value}


class App:
    """A scripted Streamable HTTP server; override ``call`` per test. Records every request."""

    def __init__(self, session_id: str | None = "sess-1", sse_answers: bool = False) -> None:
        self.session_id = session_id
        self.sse_answers = sse_answers
        self.requests: list[httpx.Request] = []
        self.bodies: list[Any] = []
        self.get_status = 405
        self.deleted = False

    def answer(self, message: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
        headers = dict(headers or {})
        if self.sse_answers:
            headers["content-type"] = "text/event-stream"
            return httpx.Response(200, headers=headers, stream=Stream(sse({"id": "p1", "data": ""}, {"data": message})))
        return httpx.Response(200, headers=headers, json=message)

    async def call(self, rid: Any, method: str, params: Any, request: httpx.Request) -> httpx.Response:
        if method == "tools/list":
            return self.answer(result(rid, {"tools": []}))
        return self.answer(result(rid, {"content": [{"type": "text", "text": "ok"}]}))

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.method == "GET":
            return httpx.Response(self.get_status)
        if request.method == "DELETE":
            self.deleted = True
            return httpx.Response(200)
        body = json.loads(request.content)
        self.bodies.append(body)
        if "id" not in body:
            return httpx.Response(202)
        if body.get("method") == "initialize":
            headers = {"mcp-session-id": self.session_id} if self.session_id else {}
            return self.answer(result(body["id"], INIT_RESULT), headers)
        return await self.call(body["id"], body.get("method"), body.get("params"), request)


def server(**kwargs: Any) -> ServerConfig:
    return ServerConfig(**{"name": "t", "url": "http://mock.test/mcp", "transport": "http", **kwargs})


def context(diagnostics: list[str] | None = None, pm: Any = None) -> TransportContext:
    sink: Callable[[str], None] = diagnostics.append if diagnostics is not None else (lambda m: None)
    return TransportContext(workspace=Path.cwd(), diagnostic=sink, pm=pm)


async def test_the_plugin_registers_only_http() -> None:
    pm = KxenPluginManager()
    pm.register(hooks)
    assert pm.transports.names() == ["http"]
    kind = pm.transports.get("http")
    assert kind.options is HttpOptions and kind.plugin == pm.get_name(hooks)
    transport = kind.opener(server(), context())
    assert hasattr(transport, "__aenter__") and hasattr(transport, "__aexit__")


async def test_json_session_headers_get_405_and_delete() -> None:
    app = App()
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(app)) as stream:
            assert isinstance(stream, MessageStream)
            async with Session(stream, server="t") as session:
                init = await session.initialize()
                assert init.protocol_version == "2025-06-18"
                await session.request("tools/list")
                await anyio.sleep(0.05)  # let the GET attempt happen
                facts = stream.describe()
                assert facts["getStream"] == "unsupported (HTTP 405)"
                assert facts["session"] is True and "sess-1" not in json.dumps(facts)
    posts = [r for r in app.requests if r.method == "POST"]
    first = posts[0]
    assert first.headers["accept"] == "application/json, text/event-stream"
    assert first.headers["content-type"] == "application/json"
    assert "mcp-session-id" not in first.headers and "mcp-protocol-version" not in first.headers
    for later in posts[1:]:
        assert later.headers["mcp-session-id"] == "sess-1"
        assert later.headers["mcp-protocol-version"] == "2025-06-18"
    assert [b.get("method") for b in app.bodies] == ["initialize", "notifications/initialized", "tools/list"]
    assert [r.method for r in app.requests].count("GET") == 1  # 405: not retried
    assert app.deleted and app.requests[-1].headers["mcp-session-id"] == "sess-1"


async def test_sse_answers_with_priming_events() -> None:
    app = App(sse_answers=True)
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(app)) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                assert (await session.request("tools/call", {"name": "x"}))["content"][0]["text"] == "ok"


async def test_stateless_server_gets_no_session_header_and_no_delete() -> None:
    app = App(session_id=None)
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(app)) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                await session.request("tools/list")
    assert all("mcp-session-id" not in r.headers for r in app.requests)
    assert not app.deleted


async def test_http_500_becomes_remote_error() -> None:
    class Failing(App):
        async def call(self, rid, method, params, request):
            if method == "tools/call":
                return httpx.Response(500, text="internal trouble")
            return httpx.Response(
                400, json={"jsonrpc": "2.0", "id": None, "error": {"code": -32602, "message": "bad cursor"}}
            )

    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(Failing())) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                with pytest.raises(HTTPStatusError) as failed:
                    await session.request("tools/call", {"name": "x"})
                assert (failed.value.status, failed.value.body) == (500, "internal trouble")
                assert "HTTP 500" in str(failed.value)
                with pytest.raises(RemoteError) as err:
                    await session.request("tools/list")
                assert (err.value.code, err.value.message) == (-32602, "bad cursor")
                # the transport is still fine
                with pytest.raises(RemoteError):
                    await session.request("tools/list")


async def test_404_on_a_known_session_closes_with_session_expired() -> None:
    class Expiring(App):
        async def call(self, rid, method, params, request):
            return httpx.Response(
                404, json={"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Session not found"}}
            )

    app = Expiring()
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(app)) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                with pytest.raises(ClosedError, match="session expired"):
                    await session.request("tools/list")
                with pytest.raises(ClosedError):
                    await stream.send({"jsonrpc": "2.0", "method": "notifications/x"})
            assert "session expired" in stream.describe()["closed"]
    assert not app.deleted  # the server already forgot the session


async def test_404_without_a_session_is_a_remote_error() -> None:
    class NotHere(App):
        async def __call__(self, request):
            return httpx.Response(404, text="no such endpoint")

    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(NotHere())) as stream:
            async with Session(stream, server="t") as session:
                with pytest.raises(HTTPStatusError, match="HTTP 404"):
                    await session.initialize()


@pytest.mark.parametrize("as_sse", [False, True])
async def test_oversized_answer_is_refused_and_the_transport_goes_on(as_sse: bool) -> None:
    big = "x" * 5000

    class Big(App):
        async def call(self, rid, method, params, request):
            if method == "tools/call":
                message = result(rid, {"content": [{"type": "text", "text": big}]})
                if as_sse:
                    return httpx.Response(
                        200, headers={"content-type": "text/event-stream"}, stream=Stream(sse({"data": message}))
                    )
                return httpx.Response(200, json=message)
            return await super().call(rid, method, params, request)

    diagnostics: list[str] = []
    srv = server(options={"maxMessageBytes": 4096})
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(srv, context(diagnostics), http_transport=httpx.MockTransport(Big())) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                with pytest.raises(ProtocolError, match="too large"):
                    await session.request("tools/call", {"name": "x"})
                assert (await session.request("tools/list")) == {"tools": []}
    assert any("too large" in d for d in diagnostics)


async def test_dropped_answer_stream_resumes_with_get_after_retry() -> None:
    class Dropping(App):
        get_seen: list[tuple[float, str | None]] = []
        dropped_at = 0.0

        async def call(self, rid, method, params, request):
            self.rid = rid
            self.dropped_at = time.monotonic()
            chunks = sse({"id": "ev-1", "retry": 300, "data": ""})
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, stream=Stream(chunks, then="drop")
            )

        async def __call__(self, request):
            if request.method == "GET" and request.headers.get("last-event-id"):
                self.requests.append(request)
                self.get_seen.append((time.monotonic() - self.dropped_at, request.headers.get("last-event-id")))
                chunks = sse({"id": "ev-2", "data": result(self.rid, {"content": [], "resumed": True})})
                return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Stream(chunks))
            return await super().__call__(request)

    app = Dropping()
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(app)) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                answer = await session.request("tools/call", {"name": "x"})
                assert answer["resumed"] is True
                assert stream.describe()["resumes"] == 1
    ((waited, last_id),) = app.get_seen
    assert last_id == "ev-1"
    assert 0.28 <= waited < 2.0
    resume = [r for r in app.requests if r.headers.get("last-event-id")][0]
    assert resume.headers["mcp-session-id"] == "sess-1" and resume.headers["accept"] == "text/event-stream"


async def test_answer_stream_without_event_ids_cannot_resume() -> None:
    class Ending(App):
        async def call(self, rid, method, params, request):
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, stream=Stream([b": keep-alive\n\n"])
            )

    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(Ending())) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                with pytest.raises(ProtocolError, match="cannot be resumed"):
                    await session.request("tools/call", {"name": "x"})


async def test_resumption_is_bounded() -> None:
    class NeverAnswers(App):
        gets = 0

        async def call(self, rid, method, params, request):
            chunks = sse({"id": "a", "retry": 10, "data": ""})
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Stream(chunks))

        async def __call__(self, request):
            if request.method == "GET" and request.headers.get("last-event-id"):
                self.gets += 1
                return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Stream([]))
            return await super().__call__(request)

    app = NeverAnswers()
    srv = server(options={"maxReconnectAttempts": 2})
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(srv, context(), http_transport=httpx.MockTransport(app)) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                with pytest.raises(ProtocolError, match="not resumed after 2"):
                    await session.request("tools/call", {"name": "x"})
    assert app.gets == 2


async def test_server_messages_on_the_get_stream_and_the_answer_stream() -> None:
    class Chatty(App):
        def __init__(self) -> None:
            super().__init__()
            self.get_stream = Stream(
                sse({"data": {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}}), then="hang"
            )

        async def call(self, rid, method, params, request):
            chunks = sse(
                {"id": "1", "data": ""},
                {"id": "2", "data": {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}},
                {"id": "3", "data": "not json"},
                {"id": "4", "data": result(rid, {"content": []})},
            )
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, stream=Stream(chunks, then="hang")
            )

        async def __call__(self, request):
            if request.method == "GET":
                self.requests.append(request)
                return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=self.get_stream)
            return await super().__call__(request)

    app = Chatty()
    notes: list[str] = []
    diagnostics: list[str] = []
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(
            server(), context(diagnostics), http_transport=httpx.MockTransport(app)
        ) as stream:
            async with Session(stream, server="t", on_notification=lambda m, p: notes.append(m)) as session:
                await session.initialize()
                # the answer stream hangs after the response: kxen stops reading it once answered
                assert (await session.request("tools/call", {"name": "x"})) == {"content": []}
                with anyio.fail_after(2):
                    while "notifications/tools/list_changed" not in notes:
                        await anyio.sleep(0.01)
                assert stream.describe()["getStream"] == "open"
    assert "notifications/progress" in notes
    assert any("not JSON-RPC" in d for d in diagnostics)
    assert app.get_stream.closed.is_set()


async def test_timed_out_request_stops_reading_its_stream() -> None:
    streams: list[Stream] = []

    class Slow(App):
        async def call(self, rid, method, params, request):
            streams.append(Stream(sse({"id": "1", "data": ""}), then="hang"))
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=streams[-1])

    app = Slow()
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(app)) as stream:
            async with Session(stream, server="t", request_timeout=0.2) as session:
                await session.initialize()
                with pytest.raises(Exception, match="no reply"):
                    await session.request("tools/call", {"name": "x"})
                with anyio.fail_after(2):
                    await streams[0].closed.wait()
    assert [b.get("method") for b in app.bodies][-1] == "notifications/cancelled"


async def test_close_is_bounded_when_cancelled_and_the_server_hangs() -> None:
    class Hanging(App):
        async def __call__(self, request):
            if request.method == "DELETE":
                await anyio.sleep_forever()
            return await super().__call__(request)

        async def call(self, rid, method, params, request):
            await anyio.sleep_forever()

    started = time.monotonic()
    with anyio.move_on_after(0.5):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(Hanging())) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                await session.request("tools/call", {"name": "x"})
    assert time.monotonic() - started < 4.0  # 0.5 s + DELETE bounded at 2 s


async def test_connect_failure_closes_with_connect_error_cause() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(refuse)) as stream:
            async with Session(stream, server="t") as session:
                with pytest.raises(ClosedError) as err:
                    await session.initialize()
            assert isinstance(stream.describe()["closed"], str)
    assert "Connection refused" in str(err.value)


async def test_a_closed_port_on_loopback_is_a_connect_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    srv = ServerConfig(name="t", url=f"http://127.0.0.1:{port}/mcp", transport="http")
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(srv, context()) as stream:
            with pytest.raises(ClosedError):
                await stream.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            with pytest.raises(ClosedError) as err:
                await stream.receive()
    assert isinstance(err.value.__cause__, ConnectError)


async def test_header_values_never_leak() -> None:
    class Credentials:
        @hookimpl
        async def kxen_credential_lookup(self, server, request):
            assert (
                request.method in ("POST", "GET", "DELETE") and request.url == "http://mock.test/mcp?token=q-secret-99"
            )
            return {"X-Api-Key": CRED}

    pm = KxenPluginManager()
    pm.register(Credentials())
    seen: list[httpx.Request] = []

    class Echoing(App):
        async def call(self, rid, method, params, request):
            seen.append(request)
            echoed = f"{request.headers['authorization']} {request.headers['x-api-key']}"
            if params["name"] == "json":
                return httpx.Response(
                    500,
                    json={
                        "jsonrpc": "2.0",
                        "id": rid,
                        "error": {"code": -32000, "message": f"bad {echoed}", "data": {"sent": echoed}},
                    },
                )
            if params["name"] == "text":
                return httpx.Response(403, text=f"forbidden for {echoed}")
            raise httpx.ConnectError(f"cannot reach with {echoed}", request=request)

    diagnostics: list[str] = []
    srv = ServerConfig(
        name="t", url="http://mock.test/mcp?token=q-secret-99", transport="http", headers={"Authorization": SECRET}
    )
    errors: list[str] = []
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(
            srv, context(diagnostics, pm), http_transport=httpx.MockTransport(Echoing())
        ) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                for name in ("json", "text"):
                    with pytest.raises((RemoteError, HTTPStatusError)) as err:
                        await session.request("tools/call", {"name": name})
                    errors.append(f"{err.value} {getattr(err.value, 'data', '')} {getattr(err.value, 'body', '')}")
                with pytest.raises(ClosedError) as closed:
                    await session.request("tools/call", {"name": "connect"})
                errors.append(f"{closed.value} {closed.value.__cause__}")
                facts = json.dumps(stream.describe())
    assert seen and seen[0].headers["authorization"] == SECRET and seen[0].headers["x-api-key"] == CRED
    everything = "\n".join(errors + diagnostics + [facts])
    assert "***" in everything
    for secret in (SECRET, "s3cr3t-config-token", CRED, "q-secret-99"):
        assert secret not in everything


@pytest.mark.parametrize("again", [False, True], ids=["plugin-has-nothing-better", "refused-again"])
async def test_an_auth_challenge_that_echoes_secrets_never_leaks(again: bool) -> None:
    """A 401 whose challenge and body echo the credential and the URL's query value: the request
    and the transport fail with AuthRequired, whose text names the challenge's error, redacted."""

    class Credentials:
        def __init__(self) -> None:
            self.challenges: list[Any] = []

        @hookimpl
        async def kxen_credential_lookup(self, server, request):
            if request.challenge is not None:
                self.challenges.append(request.challenge)
                return {"X-Api-Key": CRED + "-renewed"} if again else None
            return {"X-Api-Key": CRED}

    creds = Credentials()
    pm = KxenPluginManager()
    pm.register(creds)

    class Echoing(App):
        async def call(self, rid, method, params, request):
            echoed = f"{request.headers['authorization']} {request.headers['x-api-key']} {request.url.params['token']}"
            challenge = f'Bearer error="invalid_token", error_description="bad {echoed}"'
            return httpx.Response(401, headers={"WWW-Authenticate": challenge}, text=f"denied {echoed}")

    diagnostics: list[str] = []
    srv = ServerConfig(
        name="t", url="http://mock.test/mcp?token=q-secret-99", transport="http", headers={"Authorization": SECRET}
    )
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(
            srv, context(diagnostics, pm), http_transport=httpx.MockTransport(Echoing())
        ) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                with pytest.raises(AuthRequired) as err:
                    await session.request("tools/call", {"name": "x"})
                with pytest.raises(ClosedError) as closed:  # the transport failed with it
                    await session.request("tools/list")
                facts = json.dumps(stream.describe())
                ended = session.close_error
    assert isinstance(ended, ClosedError) and isinstance(ended.__cause__, AuthRequired), repr(ended)
    assert len(creds.challenges) == 1 and creds.challenges[0].status == 401
    assert CRED in creds.challenges[0].www_authenticate  # the plugin gets the challenge as sent
    text = f"{err.value!s} {err.value!r} {err.value.next_step} {closed.value}"
    assert text.startswith("HTTP 401 Unauthorized from http://mock.test/mcp: invalid_token: bad ***"), text
    everything = "\n".join([text, facts, *diagnostics])
    for secret in (SECRET, "s3cr3t-config-token", CRED, "q-secret-99"):
        assert secret not in everything, everything


async def test_a_credential_plugin_is_asked_even_when_it_came_late() -> None:
    """Without a kxen_credential_lookup plugin the POST headers are built once; one registered later is asked."""

    class Credentials:
        @hookimpl
        async def kxen_credential_lookup(self, server, request):
            return {"X-Api-Key": CRED}

    pm = KxenPluginManager()
    app = App()
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(
            server(headers={"X-Static": "v1"}), context(pm=pm), http_transport=httpx.MockTransport(app)
        ) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                await session.request("tools/list")
                pm.register(Credentials())
                await session.request("tools/list")
    posts = [r for r in app.requests if r.method == "POST"]
    assert [r.headers.get("x-api-key") for r in posts] == [None, None, None, CRED]
    assert all(r.headers["x-static"] == "v1" for r in posts)
    assert [r.headers.get("mcp-session-id") for r in posts] == [None, "sess-1", "sess-1", "sess-1"]
    assert app.requests[-1].method == "DELETE" and app.requests[-1].headers["x-api-key"] == CRED


async def test_requests_start_without_waiting_and_close_cancels_them() -> None:
    cancelled: list[Any] = []

    class Hanging(App):
        async def call(self, rid, method, params, request):
            try:
                await anyio.sleep_forever()
            finally:
                cancelled.append(rid)
            raise AssertionError("unreachable")

    app = Hanging()
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(app)) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
            # a request starts at once; a notification is POSTed inline by send(), not here
            assert stream.send_nowait({"jsonrpc": "2.0", "id": "r1", "method": "tools/call", "params": {"name": "x"}})
            assert not stream.send_nowait({"jsonrpc": "2.0", "method": "notifications/progress"})
            await anyio.sleep(0.05)
            assert cancelled == []
    assert cancelled == ["r1"]  # closing cancelled its POST and waited for it
    assert app.deleted


async def test_invalid_options_raise_config_error_on_enter() -> None:
    srv = server(options={"maxMessageBytes": "big", "nope": 1, "getStream": 1})
    with pytest.raises(ConfigError) as err:
        async with open_streamable_http(srv, context(), http_transport=httpx.MockTransport(App())):
            pass
    text = str(err.value)
    # the host's converter words it as config loading does: every problem with its key path
    assert "options.maxMessageBytes" in text and "options: unknown key(s): nope" in text and "options.getStream" in text


async def test_errors_in_the_body_pass_through_unwrapped() -> None:
    with anyio.fail_after(LIMIT):
        with pytest.raises(KeyError):
            async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(App())) as stream:
                async with Session(stream, server="t") as session:
                    await session.initialize()
                raise KeyError("mine")


async def test_a_failing_get_stream_is_reopened_a_bounded_number_of_times() -> None:
    class Down(App):
        def __init__(self) -> None:
            super().__init__()
            self.get_status = 503

    app = Down()
    diagnostics: list[str] = []
    srv = server(options={"maxReconnectAttempts": 2, "defaultRetryMs": 0})
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(srv, context(diagnostics), http_transport=httpx.MockTransport(app)) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                with anyio.fail_after(2):
                    while stream.describe()["getStream"] != "closed":
                        await anyio.sleep(0.01)
                assert (await session.request("tools/list")) == {"tools": []}  # requests go on
    assert [r.method for r in app.requests].count("GET") == 3  # the first GET and 2 reopenings
    assert any("HTTP 503" in d and "not reopened after 2 attempt(s)" in d for d in diagnostics)


@pytest.mark.parametrize(
    "query", ["api_key=k3y-in-the-url-77", "a=1&api_key=k3y-in-the-url-77", "api_key=k3y%2Din%2Dthe%2Durl%2D77"]
)
async def test_query_values_of_the_url_never_leak(query: str) -> None:
    # a server that echoes the URL's api_key back: in a JSON-RPC error, an error body, a broken connection
    class Echoing(App):
        async def call(self, rid, method, params, request):
            echoed = f"{request.url} key={request.url.params['api_key']}"
            if params["name"] == "json":
                return httpx.Response(
                    500,
                    json={
                        "jsonrpc": "2.0",
                        "id": rid,
                        "error": {"code": -32000, "message": f"bad {echoed}", "data": {"sent": echoed}},
                    },
                )
            if params["name"] == "text":
                return httpx.Response(403, text=f"forbidden for {echoed}")
            raise httpx.ConnectError(f"cannot reach {echoed}", request=request)

    diagnostics: list[str] = []
    srv = ServerConfig(name="t", url=f"http://mock.test/mcp?{query}", transport="http")
    errors: list[str] = []
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(
            srv, context(diagnostics), http_transport=httpx.MockTransport(Echoing())
        ) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                for name in ("json", "text"):
                    with pytest.raises((RemoteError, HTTPStatusError)) as err:
                        await session.request("tools/call", {"name": name})
                    errors.append(f"{err.value} {getattr(err.value, 'data', '')} {getattr(err.value, 'body', '')}")
                with pytest.raises(ClosedError) as closed:
                    await session.request("tools/call", {"name": "connect"})
                errors.append(f"{closed.value} {closed.value.__cause__}")
                facts = json.dumps(stream.describe())
    everything = "\n".join(errors + diagnostics + [facts])
    assert "***" in everything and "k3y" not in everything, everything


def test_the_redactor_knows_the_query_values_of_its_urls() -> None:
    from kxen_transport_http.plumbing import Redactor, url_secrets

    assert url_secrets("https://h.test/mcp?api_key=a%2Fb%20c&x=&y") == ["a%2Fb%20c", "a/b c"]
    redact = Redactor(urls=["https://h.test/mcp?api_key=a%2Fb%20c&v=1", None])
    assert redact("echo a/b c and a%2Fb%20c and v=1") == "echo *** and *** and v=1"  # too short to scrub: 1
    for _ in range(Redactor.MAX_VALUES + 1):  # header values come and go; the URL's stay
        redact.remember([f"header-{_:04d}"])
    assert redact("a/b c") == "***"


@pytest.mark.parametrize("get_status", [405, 200])
async def test_the_first_get_is_answered_before_the_first_request(get_status: int) -> None:
    """A GET reaching the server after the first request could take that request's answer (a
    server that sends pending answers on a new GET) or look like a reconnection to it."""
    order: list[str] = []

    class SlowGet(App):
        async def __call__(self, request: httpx.Request) -> httpx.Response:
            if request.method == "GET":
                self.requests.append(request)
                await anyio.sleep(0.3)  # the answer is slow; the request after initialize must wait for it
                order.append("GET answered")
                if get_status == 405:
                    return httpx.Response(405)
                return httpx.Response(
                    200,
                    headers={"content-type": "text/event-stream"},
                    stream=Stream(sse({"id": "g1", "data": ""}), then="hang"),
                )
            if request.method == "POST" and b"tools/list" in request.content:
                order.append("tools/list sent")
            return await super().__call__(request)

    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(SlowGet())) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                await session.request("tools/list")
    assert order == ["GET answered", "tools/list sent"]


async def test_a_get_that_never_answers_delays_the_start_by_a_bounded_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    from kxen_transport_http import _get_stream

    monkeypatch.setattr(_get_stream, "START_WAIT_SECONDS", 0.2)

    class SilentGet(App):
        async def __call__(self, request: httpx.Request) -> httpx.Response:
            if request.method == "GET":
                await anyio.sleep(3600)  # never answers (cancelled when the transport closes)
            return await super().__call__(request)

    with anyio.fail_after(LIMIT):
        async with open_streamable_http(server(), context(), http_transport=httpx.MockTransport(SilentGet())) as stream:
            async with Session(stream, server="t") as session:
                await session.initialize()
                assert (await session.request("tools/list"))["tools"] == []
                assert stream.describe()["getStream"] == "opening"

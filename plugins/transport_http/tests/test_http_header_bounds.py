"""What the stateless era (MCP 2026-07-28) mirrors into headers is bounded on the client side: each
``Mcp-Name`` / ``Mcp-Param-*`` value as sent (``options.maxHeaderValueBytes``) and the mirrored
headers together (``options.maxMirroredHeaderBytes``); a request over a bound fails before anything
is sent, and a 431 answer says what was mirrored. Against scripted servers (the stateless server of
test_http_modern.py); the same against the official SDK server: tests/test_era_peers.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from kxen_transport_http._modern import HEADER_VALUE_BYTES, MIRRORED_HEADER_BYTES, HeaderTooLarge
from kxen_transport_http.options import HttpOptions
from kxen_transport_http.streamable import open_streamable_http
from test_http_modern import LIMIT, Modern, context, decode, server

from kxen_core.errors import HTTPStatusError, InvalidArguments
from kxen_core.protocol.era import EraMemory, open_session
from kxen_core.protocol.session import Session
from kxen_core.transport import TransportContext

pytestmark = pytest.mark.anyio


async def _calls(
    app: Modern, calls: list[tuple[str, dict[str, Any]]], **options: Any
) -> list[dict[str, Any] | BaseException]:
    """Each ``(method, params)`` sent in turn on one stateless-era connection: its result, or what it raised."""
    entry = server(options=options) if options else server()
    ctx = TransportContext(workspace=Path.cwd(), options=HttpOptions(**options)) if options else context()
    out: list[dict[str, Any] | BaseException] = []
    with anyio.fail_after(LIMIT):
        async with open_streamable_http(entry, ctx, http_transport=httpx.MockTransport(app)) as stream:
            async with Session(stream, server="t") as session:
                await open_session(session, entry, EraMemory())
                await session.request("tools/list")
                for method, params in calls:
                    try:
                        out.append(await session.request(method, params))
                    except Exception as exc:
                        out.append(exc)
    return out


def _posted(app: Modern, method: str) -> list[httpx.Request]:
    return [r for r, b in zip(app.requests, app.bodies, strict=True) if b.get("method") == method]


async def test_an_argument_over_the_header_bound_is_refused_before_anything_is_sent() -> None:
    """A 120,000-character argument that an ``x-mcp-header`` mirrors: the revision requires the
    header whenever the value is in the body and sets no limit of its own, so kxen neither sends
    the call without it nor cuts it; the call fails naming the header, the argument, the size and
    the option, nothing is POSTed, and the connection goes on."""
    app = Modern()
    huge = {"name": "täg", "arguments": {"region": "r" * 120_000, "plain": "x"}}
    fine = {"name": "täg", "arguments": {"region": "eu"}}
    refused, after = await _calls(app, [("tools/call", huge), ("tools/call", fine)])
    assert isinstance(refused, HeaderTooLarge) and isinstance(refused, InvalidArguments)
    text = str(refused)
    assert text.startswith("tools/call 'täg': argument region would be a 120,000-byte Mcp-Param-Region header")
    assert "over kxen's bound of 4,096 bytes a header (options.maxHeaderValueBytes of server 't')" in text
    assert "requires the header whenever its value is in the request" in text and "r" * 100 not in text
    assert not isinstance(after, BaseException) and after["content"][0]["text"] == "ok"
    (sent,) = _posted(app, "tools/call")  # only the second call went out
    assert sent.headers["mcp-param-region"] == "eu"


@pytest.mark.parametrize(
    "value, sent",
    [
        ("a" * HEADER_VALUE_BYTES, True),  # exactly the bound: sent
        ("a" * (HEADER_VALUE_BYTES + 1), False),
        ("é" * 1500, True),  # 3,000 UTF-8 bytes -> 4,000 base64 characters + the markers: 4,011
        ("é" * 1600, False),  # the bound is on the value as sent, after the encoding
    ],
    ids=["at-bound", "one-over", "encoded-under", "encoded-over"],
)
async def test_the_value_bound_is_on_the_header_as_sent(value: str, sent: bool) -> None:
    app = Modern()
    (result,) = await _calls(app, [("tools/call", {"name": "täg", "arguments": {"region": value}})])
    assert isinstance(result, HeaderTooLarge) is not sent
    assert len(_posted(app, "tools/call")) == sent
    if sent:
        header = _posted(app, "tools/call")[0].headers["mcp-param-region"]
        assert len(header) <= HEADER_VALUE_BYTES and (header == value or decode(header) == value)


async def test_the_mirrored_headers_together_have_a_bound() -> None:
    """Three arguments each under the value bound, over the total bound together."""
    tool = {
        "name": "many",
        "inputSchema": {
            "type": "object",
            "properties": {n: {"type": "string", "x-mcp-header": n.title()} for n in ("aa", "bb", "cc")},
        },
    }
    app = Modern(tools=[tool])
    args = {n: n[0] * 3000 for n in ("aa", "bb", "cc")}
    (refused,) = await _calls(app, [("tools/call", {"name": "many", "arguments": args})])
    assert isinstance(refused, HeaderTooLarge)
    assert str(refused).startswith("tools/call 'many': its 5 mirrored headers (Mcp-Method, Mcp-Name, Mcp-Param-*)")
    assert f"over kxen's bound of {MIRRORED_HEADER_BYTES:,} bytes in all (options.maxMirroredHeaderBytes" in str(
        refused
    )
    assert _posted(app, "tools/call") == []


async def test_mcp_name_is_bounded_too_and_the_options_move_the_bounds() -> None:
    app = Modern()
    long_uri = "file:///" + "d/" * 3000
    refused, raised = await _calls(
        app,
        [("resources/read", {"uri": long_uri}), ("tools/call", {"name": "täg", "arguments": {"region": "r" * 9000}})],
    )
    assert isinstance(refused, HeaderTooLarge) and "params.uri would be a 6,008-byte Mcp-Name header" in str(refused)
    assert isinstance(raised, HeaderTooLarge)
    app = Modern()
    bigger = {"maxHeaderValueBytes": 16_384, "maxMirroredHeaderBytes": 32_768}
    (result,) = await _calls(app, [("tools/call", {"name": "täg", "arguments": {"region": "r" * 9000}})], **bigger)
    assert not isinstance(result, BaseException), result
    assert _posted(app, "tools/call")[0].headers["mcp-param-region"] == "r" * 9000


async def test_a_431_answer_names_what_was_mirrored_and_the_options() -> None:
    """Bounds raised past what the server accepts: its 431 fails that call alone, saying what kxen
    mirrored and which options make kxen refuse such a call itself."""

    class Strict(Modern):
        def __call__(self, request: httpx.Request) -> httpx.Response:
            if sum(len(k) + len(v) for k, v in request.headers.items()) > 16_384:
                self.requests.append(request)
                self.bodies.append(json.loads(request.content))
                return httpx.Response(431, text="Request Header Fields Too Large")
            return super().__call__(request)

    app = Strict()
    bigger = {"maxHeaderValueBytes": 65_536, "maxMirroredHeaderBytes": 65_536}
    big = {"name": "täg", "arguments": {"region": "r" * 20_000}}
    refused, after = await _calls(
        app, [("tools/call", big), ("tools/call", {"name": "täg", "arguments": {"region": "eu"}})], **bigger
    )
    assert isinstance(refused, HTTPStatusError) and refused.status == 431
    text = str(refused)
    assert text.startswith("HTTP 431 Request Header Fields Too Large")
    assert "the largest value 20,000 bytes" in text
    assert "lower options.maxHeaderValueBytes and options.maxMirroredHeaderBytes" in text
    assert not isinstance(after, BaseException) and after["content"][0]["text"] == "ok"  # the connection stays

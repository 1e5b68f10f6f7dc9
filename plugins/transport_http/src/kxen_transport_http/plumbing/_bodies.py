"""Bodies, bounded: reading a response, and JSON-RPC messages in and out.

Every byte a server sends is read through here (:func:`read_limited` for a body, :func:`decoded`
under the SSE reader), and every bound counts *decoded* bytes: a compressed body is inflated from
the raw stream with ``zlib`` in pieces of at most :data:`DECODE_CHUNK` bytes, so neither a whole
body nor one chunk of it can expand past its limit however high its compression ratio. Only the
encodings kxen asks for (:data:`ACCEPT_ENCODING`) are accepted, one at a time; anything else is a
:class:`BadEncoding`. An uncompressed body costs nothing more than before: its raw chunks are used
as they come.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import httpx

from kxen_core import Message, jsonwire
from kxen_core.errors import ProtocolError

#: what kxen's HTTP clients ask for: the encodings :func:`decoded` inflates, bounded
ACCEPT_ENCODING = "gzip, deflate"
#: a compressed body is inflated in pieces of at most this many bytes
DECODE_CHUNK = 64 * 1024

_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class BodyError(ProtocolError):
    """A response body (or one SSE event of it) that cannot be used: too large, or undecodable."""


class MessageTooLarge(BodyError):
    """A response body or one SSE event grew past its limit (``maxMessageBytes``), decoded."""


class BadEncoding(BodyError):
    """A body in a ``Content-Encoding`` kxen did not ask for, or whose compressed data is corrupt."""


class Inflater:
    """Inflates one compressed body, piece by piece: never more than ``DECODE_CHUNK`` bytes at once."""

    __slots__ = ("_coding", "_d", "_fresh")

    def __init__(self, coding: str) -> None:
        self._coding = coding
        self._d = zlib.decompressobj(_WBITS[coding])
        self._fresh = True

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded pieces of ``data`` (each at most ``DECODE_CHUNK`` bytes)."""
        d = self._d
        try:
            try:
                out = d.decompress(data, DECODE_CHUNK)
            except zlib.error:
                if not (self._fresh and self._coding == "deflate"):
                    raise
                # "deflate" is sent both zlib-wrapped and raw: try raw once, as browsers do
                self._d = d = zlib.decompressobj(-zlib.MAX_WBITS)
                out = d.decompress(data, DECODE_CHUNK)
            self._fresh = False
            while True:
                if out:
                    yield out
                # input left over, or output cut at the bound (more may be pending): go on, bounded
                if d.eof or not (d.unconsumed_tail or len(out) == DECODE_CHUNK):
                    return
                out = d.decompress(d.unconsumed_tail, DECODE_CHUNK)
        except zlib.error as exc:
            raise BadEncoding(f"{self._coding} body is corrupt: {exc}") from None

    def flush(self) -> bytes:
        """What is left once the body ended (at most what zlib holds back: its window)."""
        try:
            return self._d.flush()
        except zlib.error as exc:
            raise BadEncoding(f"{self._coding} body is corrupt: {exc}") from None


def inflater_for(response: httpx.Response) -> Inflater | None:
    """How to decode ``response``: None when it is not compressed; :class:`BadEncoding` for a
    ``Content-Encoding`` other than one of :data:`ACCEPT_ENCODING` (several layers included)."""
    value = response.headers.get("content-encoding")
    if not value:
        return None
    codings = [c for c in (part.strip().lower() for part in value.split(",")) if c and c != "identity"]
    if not codings:
        return None
    if len(codings) > 1 or codings[0] not in _WBITS:
        raise BadEncoding(f"unsupported Content-Encoding {value[:60]!r} (kxen accepts {ACCEPT_ENCODING})")
    return Inflater(codings[0])


def raw_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body as the network sends it (not decoded). A response built whole (a test's mock)
    still holds its bytes there. The iterator is kept on the response, so a reader that stops early
    leaves it to the response's close and collection, as httpx's own iterators are (closing it
    early would only orphan the transport's generator inside it)."""
    chunks = cast(Any, response.stream).__aiter__()
    response.extensions["kxen.raw"] = chunks
    return cast(AsyncIterator[bytes], chunks)


def content_type(response: httpx.Response) -> str:
    """The media type of ``response``, lower case, without parameters (``""`` when missing)."""
    return response.headers.get("content-type", "").partition(";")[0].strip().lower()


async def read_limited(response: httpx.Response, limit: int) -> bytes:
    """The whole decoded body, or :class:`MessageTooLarge` past ``limit`` decoded bytes
    (:class:`BadEncoding` for a body that cannot be decoded)."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise MessageTooLarge(f"body of {declared} bytes")
    inflater = inflater_for(response)
    buf = bytearray()
    async for raw in raw_chunks(response):
        if inflater is None:
            buf += raw
            if len(buf) > limit:
                raise MessageTooLarge(f"body over {limit} bytes")
            continue
        for piece in inflater.feed(raw):
            buf += piece
            if len(buf) > limit:
                raise MessageTooLarge(f"body over {limit} bytes (decoded)")
    if inflater is not None:
        buf += inflater.flush()
        if len(buf) > limit:
            raise MessageTooLarge(f"body over {limit} bytes (decoded)")
    return bytes(buf)


def parse_messages(data: str | bytes) -> list[Message]:
    """One JSON-RPC message (or a 2025-03-26 batch) -> list of dicts. Raises ``ValueError``, also
    for JSON nested too deeply to decode (never ``RecursionError``)."""
    try:
        value = jsonwire.loads(data)  # json.loads's answers, faster
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return value
    raise ValueError(f"expected a JSON object, got {type(value).__name__}")


def encode(message: Message) -> bytes:
    """``message`` as the compact UTF-8 JSON body of a POST (orjson where it writes the same JSON)."""
    return jsonwire.dumps(message, _encode_json)


def _encode_json(message: Message) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

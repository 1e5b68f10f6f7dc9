"""Bodies, bounded: reading a response, and JSON-RPC messages in and out."""

from __future__ import annotations

import json

import httpx

from kxen_core import Message
from kxen_core.errors import ProtocolError


class MessageTooLarge(ProtocolError):
    """A response body or one SSE event grew past its limit (``maxMessageBytes``)."""


def content_type(response: httpx.Response) -> str:
    """The media type of ``response``, lower case, without parameters (``""`` when missing)."""
    return response.headers.get("content-type", "").partition(";")[0].strip().lower()


async def read_limited(response: httpx.Response, limit: int) -> bytes:
    """The whole (decoded) body, or :class:`MessageTooLarge` past ``limit`` bytes."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise MessageTooLarge(f"body of {declared} bytes")
    buf = bytearray()
    async for chunk in response.aiter_bytes():
        buf += chunk
        if len(buf) > limit:
            raise MessageTooLarge(f"body over {limit} bytes")
    return bytes(buf)


def parse_messages(data: str | bytes) -> list[Message]:
    """One JSON-RPC message (or a 2025-03-26 batch) -> list of dicts. Raises ``ValueError``."""
    value = json.loads(data)
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return value
    raise ValueError(f"expected a JSON object, got {type(value).__name__}")


def encode(message: Message) -> bytes:
    """``message`` as the compact UTF-8 JSON body of a POST."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

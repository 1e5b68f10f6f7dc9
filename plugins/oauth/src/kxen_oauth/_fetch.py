"""Bounded HTTP for the OAuth protocol: every answer read to at most a byte limit within a time
limit, redirects followed only within the same origin (and at most a few), JSON objects only.

Errors are :class:`OAuthHttpError` whose text names the URL (path only: a query may hold a secret)
and the rule; httpx's own exceptions, whose text or context could hold a request, never escape.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
from kxen_transport_http.plumbing import egress_refusal, guarded_transport

from ._urls import same_origin, shown

#: the most bytes read from one metadata or token answer
MAX_BODY = 256 * 1024
#: seconds for one request, connect to last byte
REQUEST_SECONDS = 15.0
MAX_REDIRECTS = 3


class OAuthHttpError(Exception):
    """A request of the OAuth protocol failed; ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None, body: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        #: the JSON object the server answered with (an OAuth error: ``error``, ``error_description``)
        self.body = body or {}

    @property
    def oauth_error(self) -> str:
        err = self.body.get("error")
        return err[:100] if isinstance(err, str) else ""


def make_client(transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    """The client the OAuth protocol uses: no redirects of its own, no cookies kept across uses, and
    on the real network every connection checked by the egress guard after its name was resolved
    (the policy the core set for the task: ``kxen_core.current_egress``)."""
    return httpx.AsyncClient(
        transport=transport if transport is not None else guarded_transport(),
        follow_redirects=False,
        timeout=httpx.Timeout(REQUEST_SECONDS),
        headers={"Accept": "application/json"},
        trust_env=False,
    )


async def _read(response: httpx.Response, limit: int) -> bytes:
    chunks = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise OAuthHttpError(
                f"{shown(str(response.url))} answered more than {limit} bytes", status=response.status_code
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _json_object(raw: bytes, url: str, status: int) -> dict[str, Any]:
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise OAuthHttpError(f"{shown(url)} did not answer JSON (HTTP {status})", status=status) from None
    if not isinstance(value, dict):
        raise OAuthHttpError(f"{shown(url)} answered JSON that is not an object (HTTP {status})", status=status)
    return value


async def request_json(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    limit: int = MAX_BODY,
    ok: tuple[int, ...] = (200,),
    follow_same_origin: bool = False,
    seen: dict[str, str] | None = None,
    **kwargs: Any,
) -> tuple[int, dict[str, Any] | None]:
    """``(status, JSON object)`` of one request; the object is None when the status is not in
    ``ok`` and the body is not a JSON object; ``seen`` receives the answer's ``DPoP-Nonce``.
    Raises :class:`OAuthHttpError` on a network error, a timeout, an oversized answer, a refused
    redirect, or a body in ``ok`` that is not a JSON object."""
    current = url
    try:
        with anyio.fail_after(REQUEST_SECONDS * (MAX_REDIRECTS + 1)):
            for _ in range(MAX_REDIRECTS + 1):
                async with client.stream(method, current, **kwargs) as response:
                    status = response.status_code
                    if status in (301, 302, 303, 307, 308) and follow_same_origin and method == "GET":
                        target = response.headers.get("location", "")
                        nxt = str(response.url.join(target)) if target else ""
                        if not nxt or not same_origin(nxt, url):
                            raise OAuthHttpError(
                                f"{shown(current)} redirected to another origin: not followed", status=status
                            )
                        current = nxt
                        continue
                    raw = await _read(response, limit)
                    if seen is not None:
                        seen["dpop-nonce"] = response.headers.get("dpop-nonce", "")[:512]
                if status in ok:
                    return status, _json_object(raw, current, status)
                try:
                    return status, _json_object(raw, current, status)
                except OAuthHttpError:
                    return status, None
            raise OAuthHttpError(f"{shown(url)}: more than {MAX_REDIRECTS} redirects")
    except TimeoutError:
        raise OAuthHttpError(f"{shown(url)} did not answer in time") from None
    except httpx.HTTPError as exc:
        refused = egress_refusal(exc)  # the egress rule and its setting: no request text in it
        raise OAuthHttpError(f"{shown(current)}: {refused or type(exc).__name__}") from None


def str_field(doc: dict[str, Any], key: str, *, required: bool = False, limit: int = 2048) -> str | None:
    """``doc[key]`` when it is a string of at most ``limit`` characters; a ValueError naming the
    key when it is required and missing, or present with the wrong type."""
    value = doc.get(key)
    if value is None:
        if required:
            raise ValueError(f"{key} is missing")
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise ValueError(f"{key} must be a string of at most {limit} characters")
    return value


def str_list(doc: dict[str, Any], key: str, *, limit: int = 200) -> tuple[str, ...] | None:
    """``doc[key]`` when it is a list of at most ``limit`` strings; None when absent."""
    value = doc.get(key)
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) > limit
        or not all(isinstance(v, str) and len(v) <= 2048 for v in value)
    ):
        raise ValueError(f"{key} must be a list of at most {limit} strings")
    return tuple(value)


def bool_field(doc: dict[str, Any], key: str) -> bool:
    value = doc.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false")
    return value

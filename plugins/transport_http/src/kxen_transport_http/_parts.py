"""What one request's exchange and the GET stream need of the Streamable HTTP stream.

:mod:`._exchange` and :mod:`._get_stream` work on the stream that :mod:`.streamable` builds; they see
it through this protocol, so neither imports the module that imports them.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import anyio.abc
import httpx

from kxen_core import Message, RequestFailed
from kxen_core.errors import ClosedError, KxenError

from ._mcp_session import McpSession
from .options import HttpOptions
from .plumbing import Redactor, SseCursor, SseFollower, map_errors


class StreamParts(Protocol):
    name: str
    client: httpx.AsyncClient
    tg: anyio.abc.TaskGroup
    options: HttpOptions
    redact: Redactor
    failure: KxenError | None
    post_url: httpx.URL | str
    post_errors: map_errors
    mcp: McpSession
    follower: SseFollower
    resumes: int

    def diag(self, text: str) -> None: ...

    async def deliver(self, message: Message | RequestFailed) -> None: ...

    async def deliver_error(self, rid: Any, message: str) -> None: ...

    def fail(self, error: KxenError) -> None: ...

    async def send_request(
        self,
        method: str,
        url: httpx.URL | str,
        headers: httpx.Headers,
        *,
        content: bytes | None = None,
        timeout: Any = ...,
    ) -> httpx.Response: ...

    def closed_error(self) -> ClosedError: ...

    def open_get(self, cursor: SseCursor) -> AbstractAsyncContextManager[httpx.Response]: ...

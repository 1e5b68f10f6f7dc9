"""What the server's MCP session adds to every request: ``Mcp-Session-Id``, ``MCP-Protocol-Version``.

The session id comes with the answer to ``initialize``, the protocol version inside its result; both
are sent on every later request. ``404`` while a session id is known means the server ended the
session (:class:`SessionExpired`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx

from kxen_core import Message, ReusableHeaders, ServerConfig, TransportContext
from kxen_core.errors import SessionExpired as SessionGone

from .plumbing import CredentialMemo, Redactor, add_credentials, config_headers, request_headers

ACCEPT_POST = "application/json, text/event-stream"
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
#: the Mcp-Session-Id value must be visible ASCII; refuse absurdly long ones too
MAX_SESSION_ID_LENGTH = 1024
_VERSION_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class SessionExpired(SessionGone):
    """The server answered 404 to a request that carried the session id: the session is gone (the
    core's :class:`kxen_core.errors.SessionExpired`: the runtime starts a new session and re-sends)."""


def answers(message: Message, rid: Any) -> bool:
    """True when ``message`` is the response to request ``rid``."""
    return (
        type(message) is dict
        and "method" not in message
        and message.get("id") == rid
        and ("result" in message or "error" in message)
    )


class McpSession:
    """The session state of one connection and the headers that carry it."""

    def __init__(
        self,
        server: ServerConfig,
        context: TransportContext,
        redact: Redactor,
        where: str,
        diag: Callable[[str], None],
        credentials: CredentialMemo,
    ) -> None:
        self._server = server
        self._context = context
        self._redact = redact
        self._where = where  # the endpoint without secrets, for messages
        self._diag = diag
        self._credentials = credentials
        self.id: str | None = None
        self.protocol_version: str | None = None
        #: the id of the initialize request until its answer went by
        self.init_id: Any = None
        #: the server ended the session: no DELETE on close
        self.expired = False
        #: the POST headers while kxen_credential_lookup need not be asked; None: build them again
        self._fixed_post: httpx.Headers | None = None
        #: the held credential answer they carry (None: none, the hook had nothing)
        self._fixed_with: ReusableHeaders | None = None

    def post_headers_now(self) -> httpx.Headers | None:
        """The POST headers without asking anyone, or None when a credential plugin must be asked.

        Without such a plugin, once it answered that it has nothing for this connection, or while
        the answer it vouched for holds (see :class:`~.plumbing.CredentialMemo`), they are the
        config's headers, that answer's, the session's and the fixed ones: the same for every POST
        until the session id, the protocol version or the held answer changes. httpx copies the
        headers it is given, so one object serves every request.
        """
        held = None
        if self._credentials.asks(self._context):
            held = self._credentials.reusable(self._context, self._server.url or "", self._redact)
            if held is None:
                return None
        headers = self._fixed_post
        if headers is None or self._fixed_with is not held:
            headers = config_headers(self._server, self._redact)
            if held is not None:
                add_credentials(headers, held, self._server, self._context, self._redact)
            self._add_to(headers)
            headers["Accept"] = ACCEPT_POST
            headers["Content-Type"] = "application/json"
            self._fixed_post, self._fixed_with = headers, held
        return headers

    async def post_headers(self) -> httpx.Headers:
        """The POST headers, asking the credential plugin when there is one."""
        headers = self.post_headers_now()
        if headers is None:
            headers = await self.headers("POST")
            headers["Accept"] = ACCEPT_POST
            headers["Content-Type"] = "application/json"
        return headers

    async def headers(self, method: str) -> httpx.Headers:
        """The config's, the credential plugin's and the session's headers for a ``method`` request."""
        headers = await request_headers(
            self._server, self._context, method, self._server.url or "", self._redact, memo=self._credentials
        )
        self._add_to(headers)
        return headers

    def _add_to(self, headers: httpx.Headers) -> None:
        if self.id is not None:
            headers[SESSION_HEADER] = self.id
        if self.protocol_version is not None:
            headers[VERSION_HEADER] = self.protocol_version

    def take_id(self, response: httpx.Response) -> None:
        """Keep the session id the answer to ``initialize`` carries, if it is a sane one."""
        value = response.headers.get(SESSION_HEADER)
        if value is None:
            return
        if 0 < len(value) <= MAX_SESSION_ID_LENGTH and all(0x21 <= ord(c) <= 0x7E for c in value):
            self.id = value
            self._fixed_post = None
        else:
            self._diag("ignored an Mcp-Session-Id that is not visible ASCII")

    def note(self, message: Message) -> None:
        """Look at a message from the server while the answer to ``initialize`` is awaited."""
        if answers(message, self.init_id):
            result = message.get("result")
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            if isinstance(version, str) and _VERSION_RE.match(version):
                self.protocol_version = version
                self._fixed_post = None
            self.init_id = None  # answered: stop looking

    def check(self, response: httpx.Response) -> None:
        """Raise :class:`SessionExpired` for a 404 while a session id is known."""
        if response.status_code == 404 and self.id is not None:
            raise SessionExpired(f"session expired (HTTP 404 from {self._where})", server=self._server.name)

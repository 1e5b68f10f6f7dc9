"""The headers of a request: ``server.headers`` plus what ``kxen_credential_lookup`` adds.

Every value is remembered by the transport's :class:`Redactor` before anything is sent.
"""

from __future__ import annotations

from typing import Any

import httpx

from kxen_core import (
    AuthChallenge,
    CredentialRequest,
    ServerConfig,
    TransportContext,
    egress_for,
    hookcall,
    using_egress,
)
from kxen_core.errors import AuthRequired, PluginHookError, ProtocolError

from ._secrets import Redactor

_NOT_ASCII = "a request header value is not ASCII; it cannot be sent"


def has_credential_hook(context: TransportContext) -> bool:
    """True when some plugin implements ``kxen_credential_lookup`` (cheap: ask it per request)."""
    pm = context.pm
    if pm is None:
        return False
    caller = getattr(pm.hook, "kxen_credential_lookup", None)
    return caller is not None and bool(caller.get_hookimpls())


class CredentialMemo:
    """What one connection learned of ``kxen_credential_lookup``: whether to ask it per request.

    An answer of ``None`` to a request without a challenge holds for the connection: later
    requests are sent with the configured headers alone, without asking, until the server answers
    401 or 403 (the transport then asks again with the challenge, and per request once an answer
    has headers). Each transport has its own memo, so a reconnection or a restart asks again.
    """

    __slots__ = ("nothing",)

    def __init__(self) -> None:
        #: the last lookup without a challenge answered None
        self.nothing = False

    def asks(self, context: TransportContext) -> bool:
        """Whether the next request without a challenge must ask the hook."""
        return not self.nothing and has_credential_hook(context)


def config_headers(server: ServerConfig, redact: Redactor) -> httpx.Headers:
    """``server.headers`` as request headers; their values are remembered as secrets."""
    redact.remember(server.headers.values())
    headers = httpx.Headers()
    try:
        for name, value in server.headers.items():
            headers[name] = value
    except UnicodeEncodeError:
        raise ProtocolError(_NOT_ASCII, server=server.name) from None
    return headers


async def request_headers(
    server: ServerConfig,
    context: TransportContext,
    method: str,
    url: str,
    redact: Redactor,
    *,
    challenge: AuthChallenge | None = None,
    memo: CredentialMemo | None = None,
) -> httpx.Headers:
    """``server.headers`` plus what ``kxen_credential_lookup`` answers for this request.

    The hook is not called at all when no plugin implements it; ``challenge`` is the 401/403 answer
    when asking again. A plugin that raises fails this request (``PluginHookError``), except an
    ``AuthRequired``, which passes unwrapped; an answer that is not a dict of strings is a diagnostic.
    With a ``memo`` (see :class:`CredentialMemo`), a request without a challenge does not ask when an
    earlier one learned there is nothing to ask for, and every answer updates it.
    """
    extra: Any = None
    asks = memo.asks(context) if memo is not None and challenge is None else has_credential_hook(context)
    if context.pm is not None and asks:
        request = CredentialRequest(method=method, url=url, challenge=challenge, context=context)
        try:
            # a sign-in plugin's own requests (discovery, refresh) are checked by this server's egress rules
            with using_egress(egress_for(server, context.settings)):
                extra = await hookcall.acall_first(context.pm, "kxen_credential_lookup", server=server, request=request)
        except PluginHookError as exc:
            if isinstance(exc.__cause__, AuthRequired):
                raise exc.__cause__ from None
            raise
        if memo is not None:
            memo.nothing = extra is None and challenge is None
    headers = config_headers(server, redact)
    try:
        if isinstance(extra, dict):
            for name, value in extra.items():
                if not isinstance(name, str) or not isinstance(value, str):
                    context.diagnostic(f"{server.name}: ignored a credential header that is not a string pair")
                    continue
                if name.lower() != "dpop":  # a one-request proof (RFC 9449), new each time: no secret to keep
                    redact.remember((value,))
                headers[name] = value
        elif extra is not None:
            context.diagnostic(f"{server.name}: kxen_credential_lookup answered a {type(extra).__name__}, not a dict")
    except UnicodeEncodeError:
        raise ProtocolError(_NOT_ASCII, server=server.name) from None
    return headers

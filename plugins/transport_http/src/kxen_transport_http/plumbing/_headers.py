"""The headers of a request: ``server.headers`` plus what ``kxen_credential_lookup`` adds.

Every value is remembered by the transport's :class:`Redactor` before anything is sent.
"""

from __future__ import annotations

from typing import Any

import httpx

from kxen_core import (
    AuthChallenge,
    CredentialRequest,
    ReusableHeaders,
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
    has headers). An answer that is a :class:`~kxen_core.ReusableHeaders` is held too, for the
    requests to the same URL while the same plugins are registered, the transport's
    :class:`Redactor` still holds its values and its own ``still_valid()`` check passes (asked
    before each request instead of the hook); it is dropped whenever the hook is asked again (a
    401/403 included). Each transport has its own memo, so a reconnection or a restart asks again.
    """

    __slots__ = ("_clears", "_generation", "_url", "held", "nothing")

    def __init__(self) -> None:
        #: the last lookup without a challenge answered None
        self.nothing = False
        #: the last lookup without a challenge answered headers it vouches for (see reusable())
        self.held: ReusableHeaders | None = None
        self._url = ""
        self._generation: object = None
        self._clears = 0

    def asks(self, context: TransportContext) -> bool:
        """Whether the next request without a challenge must ask the hook (or :meth:`reusable`)."""
        return not self.nothing and has_credential_hook(context)

    def reusable(self, context: TransportContext, url: str, redact: Redactor) -> ReusableHeaders | None:
        """The held answer when a request to ``url`` without a challenge may send it without
        asking, else None (a held answer whose check failed is dropped)."""
        held = self.held
        if held is None:
            return None
        if url != self._url or _generation(context) != self._generation or redact.clears != self._clears:
            return None
        try:
            valid = held.still_valid() is True
        except Exception:  # a broken check: ask the hook, which reports what is wrong
            valid = False
        if not valid:
            self.held = None
            return None
        return held

    def learn(
        self, answer: Any, challenge: AuthChallenge | None, context: TransportContext, url: str, redact: Redactor
    ) -> None:
        """Take the hook's ``answer`` to a request to ``url`` (sent with it: its values remembered)."""
        self.nothing = answer is None and challenge is None
        if challenge is None and isinstance(answer, ReusableHeaders) and _string_pairs(answer):
            self.held, self._url, self._generation, self._clears = answer, url, _generation(context), redact.clears
        else:
            self.held = None


def _generation(context: TransportContext) -> object:
    """The plugin manager's count of plugin changes (None for a manager that keeps none)."""
    return getattr(context.pm, "generation", None)


def _string_pairs(answer: dict[Any, Any]) -> bool:
    return all(isinstance(name, str) and isinstance(value, str) for name, value in answer.items())


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
    earlier one learned there is nothing to ask for, or sends the answer it holds while that
    answer's check passes, and every answer updates it.
    """
    extra: Any = None
    held: ReusableHeaders | None = None
    if memo is not None and challenge is None:
        asks = memo.asks(context)
        if asks:
            held = memo.reusable(context, url, redact)
    else:
        asks = has_credential_hook(context)
    pm = context.pm
    asked = held is None and pm is not None and asks
    if held is not None:
        extra = held
    elif asked and pm is not None:
        if memo is not None:
            memo.held = None  # asked again: nothing is held until this answer says so
        request = CredentialRequest(method=method, url=url, challenge=challenge, context=context)
        try:
            # a sign-in plugin's own requests (discovery, refresh) are checked by this server's egress rules
            with using_egress(egress_for(server, context.settings)):
                extra = await hookcall.acall_first(pm, "kxen_credential_lookup", server=server, request=request)
        except PluginHookError as exc:
            if isinstance(exc.__cause__, AuthRequired):
                raise exc.__cause__ from None
            raise
    headers = config_headers(server, redact)
    add_credentials(headers, extra, server, context, redact)
    if asked and memo is not None:
        memo.learn(extra, challenge, context, url, redact)
    return headers


def add_credentials(
    headers: httpx.Headers, extra: Any, server: ServerConfig, context: TransportContext, redact: Redactor
) -> None:
    """Set the headers of a ``kxen_credential_lookup`` answer ``extra`` (remembered as secrets, but a
    DPoP proof); a pair that is not two strings, or an answer that is not a dict, is a diagnostic."""
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

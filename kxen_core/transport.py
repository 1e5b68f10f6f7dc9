"""What a transport plugin provides, and what the core gives it.

A plugin declares its kinds through ``kxen_register_transports(register)``::

    @hookimpl
    def kxen_register_transports(register):
        register("stdio", open_stdio, options=StdioOptions)

The opener is called as ``opener(server, context)`` and returns a :class:`Transport`: an async context
manager whose entering opens the connection and yields a :class:`MessageStream`; leaving it closes
everything it started, bounded in time, even when the surrounding task is cancelled.

Messages are plain JSON-RPC dicts. A transport reports trouble that is not fatal (a non-JSON stdout
line, an oversized frame, stderr output) through ``context.diagnostic`` and keeps going; when the
connection ends it raises :class:`kxen_core.errors.ClosedError` from ``receive``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

import attrs

if TYPE_CHECKING:
    import pluggy

    from kxen_core.config.models import ServerConfig, Settings
    from kxen_core.launch.resolve import Launch

Message = dict[str, Any]


@attrs.frozen
class RequestFailed:
    """Put on the stream (returned by ``receive``) when one request failed inside the transport.

    The session fails that request with ``error`` -- a local error, never confusable with a
    JSON-RPC error the server sent -- and keeps the connection.
    """

    id: Any
    error: BaseException


@runtime_checkable
class MessageStream(Protocol):
    """The connection a transport yields. The session calls these four methods, and one optional:

    ``set_receiver(callback) -> bool``: a stream that can hand each message over as it arrives
    (in the event-loop callback that read it, with no task switch) offers this. Given a callable it
    returns True and from then on calls ``callback(message)`` for every message instead of
    returning it from ``receive`` (which then returns only what arrived before, and raises
    ``ClosedError`` at the end as usual), or returns False and changes nothing. ``callback`` never
    blocks and never raises ``Exception``. ``set_receiver(None)`` stops the pushing: messages wait
    for ``receive`` again (bounded as ever)."""

    async def send(self, message: Message) -> None:
        """Send one JSON-RPC message, waiting for room if needed. Raises ``ClosedError`` once the
        connection is gone."""

    def send_nowait(self, message: Message) -> bool:
        """Queue ``message`` without waiting and return True, or return False having queued
        nothing (backpressure, closed, or a stream that cannot): the caller then awaits ``send``."""

    async def receive(self) -> Message | RequestFailed:
        """Return the next message from the server. Raises ``ClosedError`` at the end."""

    def describe(self) -> dict[str, Any]:
        """Secret-free facts for status and diagnostics (pid, url, recent stderr...)."""


class Transport(Protocol):
    """What an opener returns: entering connects, leaving closes everything (bounded)."""

    async def __aenter__(self) -> MessageStream: ...

    async def __aexit__(self, *exc: Any) -> bool | None: ...


def _no_diagnostic(message: str) -> None:
    pass


#: the options class a kind registered (``TransportContext[StdioOptions]`` in an opener's signature)
OptionsT = TypeVar("OptionsT")


@attrs.define(kw_only=True)
class TransportContext(Generic[OptionsT]):
    """What the core hands to a transport opener with the server's config.

    ``options`` is the kind's options object, structured and validated at config load (``None`` for
    a kind registered without options, or a context built by hand). ``launch`` is the resolved launch of a local kind
    -- the
    exact command, args, cwd and env the core fingerprinted (and, for a project server, had
    approved): start exactly that, never resolve again. It is ``None`` for remote kinds.
    """

    workspace: Path
    diagnostic: Callable[[str], None] = _no_diagnostic
    #: the host's plugin manager, for the credential seam (call it through kxen_core.hookcall)
    pm: pluggy.PluginManager | None = None
    settings: Settings | None = None
    options: OptionsT | None = None
    launch: Launch | None = None
    #: the host's kxen home: a transport may keep per-server files under it (the stdio transport's
    #: stderr logs in ``home/logs``); None when there is none (a context built by hand)
    home: Path | None = None
    #: what the person should know although nothing failed (the OAuth token store's mode was
    #: repaired): shown with the server's status (its ``note``) and kept among its diagnostics
    notice: Callable[[str], None] = _no_diagnostic


Opener = Callable[["ServerConfig", "TransportContext[Any]"], Transport]


class RegisterTransport(Protocol):
    """The ``register`` callback of ``kxen_register_transports``."""

    def __call__(self, name: str, opener: Opener, *, options: type | None = None) -> None: ...


#: the most of a ``WWW-Authenticate`` value an :class:`AuthChallenge` keeps (characters)
CHALLENGE_MAX_CHARS = 8 * 1024


def _bounded_challenge(value: str) -> str:
    return value[:CHALLENGE_MAX_CHARS]


@attrs.frozen(kw_only=True)
class AuthChallenge:
    """An HTTP answer that refused a request for want of credentials (401) or of scope (403).

    ``www_authenticate`` is the answer's ``WWW-Authenticate`` value(s) as received, joined by
    ``", "`` and cut to :data:`CHALLENGE_MAX_CHARS`: the server's text, untrusted.
    """

    status: int
    www_authenticate: str = attrs.field(default="", converter=_bounded_challenge)
    #: the answer's ``DPoP-Nonce`` header (RFC 9449 §9), when it is a sane nonce; else ``""``
    dpop_nonce: str = ""


@attrs.frozen(kw_only=True)
class CredentialRequest:
    """A remote request that wants credentials (method and URL; never a body).

    ``challenge`` is set when the transport asks again because the server answered 401 or 403;
    ``context`` is the asking transport's context (``pm``, ``settings``, ``home``, ``diagnostic``),
    left out of equality and repr.
    """

    method: str
    url: str
    challenge: AuthChallenge | None = None
    context: TransportContext[Any] | None = attrs.field(default=None, eq=False, repr=False)


class ReusableHeaders(dict[str, str]):
    """An answer of ``kxen_credential_lookup`` that the asking transport may send again without
    asking: the headers, and ``still_valid``, a cheap synchronous check of everything the answer
    depends on (for the oauth plugin: the token store file's stamp, the environment that picks the
    store, the clock against the token's expiry). The transport keeps the answer for the later
    requests of its connection to the same URL and, before each, calls ``still_valid()`` instead of
    the hook: True sends the same headers, False (or an exception) asks the hook again. It is
    dropped at a ``401``/``403`` (the hook is then asked with the challenge) and when the plugins
    change. A plain ``dict`` is asked for before every request."""

    __slots__ = ("still_valid",)

    def __init__(self, headers: Mapping[str, str], still_valid: Callable[[], bool]) -> None:
        super().__init__(headers)
        self.still_valid = still_valid


__all__ = [
    "AuthChallenge",
    "CHALLENGE_MAX_CHARS",
    "CredentialRequest",
    "Message",
    "MessageStream",
    "Opener",
    "RegisterTransport",
    "RequestFailed",
    "ReusableHeaders",
    "Transport",
    "TransportContext",
]

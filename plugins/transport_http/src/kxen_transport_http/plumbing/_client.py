"""The client and the skeleton of an HTTP transport: options, the one ``httpx.AsyncClient``, the
queue ``receive`` reads, the sticky failure, and closing -- shielded and bounded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

import anyio
import anyio.abc
import httpx

from kxen_core import EgressPolicy, Message, RequestFailed, ServerConfig, TransportContext, egress_for
from kxen_core.errors import ClosedError, ConnectError, KxenError
from kxen_core.plugins.kinds import structure_options

from ._auth import answer_challenge, auth_required, challenge_of, nonce_challenge, refused_for_auth
from ._bodies import ACCEPT_ENCODING
from ._guard import guarded_transport
from ._headers import CredentialMemo
from ._secrets import Redactor, safe_url

#: each best-effort closing step (a farewell request, waiting for tasks, closing the client) gets this long
CLOSE_STEP_SECONDS = 2.0

TransportFactory = Callable[[ServerConfig], "httpx.AsyncBaseTransport | None"]
Options = TypeVar("Options")


def transport_options(server: ServerConfig, context: TransportContext, cls: type[Options]) -> Options:
    """The options of ``server``: ``context.options`` as the host structured them at config load.

    A context built by hand (tests, embedding) has none: then ``server.options`` is structured into
    ``cls`` by the host's converter, exactly as config loading does, so an unknown key or a bad value
    raises the same ``ConfigError`` naming its key path; no options at all are ``cls()``'s defaults.
    """
    if context.options is not None:
        return context.options
    return structure_options(cls, server)


def open_client(
    server: ServerConfig,
    options: Any,
    http_transport: httpx.AsyncBaseTransport | None = None,
    factory: TransportFactory | None = None,
    *,
    egress: EgressPolicy | None = None,
) -> httpx.AsyncClient:
    """The one ``httpx.AsyncClient`` of a transport: no redirects (a redirect must not carry
    credentials elsewhere), ``Accept-Encoding`` limited to :data:`ACCEPT_ENCODING`, connect bounded by
    ``options.connectTimeoutSeconds``, no read timeout
    (streams stay open; requests are bounded by the session), every connection checked by the
    egress guard after its name was resolved (:func:`guarded_transport` with ``egress``, else the
    policy the core set for the task: :func:`kxen_core.current_egress`), and the network replaced by
    ``http_transport`` or by what ``factory(server)`` answers, when either is given (tests)."""
    if not server.url or not server.url.startswith(("http://", "https://")):
        raise ConnectError(f"an {server.kind} server needs an http:// or https:// url", server=server.name)
    if http_transport is None and factory is not None:
        http_transport = factory(server)
    if http_transport is None:
        http_transport = guarded_transport(egress)
    return httpx.AsyncClient(
        transport=http_transport,
        timeout=httpx.Timeout(connect=options.connectTimeoutSeconds, read=None, write=30.0, pool=30.0),
        follow_redirects=False,
        # only what the bounded readers inflate (see _bodies): never an encoding that could not be bounded
        headers={"Accept-Encoding": ACCEPT_ENCODING},
    )


class HttpMessageStream:
    """What an HTTP :class:`~kxen_core.MessageStream` is made of; subclasses add ``send``,
    ``send_nowait`` and ``describe``.

    It holds the server, the context, the client, the transport's task group and its options; a
    :class:`Redactor`; one bounded queue (``options.queueSize``) that :meth:`deliver` fills and
    ``receive`` empties, without a checkpoint unless it is full or empty -- or, once the session
    set a receiver (:meth:`set_receiver`), :meth:`deliver` hands each message to it in the task
    that read it, with no hop through the queue and the session's reader task; one sticky failure
    (:meth:`fail`), after which every call raises :meth:`closed_error`. :class:`HttpTransport`
    drives its life: :meth:`start`, then on leaving :meth:`cancel_tasks`, :meth:`shutdown` (which
    ends with :meth:`farewell`) and :meth:`join`.
    """

    def __init__(
        self,
        server: ServerConfig,
        context: TransportContext,
        client: httpx.AsyncClient,
        tg: anyio.abc.TaskGroup,
        options: Any,
    ) -> None:
        self.server = server
        self.name = server.name
        self.context = context
        self.client = client
        self.tg = tg
        self.options = options
        self.url = server.url or ""
        self.safe_url = safe_url(self.url)
        meta = server.oauth.authorizationServerMetadataUrl if server.oauth else None
        self.redact = Redactor(urls=[self.url, meta])  # query values (api_key=...) are secrets too
        #: whether to ask kxen_credential_lookup per request (one memo per connection)
        self.credentials = CredentialMemo()
        #: for a POST whose answer is awaited where it is sent: bounded by the server's request timeout
        self.post_timeout = httpx.Timeout(
            connect=options.connectTimeoutSeconds, read=server.timeouts.requestSeconds, write=30.0, pool=30.0
        )
        self._feed, self._inbox = anyio.create_memory_object_stream[Message | RequestFailed](options.queueSize)
        self._receiver: Callable[[Any], None] | None = None  # set_receiver's: the session's taker
        #: the first failure: a TransportError, or an AuthRequired when the server refused kxen's
        #: credentials for good, or the PluginHookError of a credential plugin that broke
        self.failure: KxenError | None = None
        self.closing = False
        self.posts = self.received = 0

    async def receive(self) -> Message | RequestFailed:
        try:
            return self._inbox.receive_nowait()  # no checkpoint while answers are queued
        except anyio.WouldBlock:
            pass
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise self.closed_error()  # noqa: B904 (its cause is kept, the context is not shown)
        try:
            return await self._inbox.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise self.closed_error()  # noqa: B904 (its cause is kept, the context is not shown)

    def set_receiver(self, receiver: Callable[[Any], None] | None) -> bool:
        """Hand every message delivered from now on to ``receiver``, in the task that read it (no
        hop through the queue and the session's reader task); ``None``: queue them again. True.

        A :class:`RequestFailed` still goes through the queue: the failure that fails a request
        often ends the transport too, and the reader must take the one before it learns the other."""
        self._receiver = receiver
        return True

    async def deliver(self, message: Message | RequestFailed) -> None:
        """Hand ``message`` to the receiver, after whatever still waits in the queue (in order), or
        queue it for ``receive`` (waits only while the queue is full). Dropped once closed."""
        self.received += 1
        receiver = self._receiver
        if receiver is not None and type(message) is not RequestFailed:
            if self.failure is not None:
                return  # closed: nobody takes any more
            inbox = self._inbox
            while True:  # what was queued before the receiver was set goes first (bounded: the queue's size)
                try:
                    receiver(inbox.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                    break
                if self._receiver is not receiver:
                    break
            if self._receiver is receiver:
                receiver(message)
                return
        try:
            self._feed.send_nowait(message)  # no checkpoint unless the queue is full
        except anyio.WouldBlock:
            try:
                await self._feed.send(message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # closed: nobody reads any more

    async def send_request(
        self,
        method: str,
        url: httpx.URL | str,
        headers: httpx.Headers,
        *,
        content: bytes | None = None,
        timeout: Any = httpx.USE_CLIENT_DEFAULT,
    ) -> httpx.Response:
        """Send one request and return its response, streamed (the caller closes it).

        An answer that asks for credentials (:func:`refused_for_auth`) is closed and the request is
        sent once more with the headers :func:`answer_challenge` gives; when there are none, or the
        second answer asks again, it raises :class:`~kxen_core.errors.AuthRequired` -- except that a
        DPoP nonce challenge (:func:`nonce_challenge`) is answered once more.
        """
        client = self.client
        response = await client.send(
            client.build_request(method, url, content=content, headers=headers, timeout=timeout), stream=True
        )
        if not refused_for_auth(response):
            return response
        where = safe_url(str(url))
        challenge = challenge_of(response)
        await response.aclose()
        nonce_answered = nonce_challenge(challenge)
        for _ in range(2):  # one answer per request, and one more for a DPoP nonce (RFC 9449 §9)
            headers = await answer_challenge(
                self.server, self.context, method, str(url), headers, challenge, where, self.redact, self.credentials
            )
            response = await client.send(
                client.build_request(method, url, content=content, headers=headers, timeout=timeout), stream=True
            )
            if not refused_for_auth(response):
                return response
            challenge = challenge_of(response)
            await response.aclose()
            if nonce_answered or not nonce_challenge(challenge):
                break
            nonce_answered = True
        raise auth_required(self.server, self.context, challenge, where, self.redact)

    def diag(self, text: str) -> None:
        """A redacted diagnostic, unless the transport is closing."""
        if not self.closing:
            self.context.diagnostic(self.redact(f"{self.name}: {text}", 500))

    def fail(self, error: KxenError) -> None:
        """Close the queue with ``error``, the first failure only (a diagnostic says it). After an
        error that is no ``ClosedError`` (an ``AuthRequired``: the runtime reads the cause, the
        server needs a login, not a reconnection) every call raises a ``ClosedError`` caused by it."""
        if self.failure is None:
            self.failure = error
            self.diag(str(error))
            self._feed.close()

    def closed_error(self) -> ClosedError:
        """The ``ClosedError`` to raise once failed: the failure's text (and kind, when it is a
        ``ClosedError``), the failure as its cause unless it is a ``ClosedError`` itself, and no
        exception context (httpx's may hold secrets)."""
        failure = self.failure or ClosedError("transport closed", server=self.name)
        # a ClosedError keeps its kind (SessionExpired: the runtime renews the session and re-sends)
        cls = type(failure) if isinstance(failure, ClosedError) else ClosedError
        error = cls(str(failure), server=self.name)
        if not isinstance(failure, ClosedError):
            error.__cause__ = failure
        error.__suppress_context__ = True
        return error

    # --- life, driven by HttpTransport --------------------------------------------------------

    async def start(self) -> None:
        """Open the connection, if opening needs I/O (raise ``ConnectError`` when it cannot)."""

    def cancel_tasks(self) -> None:
        """Cancel tasks the stream runs outside the task group (the group itself is cancelled)."""

    async def shutdown(self) -> None:
        """Stop feeding the queue, then :meth:`farewell`. Called shielded."""
        self.closing = True
        if self.failure is None:
            self.failure = ClosedError("transport closed", server=self.name)
        self._feed.close()
        self._inbox.close()
        await self.farewell()

    async def farewell(self) -> None:
        """A best-effort last request (a session ``DELETE``); bound it by ``CLOSE_STEP_SECONDS``."""

    async def join(self) -> None:
        """Wait, bounded, for the tasks :meth:`cancel_tasks` cancelled. Called shielded."""


Stream = TypeVar("Stream", bound=HttpMessageStream)


class HttpTransport(Generic[Stream]):
    """The async context manager an HTTP opener returns; entered once.

    Entering structures the options (:func:`transport_options`), makes the client
    (:func:`open_client`) and a task group, builds the stream with :meth:`make_stream` and awaits
    its :meth:`~HttpMessageStream.start`. Leaving -- or a failed start -- cancels the task group and
    the stream's own tasks, shuts the stream down and waits for its tasks, shielded and each step
    bounded, then closes the client (bounded). Exceptions from the body of the ``async with`` pass
    through unchanged: the stream's tasks never raise, so the task group never wraps them.
    """

    #: the kind's attrs options class
    options_class: ClassVar[type]

    def __init__(
        self,
        server: ServerConfig,
        context: TransportContext,
        http_transport: httpx.AsyncBaseTransport | None = None,
        factory: Callable[[], TransportFactory | None] = lambda: None,
    ) -> None:
        self._server = server
        self._context = context
        self._http_transport = http_transport
        self._factory = factory  # read when entering, so a factory set in between counts
        self._client: httpx.AsyncClient | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._stream: Stream | None = None

    def make_stream(self, client: httpx.AsyncClient, tg: anyio.abc.TaskGroup, options: Any) -> Stream:
        raise NotImplementedError

    async def __aenter__(self) -> Stream:
        if self._client is not None:
            raise RuntimeError("a transport can be entered only once")
        options: Any = transport_options(self._server, self._context, self.options_class)
        egress = egress_for(self._server, self._context.settings)
        self._client = open_client(self._server, options, self._http_transport, self._factory(), egress=egress)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            self._stream = self.make_stream(self._client, self._tg, options)
            await self._stream.start()
        except BaseException:
            await self._close()
            raise
        return self._stream

    async def __aexit__(self, *exc: Any) -> None:
        await self._close()

    async def _close(self) -> None:
        tg, client, stream = self._tg, self._client, self._stream
        assert tg is not None and client is not None
        tg.cancel_scope.cancel()
        try:
            if stream is not None:
                stream.cancel_tasks()
                with anyio.CancelScope(shield=True):
                    try:
                        await stream.shutdown()
                    finally:
                        await stream.join()
        finally:
            try:
                await tg.__aexit__(None, None, None)
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_STEP_SECONDS):
                    await client.aclose()

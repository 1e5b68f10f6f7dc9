"""The HTTP plumbing of kxen's HTTP transports -- a public API.

``kxen_transport_http.plumbing`` is what kxen's ``http`` transport (Streamable HTTP, this
distribution) and ``sse`` transport (legacy HTTP+SSE, the ``kxen-transport-sse`` distribution) are
built on, and what a third-party HTTP transport may use too. Every name in ``__all__`` is public
and keeps its meaning within kxen 0.x; the ``_``-prefixed modules behind it are not: import from
here. It has one owner: nothing below is written twice in either transport.

* **Client** -- :func:`open_client` makes the one ``httpx.AsyncClient`` of a transport (no
  redirects, bounded connect, an injectable network for tests); :func:`transport_options` gives a
  kind's options, structured by the host's converter when a context was built by hand.
* **Egress guard** -- :func:`guarded_transport` is the network of every kxen HTTP client: each
  connection resolves its host and checks every address against :mod:`kxen_core.policy.egress`
  (link-local and metadata addresses never, loopback and private ones only when allowed) before
  it connects to a checked address (:class:`GuardedTransport`, :class:`GuardedBackend`; a refusal
  is an :class:`EgressRefused`, found in an httpx error by :func:`egress_refusal`).
* **Secrets** -- header values and the query values of the configured URL are secrets:
  :class:`Redactor` remembers them and scrubs them from any text that leaves a transport;
  :func:`safe_url` drops userinfo, query and fragment; :func:`url_secrets` lists a URL's query values.
* **Headers** -- :func:`request_headers` is ``server.headers`` plus what ``kxen_credential_lookup``
  answers; :func:`config_headers`, :func:`add_credentials` and :func:`has_credential_hook` serve a
  transport that builds its headers once while no plugin needs asking (:class:`CredentialMemo`:
  the hook answered ``None``, or headers it vouches for with a ``still_valid`` check).
* **Auth** -- a 401 (or a 403 with a challenge) is :func:`refused_for_auth`; :func:`challenge_of`
  reads its bounded :class:`~kxen_core.AuthChallenge`; :func:`answer_challenge` asks
  ``kxen_credential_lookup`` again and gives the headers to send it once more with, or raises
  :class:`~kxen_core.errors.AuthRequired` (:func:`auth_required` builds it: the reason, the next
  step, the missing scopes); :func:`challenge_params` reads a challenge's auth-params.
* **Bodies** -- :func:`read_limited` reads a body up to a limit of *decoded* bytes
  (:class:`MessageTooLarge`); a compressed body is inflated from the raw stream by an
  :class:`Inflater` (:func:`inflater_for`) in pieces of at most :data:`DECODE_CHUNK` bytes, only in
  the encodings the client asks for (:data:`ACCEPT_ENCODING`), else :class:`BadEncoding`; both are
  a :class:`BodyError`. :func:`parse_messages` / :func:`encode` are JSON-RPC in and out (JSON
  nested too deeply is a ``ValueError``), :func:`content_type`.
* **Errors** -- :class:`map_errors` is the one boundary where exceptions become kxen's
  ``ConnectError`` / ``ClosedError`` / ``ProtocolError`` with redacted text;
  :func:`error_from_http` / :func:`rejected` turn an HTTP error answer into what the request gets
  (the server's JSON-RPC error, else ``HTTPStatusError``).
* **SSE** -- :func:`read_events` reads a stream with each event bounded (decoded, through
  :class:`SseParser`), moving an
  :class:`SseCursor`; :class:`SseFollower` is the one loop that follows a stream across
  reconnections (``Last-Event-ID``, the server's ``retry``, a bounded number of attempts; a ``GET``
  answered 400/404/405 is not retried); :func:`messages_in` and :func:`check_event_stream` go with it.
* **Skeleton** -- :class:`HttpTransport` (the async context manager an opener returns) and
  :class:`HttpMessageStream` (the queue ``receive`` reads or the push to the session's receiver, the
  sticky failure, closing) hold the
  life cycle both transports share: leaving closes everything, shielded, each step bounded by
  :data:`CLOSE_STEP_SECONDS`.
"""

from ._auth import answer_challenge, auth_required, challenge_of, challenge_params, login_hint, refused_for_auth
from ._bodies import (
    ACCEPT_ENCODING,
    DECODE_CHUNK,
    BadEncoding,
    BodyError,
    Inflater,
    MessageTooLarge,
    content_type,
    encode,
    inflater_for,
    parse_messages,
    read_limited,
)
from ._client import (
    CLOSE_STEP_SECONDS,
    HttpMessageStream,
    HttpTransport,
    TransportFactory,
    open_client,
    transport_options,
)
from ._errors import ERROR_BODY_LIMIT, describe_exception, error_from_http, jsonrpc_error, map_errors, rejected
from ._guard import (
    EgressRefused,
    GuardedBackend,
    GuardedTransport,
    egress_refusal,
    guarded_transport,
    resolve_host,
)
from ._headers import CredentialMemo, add_credentials, config_headers, has_credential_hook, request_headers
from ._secrets import Redactor, safe_url, url_secrets
from ._sse import (
    MAX_RETRY_MS,
    FollowEnd,
    SseCursor,
    SseFollower,
    SseParser,
    StreamRefused,
    check_event_stream,
    messages_in,
    read_events,
)

__all__ = [
    "ACCEPT_ENCODING",
    "BadEncoding",
    "BodyError",
    "CLOSE_STEP_SECONDS",
    "DECODE_CHUNK",
    "ERROR_BODY_LIMIT",
    "EgressRefused",
    "GuardedBackend",
    "GuardedTransport",
    "MAX_RETRY_MS",
    "FollowEnd",
    "HttpMessageStream",
    "HttpTransport",
    "Inflater",
    "MessageTooLarge",
    "Redactor",
    "SseCursor",
    "SseFollower",
    "SseParser",
    "StreamRefused",
    "TransportFactory",
    "CredentialMemo",
    "add_credentials",
    "answer_challenge",
    "auth_required",
    "challenge_of",
    "challenge_params",
    "check_event_stream",
    "config_headers",
    "content_type",
    "describe_exception",
    "egress_refusal",
    "encode",
    "error_from_http",
    "guarded_transport",
    "has_credential_hook",
    "inflater_for",
    "jsonrpc_error",
    "login_hint",
    "map_errors",
    "messages_in",
    "open_client",
    "parse_messages",
    "read_events",
    "read_limited",
    "refused_for_auth",
    "rejected",
    "request_headers",
    "resolve_host",
    "safe_url",
    "transport_options",
    "url_secrets",
]

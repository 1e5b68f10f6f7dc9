"""Requests in the stateless era (MCP 2026-07-28): the ``_meta`` envelope, ``resultType``, input-required
rounds, and the retries the new error codes call for.

Every request of a modern session goes through :meth:`Modern.request`:

* its ``params._meta`` carries the protocol version, the client capabilities and the client info
  (the caller's own ``_meta`` keys, a ``progressToken``, are kept);
* a result without ``resultType`` is complete; ``"input_required"`` (only ``tools/call``,
  ``resources/read`` and ``prompts/get`` may ask) is answered through the session's request handlers --
  the same host hooks that serve ``elicitation/create``, ``sampling/createMessage`` and ``roots/list``
  in the handshake era, declined when a declared one's hook passes; a request for a capability kxen
  did not declare fails the call, as the revision forbids it -- and the request is sent again with a new id,
  carrying ``inputResponses`` and the ``requestState`` echoed verbatim (omitted when none came), at
  most :data:`MAX_INPUT_ROUNDS` times; any other ``resultType`` is a protocol error;
* ``-32022`` (unsupported version) picks a version both sides speak from ``data.supported`` and
  sends again, once; ``-32020`` (header mismatch) on ``tools/call`` fetches the tools again (the
  ``x-mcp-header`` annotations may have changed) and sends again, once; ``-32021`` (a client
  capability the server needs) fails with the capabilities it names.

The whole exchange -- every round and the host's answers in between -- is bounded by the request's
one timeout, as a handshake-era call that the server interrupts with an elicitation is (for a call
that asked for progress, the timeout its progress keeps giving it: :mod:`kxen_core.protocol.clock`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

from kxen_core.errors import ProtocolError, RemoteError, RequestError, RequestTimeout

if TYPE_CHECKING:
    from kxen_core.protocol.clock import RequestClock

#: what kxen says of itself (``clientInfo`` at ``initialize``; ``_meta`` in the stateless era)
CLIENT_INFO = {"name": "kxen", "version": "0.1.0"}
MODERN_VERSIONS = ("2026-07-28",)
LATEST_MODERN_VERSION = MODERN_VERSIONS[0]
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

HEADER_MISMATCH = -32020
MISSING_CAPABILITY = -32021
UNSUPPORTED_VERSION = -32022
#: the errors only a server of the stateless era sends
MODERN_ERRORS = frozenset({HEADER_MISMATCH, MISSING_CAPABILITY, UNSUPPORTED_VERSION})

#: the methods whose result may be ``input_required``
INPUT_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})
#: what an input request may ask for (each behind a client capability)
INPUT_REQUEST_METHODS = frozenset({"roots/list", "sampling/createMessage", "elicitation/create"})
#: at most this many input-required rounds per request (then it fails)
MAX_INPUT_ROUNDS = 10
#: at most this many input requests in one round
MAX_INPUT_REQUESTS = 16
#: the longest ``requestState`` echoed back (it is opaque; a huge one is a hostile server)
MAX_REQUEST_STATE_CHARS = 1_000_000
#: a round that asks for nothing (state only) waits this long before retrying, doubling to the cap
STATE_ONLY_BACKOFF = (0.05, 0.5)

#: one request as it is: method, params, timeout, and the clock of a request that asked for progress
SendOnce = Callable[[str, Mapping[str, Any], float, "RequestClock | None"], Awaitable[dict[str, Any]]]
Handler = Callable[[Mapping[str, Any]], Awaitable[Any]]


def _brief(value: Any) -> str:
    text = value[:40] if isinstance(value, str) else f"(a JSON {type(value).__name__})"
    return repr(text)


def mutual_version(data: Any) -> str | None:
    """The newest modern version kxen speaks among ``data.supported`` of a ``-32022`` error, or None.
    (It may be the one just refused: the retry is sent once all the same, as the error asks.)"""
    supported = data.get("supported") if isinstance(data, dict) else None
    if not isinstance(supported, list):
        return None
    for version in MODERN_VERSIONS:
        if version in supported:
            return version
    return None


def modern_capabilities(legacy: Mapping[str, Any]) -> dict[str, Any]:
    """The client capabilities of the stateless era from those kxen declares at ``initialize``:
    ``roots`` is ``{}`` there (its ``listChanged`` is gone with the notification)."""
    caps = dict(legacy)
    if "roots" in caps:
        caps["roots"] = {}
    return caps


class Modern:
    """The stateless-era state of one session: the version in use and the envelope every request
    carries. ``refetch_tools`` (set by the server) fetches the tools catalog again after ``-32020``."""

    def __init__(
        self,
        version: str,
        capabilities: Mapping[str, Any],
        client_info: Mapping[str, Any],
        handlers: Mapping[str, Handler],
        *,
        server: str = "",
        refetch_tools: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.version = version
        self.capabilities = dict(capabilities)
        self.client_info = dict(client_info)
        self.handlers = handlers
        self.server = server
        self.refetch_tools = refetch_tools
        #: input-required rounds answered, over the session's life (status, tests)
        self.input_rounds = 0

    def envelope(self) -> dict[str, Any]:
        return {
            META_VERSION: self.version,
            META_CAPABILITIES: self.capabilities,
            META_CLIENT_INFO: self.client_info,
        }

    def stamp(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """``params`` with the envelope in its ``_meta`` (the caller's other ``_meta`` keys kept)."""
        out = dict(params or {})
        own = out.get("_meta")
        out["_meta"] = {**(own if isinstance(own, dict) else {}), **self.envelope()}
        return out

    async def request(
        self,
        send: SendOnce,
        method: str,
        params: Mapping[str, Any] | None,
        timeout: float,
        clock: RequestClock | None = None,
    ) -> dict[str, Any]:
        """Send ``method`` (through ``send``: one request as is) until it has a complete result.
        With ``clock`` (the request asked for progress), the rounds end when the clock says so:
        each progress notification gives them ``timeout`` again (:mod:`kxen_core.protocol.clock`)."""
        deadline = anyio.current_time() + timeout

        def remaining() -> float:
            return deadline - anyio.current_time() if clock is None else clock.left()

        base = dict(params or {})
        current = base
        rounds = 0
        retried: set[int] = set()
        delay = STATE_ONLY_BACKOFF[0]
        while True:
            left = remaining()
            if left <= 0:
                raise RequestTimeout(method, timeout, server=self.server, why=clock.why() if clock else "")
            try:
                result = await send(method, self.stamp(current), left, clock)
            except RemoteError as err:
                if not await self._recover(err, method, retried):
                    raise self._explained(err, method) from None
                continue
            kind = result.get("resultType", "complete")
            if kind == "complete" or (kind == "task" and method == "tools/call"):
                return result  # a task (the tasks extension): the caller follows it (protocol.tasks_modern)
            if kind != "input_required":
                raise ProtocolError(f"{method}: unknown resultType {_brief(kind)}", server=self.server)
            if method not in INPUT_METHODS:
                raise ProtocolError(
                    f"{method}: the server asked for input where the protocol allows none", server=self.server
                )
            rounds += 1
            if rounds > MAX_INPUT_ROUNDS:
                raise ProtocolError(
                    f"{method}: the server still asked for input after {MAX_INPUT_ROUNDS} rounds", server=self.server
                )
            self.input_rounds += 1
            requests = result.get("inputRequests")
            state = result.get("requestState")
            if state is not None and (not isinstance(state, str) or len(state) > MAX_REQUEST_STATE_CHARS):
                raise ProtocolError(
                    f"{method}: requestState must be a string of at most {MAX_REQUEST_STATE_CHARS} characters",
                    server=self.server,
                )
            current = {k: v for k, v in base.items() if k not in ("inputResponses", "requestState")}
            if requests:
                delay = STATE_ONLY_BACKOFF[0]
                with anyio.move_on_after(remaining()):
                    current["inputResponses"] = await self._answer(method, requests)
                if "inputResponses" not in current:
                    raise RequestTimeout(method, timeout, server=self.server)
            else:  # nothing to answer: the server is still working; wait a little, bounded by the timeout
                await anyio.sleep(min(delay, max(0.0, remaining())))
                delay = min(delay * 2, STATE_ONLY_BACKOFF[1])
            if state is not None:
                current["requestState"] = state

    async def _recover(self, err: RemoteError, method: str, retried: set[int]) -> bool:
        """Whether ``err`` is one the request may be sent again after (once per code)."""
        if err.code in retried:
            return False
        if err.code == UNSUPPORTED_VERSION:
            version = mutual_version(err.data)
            if version is None:
                return False
            self.version = version
        elif err.code == HEADER_MISMATCH and method == "tools/call" and self.refetch_tools is not None:
            await self.refetch_tools()
        else:
            return False
        retried.add(err.code)
        return True

    def _explained(self, err: RemoteError, method: str) -> RemoteError:
        if err.code == MISSING_CAPABILITY:
            need = err.data.get("requiredCapabilities") if isinstance(err.data, dict) else None
            names = need if isinstance(need, list) else list(need) if isinstance(need, dict) else []
            shown = ", ".join(str(n)[:40] for n in names[:8]) or "unnamed ones"
            return RemoteError(
                err.code,
                f"the server needs client capabilities this host does not offer ({shown}): {err.message}",
                err.data,
                method=method,
            )
        if err.code == UNSUPPORTED_VERSION:
            return RemoteError(
                err.code,
                f"no protocol version in common (kxen speaks {', '.join(MODERN_VERSIONS)}): {err.message}",
                err.data,
                method=method,
            )
        return err

    async def _answer(self, method: str, requests: Any) -> dict[str, Any]:
        """The host's answers to one round's ``inputRequests`` (by key), one after the other."""
        if not isinstance(requests, dict):
            raise ProtocolError(f"{method}: inputRequests must be an object", server=self.server)
        if len(requests) > MAX_INPUT_REQUESTS:
            raise ProtocolError(
                f"{method}: more than {MAX_INPUT_REQUESTS} input requests in one round", server=self.server
            )
        answers: dict[str, Any] = {}
        for key, request in requests.items():
            asked = request.get("method") if isinstance(request, dict) else None
            params = request.get("params") if isinstance(request, dict) else None
            handler = self.handlers.get(asked) if isinstance(asked, str) else None
            if handler is None:
                # the revision forbids input requests for a capability the client did not declare, and an
                # input request has no error answer: the request fails, nothing is sent again
                what = (
                    "of a capability kxen did not declare, which the 2026-07-28 revision forbids"
                    if asked in INPUT_REQUEST_METHODS
                    else "kxen cannot give"
                )
                raise ProtocolError(
                    f"{method}: the server asked for input ({_brief(asked)}) {what}", server=self.server
                )
            try:
                answers[key] = await handler(params if isinstance(params, dict) else {})
            except Exception as exc:  # a declined sampling request (ReplyError), or a handler bug
                raise RequestError(f"{method}: the server's {asked} request was declined: {exc}") from None
        return answers


__all__ = [
    "CLIENT_INFO",
    "HEADER_MISMATCH",
    "INPUT_METHODS",
    "LATEST_MODERN_VERSION",
    "MAX_INPUT_ROUNDS",
    "META_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_SERVER_INFO",
    "META_VERSION",
    "MISSING_CAPABILITY",
    "MODERN_ERRORS",
    "MODERN_VERSIONS",
    "Modern",
    "UNSUPPORTED_VERSION",
    "modern_capabilities",
    "mutual_version",
]

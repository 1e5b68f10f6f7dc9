"""The one exception tree of kxen.

::

    KxenError
    ├── ConfigError                 a config file was rejected; ``.problems`` lists every file + key path + rule
    ├── PluginError                 carries ``plugin`` and ``hook``
    │   └── PluginHookError         a hook implementation raised
    ├── TransportError              carries ``server``
    │   ├── ConnectError            the transport could not be opened (spawn failed, refused, ...)
    │   ├── ProtocolError           the peer broke the protocol (bad frame, bad reply)
    │   ├── HTTPStatusError         an HTTP answer with an error status and no JSON-RPC error (``status``)
    │   └── ClosedError             the transport closed or the server died; pending calls fail with it
    │       └── SessionExpired      the server no longer knows the session (HTTP 404 on a known session
    │                               id); the request that got it was not processed: safe to send again
    ├── RequestError                a JSON-RPC request did not produce a result
    │   ├── RequestTimeout          no reply in time; it was cancelled on the wire
    │   │   └── StartTimeout        a start (era probe and initialize) ran out of its one budget
    │   ├── RemoteError             the server answered with a JSON-RPC error (``code``, ``message``, ``data``)
    │   └── TaskFailed              a task the call became ended without a result: cancelled, failed,
    │                               lost by the server (``server``, ``task_id``, ``status``)
    ├── AuthRequired                a remote server wants a sign-in (or more scope) that needs a person:
    │                               ``reason``, ``next_step``, ``scopes``, ``status``
    ├── ServerNotReady              the server is not in the ``ready`` state (``state``, ``phase``, ``reason``)
    ├── UnknownTool                 no such qualified tool name
    ├── Unsupported                 the server did not declare what was asked (e.g. ``resources.subscribe``)
    ├── InvalidArguments            a kxen call refused before anything was sent (a prompt's missing,
    │                               unknown or non-string argument, an unknown prompt, a bad cursor)
    ├── PolicyDenied                a tool call was denied by policy (``votes`` says who and why)
    └── ApprovalDenied              a human (or the lack of an approval channel) said no

A plugin that fails to load is not an exception: it is recorded (``kxen_core.plugins.manager.LoadFailure``)
and reported by ``kxen plugins``, and the host keeps running.

Messages never contain secrets: header values, tokens and env values are never formatted into them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class KxenError(Exception):
    """Base of every error kxen raises on purpose.

    ``for_agent`` is what the model gets instead of the message when they differ: short, with no
    host path, fingerprint or command line (a person's next step stays in the message, for the CLI
    and the host's own surfaces). ``None``: the message itself."""

    for_agent: str | None = None


class ConfigError(KxenError):
    """A config file (or several) was rejected as a whole.

    ``problems`` holds one line per problem, each naming the file, the key path and the rule.
    """

    def __init__(self, problems: Sequence[str]):
        # keys come from files a repository wrote: never let them carry terminal escapes or newlines
        self.problems = [_printable(p) for p in problems]
        super().__init__("invalid configuration:\n" + "\n".join(f"  - {p}" for p in self.problems))


def printable(text: str) -> str:
    """``text`` with every character that is not printable (controls, newlines, lone surrogates,
    terminal escapes) shown escaped, so it is one safe line on any terminal and encodes as UTF-8."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


_printable = printable


class PluginError(KxenError):
    def __init__(self, message: str, *, plugin: str | None = None, hook: str | None = None):
        self.plugin = plugin
        self.hook = hook
        super().__init__(message)


class PluginHookError(PluginError):
    """A hook implementation raised; ``__cause__`` is the original exception."""


class TransportError(KxenError):
    def __init__(self, message: str, *, server: str | None = None):
        self.server = server
        super().__init__(message)


class ConnectError(TransportError):
    """The transport could not be opened."""


class ProtocolError(TransportError):
    """The peer broke the protocol."""


class HTTPStatusError(TransportError):
    """An HTTP error status answered a request, with no JSON-RPC error in its body."""

    def __init__(self, message: str, *, status: int, body: str = "", server: str | None = None):
        self.status = status
        self.body = body
        super().__init__(message, server=server)


class ClosedError(TransportError):
    """The transport is closed; nothing more can be sent or received."""


class SessionExpired(ClosedError):
    """The server answered a request of a known session with "no such session" (Streamable HTTP:
    404). The request that got this answer was not processed, so it is safe to send it again, once,
    in a new session: the runtime re-initializes and :meth:`Runtime.call_tool` re-sends it."""


class RequestError(KxenError):
    """A request did not produce a result."""


class RequestTimeout(RequestError):
    """No reply in time; ``why``, when progress extended the wait, says which limit ended it."""

    def __init__(self, method: str, seconds: float, *, server: str | None = None, why: str = ""):
        self.method = method
        self.seconds = seconds
        self.server = server
        where = f" from server {server!r}" if server else ""
        within = why or f"{seconds:g} s"
        super().__init__(f"{method}: no reply{where} within {within} (request cancelled)")


class StartTimeout(RequestTimeout):
    """A server's start -- the era probe (``server/discover``) and ``initialize`` together -- did not
    finish within its budget: ``timeouts.initializeSeconds``, or for a local server that never
    answered at all, ``timeouts.startupSeconds`` (``budget`` names which)."""

    def __init__(self, seconds: float, *, server: str | None = None, budget: str = "initializeSeconds"):
        where = f" from server {server!r}" if server else ""
        if budget == "startupSeconds":
            why = f"{seconds:g} s of its start (timeouts.startupSeconds: it never answered; a first install counts)"
        else:
            why = f"{seconds:g} s (the start's one budget, timeouts.initializeSeconds)"
        RequestError.__init__(self, f"server/discover, then initialize: no reply{where} within {why}")
        self.method = "initialize"
        self.seconds = seconds
        self.server = server
        self.budget = budget


class RemoteError(RequestError):
    """The server answered with a JSON-RPC error object."""

    def __init__(self, code: int, message: str, data: Any = None, *, method: str | None = None):
        self.code = code
        self.message = message
        self.data = data
        self.method = method
        prefix = f"{method}: " if method else ""
        super().__init__(f"{prefix}server error {code}: {message}")


class TaskFailed(RequestError):
    """A tool call that became a task (``tasks/get`` polling) ended without a result: the server
    cancelled it (``status`` "cancelled"), it failed without a result ("failed"), the server no
    longer knows it ("lost"), or its task was unusable or never ended ("broken")."""

    def __init__(self, message: str, *, server: str | None = None, task_id: str | None = None, status: str = "broken"):
        self.server = server
        self.task_id = task_id
        self.status = status
        where = f"server {server!r}: " if server else ""
        super().__init__(f"{where}{message}")


class AuthRequired(KxenError):
    """A remote server refused kxen for want of credentials, and none can be had without a person.

    ``reason`` is safe to show (never a secret; its ``str()``), ``next_step`` what a person does
    about it (``kxen mcp login NAME``), ``scopes`` the scopes a 403 ``insufficient_scope`` asked
    for, ``status`` the HTTP status (401 or 403) when it came from an HTTP answer. A credential
    plugin raises it from ``kxen_credential_lookup``; the transports let it through unwrapped.
    """

    def __init__(
        self,
        reason: str,
        *,
        next_step: str | None = None,
        scopes: Sequence[str] = (),
        status: int | None = None,
    ):
        self.reason = _printable(reason)
        self.next_step = _printable(next_step) if next_step is not None else None
        self.scopes = tuple(_printable(s) for s in scopes)
        self.status = status
        super().__init__(self.reason)

    def __str__(self) -> str:
        return self.reason


#: what the model is told about a server waiting on the user (the reason names the next step)
_WAITING_FOR_THE_USER = {
    "awaiting_approval": "its launch needs the user's approval",
    "awaiting_trust": "the user has not trusted the workspace",
}


class ServerNotReady(KxenError):
    def __init__(self, server: str, state: str, phase: str | None = None, reason: str | None = None):
        self.server = server
        self.state = state
        self.phase = phase
        self.reason = reason
        detail = f" ({phase}: {reason})" if reason and phase else f" ({reason})" if reason else ""
        super().__init__(f"server {server!r} is {state}{detail}")
        if state in _WAITING_FOR_THE_USER:
            self.for_agent = f"server {server!r} is {state} ({_WAITING_FOR_THE_USER[state]})"


class UnknownTool(KxenError):
    """No such server or tool."""


class Unsupported(KxenError):
    """The server does not offer what was asked: it did not declare that capability."""


class InvalidArguments(KxenError):
    """kxen refused a call before sending anything: its arguments break a rule it checks itself."""


class PolicyDenied(KxenError):
    """The policy votes denied a tool call."""

    def __init__(self, message: str, votes: Sequence[Any] = (), *, for_agent: str | None = None):
        self.votes = list(votes)
        self.for_agent = for_agent
        super().__init__(message)


class ToolHeld(PolicyDenied):
    """A call of a tool whose definition changed (or that is new) since its server's tools were
    pinned, and that a person has not accepted yet (``pinning: hold``): refused before anything
    was sent. The message names what changed and the next step (``kxen mcp pins accept``)."""

    def __init__(self, message: str, *, server: str, tool: str, for_agent: str | None = None):
        super().__init__(message, for_agent=for_agent)
        self.server = server
        self.tool = tool


class ApprovalDenied(KxenError):
    """An approval was refused, or no approval channel could ask. The message says how to allow it."""

    def __init__(self, message: str, *, for_agent: str | None = None):
        self.for_agent = for_agent
        super().__init__(message)

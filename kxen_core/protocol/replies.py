"""What a server's reply to one request means: its ``result``, or the error it raises.

Values from the server reach messages only quoted and short (:func:`brief`, :func:`text`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kxen_core.errors import ProtocolError, RemoteError


def text(value: Any, limit: int) -> str:
    """``value`` as text of at most ``limit`` characters; a container by its type only (it may be
    nested too deeply to print), a number too long to print likewise."""
    if isinstance(value, str):
        return value[:limit]
    if value is None or isinstance(value, (bool, int, float)):
        try:
            return str(value)[:limit]
        except ValueError:  # an int past the interpreter's digit limit
            return "a very long number"
    return f"(a JSON {type(value).__name__})"


def brief(value: Any) -> str:
    """A value from the server, quoted and short, for a diagnostic or an error."""
    return repr(text(value, 40))


class Pending:
    """One request waiting for its answer: its method (for messages), its waiter, and what must see
    its reply the moment it arrives (:meth:`kxen_core.protocol.session.Session.begin`)."""

    __slots__ = ("method", "waiter", "on_reply")

    def __init__(self, method: str, waiter: Any, on_reply: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.method = method
        self.waiter = waiter
        self.on_reply = on_reply


#: a request ``Session.begin`` sent: its id and its pending entry, for ``Session.finish``
Begun = tuple[int, Pending]


def error_code(err: dict[str, Any]) -> int:
    """The code of an error object as :class:`RemoteError` carries it (-32603 when it is no integer)."""
    code = err.get("code")
    return code if isinstance(code, int) and not isinstance(code, bool) else -32603


def result_of(method: str, response: dict[str, Any], server: str) -> dict[str, Any]:
    """The ``result`` object of ``response``; raise :class:`RemoteError` for an error reply and
    :class:`ProtocolError` for a malformed one."""
    if "error" in response:
        err = response["error"]
        if not isinstance(err, dict):
            raise ProtocolError(f"{method}: malformed error object from server", server=server)
        raise RemoteError(
            error_code(err),
            text(err.get("message", ""), 2000),
            err.get("data"),
            method=method,
        )
    result = response.get("result")
    if not isinstance(result, dict):
        raise ProtocolError(f"{method}: result must be an object", server=server)
    return result


__all__ = ["Begun", "Pending", "brief", "error_code", "result_of", "text"]

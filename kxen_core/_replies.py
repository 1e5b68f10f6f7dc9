"""What a server's reply to one request means: its ``result``, or the error it raises.

Values from the server reach messages only quoted and short (:func:`brief`, :func:`text`).
"""

from __future__ import annotations

from typing import Any

from .errors import ProtocolError, RemoteError


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


def result_of(method: str, response: dict[str, Any], server: str) -> dict[str, Any]:
    """The ``result`` object of ``response``; raise :class:`RemoteError` for an error reply and
    :class:`ProtocolError` for a malformed one."""
    if "error" in response:
        err = response["error"]
        if not isinstance(err, dict):
            raise ProtocolError(f"{method}: malformed error object from server", server=server)
        code = err.get("code")
        raise RemoteError(
            code if isinstance(code, int) and not isinstance(code, bool) else -32603,
            text(err.get("message", ""), 2000),
            err.get("data"),
            method=method,
        )
    result = response.get("result")
    if not isinstance(result, dict):
        raise ProtocolError(f"{method}: result must be an object", server=server)
    return result


__all__ = ["brief", "result_of", "text"]

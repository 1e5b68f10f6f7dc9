"""When a remote server connects again by itself, and how long it waits first.

A remote server's connection can fail or end for reasons that pass: the server restarted, the
network dropped, the server forgot the session (HTTP 404 on a known session id). Those are
retried with bounded exponential backoff -- :data:`ATTEMPTS` attempts, waiting 1, 2, 4, 8 and 16
seconds (about half a minute of waiting, about a minute with the attempts themselves), then the
server is ``failed`` for good with the last reason. A connection that became ready again starts the
count over. An expired session is re-initialized at once (the first attempt does not wait).

What is not retried: a server that answered (a JSON-RPC error to ``initialize``, a protocol
version it does not speak, an HTTP 4xx), a catalog that failed, a plugin bug. Trying again would
get the same answer. A server that refused kxen's credentials (``AuthRequired``, even inside the
``ClosedError`` of the transport it ended) is not retried either: it waits in ``needs_login`` for
a sign-in or a restart. A local (stdio) server is never restarted by itself: its exit
code and stderr say why it ended, and ``Runtime.restart`` starts it again.
"""

from __future__ import annotations

from kxen_core.errors import ClosedError, ConnectError, HTTPStatusError, SessionExpired
from kxen_core.runtime.failures import auth_failure, credential_plugin_failure, real_cause

#: attempts after a failure before the server is failed for good
ATTEMPTS = 5
#: the first wait, doubled after each attempt, at most MAX_WAIT
FIRST_WAIT = 1.0
MAX_WAIT = 30.0
#: HTTP statuses a server behind a proxy answers while it restarts
PASSING_STATUSES = frozenset({502, 503, 504})


def passing(failure: BaseException | str | None) -> bool:
    """Whether ``failure`` may pass by itself (so connecting again can help)."""
    if failure is None:
        return False
    if isinstance(failure, str):  # the session ended without an error object: the connection closed
        return True
    if auth_failure(failure) is not None or credential_plugin_failure(failure) is not None:
        return False  # a sign-in (or a fixed plugin) is needed, not another connection
    cause = real_cause(failure)
    if isinstance(cause, HTTPStatusError):
        return cause.status in PASSING_STATUSES
    return isinstance(cause, (ConnectError, ClosedError))


class Backoff:
    """The reconnection budget of one server."""

    def __init__(self, attempts: int = ATTEMPTS) -> None:
        self.attempts = attempts
        self.used = 0

    def next(self, failure: BaseException | str | None, was_ready: bool) -> float | None:
        """Seconds to wait before connecting again, or None: do not (not passing, or out of attempts)."""
        if was_ready:
            self.used = 0  # it worked again: a new budget
        if not passing(failure) or self.used >= self.attempts:
            return None
        self.used += 1
        if self.used == 1 and isinstance(failure, BaseException) and isinstance(real_cause(failure), SessionExpired):
            return 0.0  # the server is there; only the session is gone
        return min(FIRST_WAIT * 2 ** (self.used - 1), MAX_WAIT)

    def describe(self, delay: float) -> str:
        return f"connecting again in {delay:.0f} s (attempt {self.used} of {self.attempts})"

    def gave_up(self, reason: str | None) -> str:
        reason = reason or "connection closed"
        return f"{reason}; gave up after {self.used} attempts to connect again" if self.used else reason


__all__ = ["ATTEMPTS", "Backoff", "FIRST_WAIT", "MAX_WAIT", "passing"]

"""The closed set of server states and failure phases.

::

    connecting -> initializing -> listing -> ready          (settled)
    awaiting_approval -> (approved) connecting ...           a project local server
    ... -> needs_login (phase auth)                          a remote server refused kxen's credentials
    failed(phase, reason) · needs_login · stopped · disabled · awaiting_trust · awaiting_approval   (settled)

Members compare equal to their values (``State.READY == "ready"``), and format as them.
"""

from __future__ import annotations

import enum


class _Word(str, enum.Enum):
    """A member that is its value: equal to it, printed and formatted as it (on every Python)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class State(_Word):
    """The closed set of server states (compares equal to its value: ``State.READY == "ready"``)."""

    DISABLED = "disabled"
    AWAITING_TRUST = "awaiting_trust"
    AWAITING_APPROVAL = "awaiting_approval"
    CONNECTING = "connecting"
    INITIALIZING = "initializing"
    LISTING = "listing"
    READY = "ready"
    #: a remote server wants a sign-in (or more scope) that needs a person: ``kxen mcp login``
    NEEDS_LOGIN = "needs_login"
    FAILED = "failed"
    STOPPED = "stopped"


class Phase(_Word):
    """Where a failed server failed (``config``: its entry cannot be used as loaded, e.g. a
    ``${VAR}`` whose variable is not set; it was never started)."""

    CONFIG = "config"
    TRANSPORT = "transport"
    AUTH = "auth"
    INITIALIZE = "initialize"
    CATALOG = "catalog"
    CALL = "call"


#: states a server stays in until something changes it (``wait_ready`` waits for one of these)
SETTLED = frozenset(
    {
        State.DISABLED,
        State.AWAITING_TRUST,
        State.AWAITING_APPROVAL,
        State.READY,
        State.NEEDS_LOGIN,
        State.FAILED,
        State.STOPPED,
    }
)


__all__ = ["Phase", "SETTLED", "State"]

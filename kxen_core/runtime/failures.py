"""What a status says when something failed: the real cause inside a task group's wrapper."""

from __future__ import annotations

import sys

from kxen_core.errors import AuthRequired, KxenError, PluginHookError

if sys.version_info < (3, 11):  # pragma: no cover - anyio depends on the backport there
    from exceptiongroup import BaseExceptionGroup


def real_cause(exc: BaseException) -> BaseException:
    """The error a task group wrapped: its first kxen error (depth first), else its first error
    that is not a cancellation, else its first; ``exc`` itself when it is no group."""
    leaves: list[BaseException] = []
    todo = [exc]
    while todo and len(leaves) < 1000:  # a group is finite, but be bounded anyway
        e = todo.pop()
        if isinstance(e, BaseExceptionGroup):
            todo.extend(reversed(e.exceptions))
        else:
            leaves.append(e)
    if not leaves:
        return exc
    for kind in (KxenError, Exception):
        for leaf in leaves:
            if isinstance(leaf, kind):
                return leaf
    return leaves[0]


def failure_text(exc: BaseException) -> str:
    """What a status shows for ``exc``: a kxen error's own text, else ``Type: text``; never a
    task group's "unhandled errors" wrapper."""
    cause = real_cause(exc)
    if isinstance(cause, KxenError):
        return str(cause)
    return f"{type(cause).__name__}: {cause}"


def auth_failure(exc: BaseException | str | None) -> AuthRequired | None:
    """The :class:`AuthRequired` that ended a connection, if one did: the error itself, or the cause
    of the ``ClosedError`` a transport raises once it failed with one (looked for a few links deep)."""
    if not isinstance(exc, BaseException):
        return None
    cause: BaseException | None = real_cause(exc)
    for _ in range(4):  # a short chain: ClosedError <- AuthRequired
        if cause is None:
            return None
        if isinstance(cause, AuthRequired):
            return cause
        cause = cause.__cause__
    return None


def credential_plugin_failure(exc: BaseException | str | None) -> PluginHookError | None:
    """The ``PluginHookError`` of a broken ``kxen_credential_lookup`` that ended a connection, if one did."""
    if not isinstance(exc, BaseException):
        return None
    cause: BaseException | None = real_cause(exc)
    for _ in range(4):
        if cause is None:
            return None
        if isinstance(cause, PluginHookError) and cause.hook == "kxen_credential_lookup":
            return cause
        cause = cause.__cause__
    return None


__all__ = ["auth_failure", "credential_plugin_failure", "failure_text", "real_cause"]

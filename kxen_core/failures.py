"""What a status says when something failed: the real cause inside a task group's wrapper."""

from __future__ import annotations

import sys

from .errors import KxenError

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


__all__ = ["failure_text", "real_cause"]

"""Pending approvals: an approval channel that holds each request until a page or a host's own UI
answers it (:meth:`PendingApprovals.answer`), in the process that asked.

While a host holds approvals (``Runtime.hold_approvals``) it is that runtime's
``Approvals.held``, asked before the installed channels; it is also a ``kxen_approval_prompt``
plugin, for a host that registers one on a plugin manager for all its runtimes.
A request nobody answers within ``bound`` seconds is denied: the channel
fails closed, like kxen when no channel answers. The requests it holds are listed with
:meth:`PendingApprovals.pending`; every change (one added, one answered or expired) calls
``on_change``. Nothing is persisted.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

import anyio
import attrs

from kxen_core.errors import InvalidArguments
from kxen_core.hookspecs import hookimpl
from kxen_core.policy import ApprovalDecision, ApprovalRequest
from kxen_core.safe_text import safe_text

log = logging.getLogger("kxen.approvals")

#: the plugin name (and the decisions' ``channel``) of the held approvals
CHANNEL = "kxen-held-approvals"
#: seconds a request waits for an answer by default
DEFAULT_BOUND = 300.0
#: the most requests held at once; one more is denied at once (the Approvals lock asks one at a time)
MAX_PENDING = 64


@attrs.define(eq=False)
class _Held:
    id: str
    request: ApprovalRequest
    since: float
    answered: anyio.Event = attrs.field(factory=anyio.Event)
    decision: ApprovalDecision | None = None


class PendingApprovals:
    """The held-approvals channel (a ``kxen_approval_prompt`` plugin)."""

    def __init__(self, bound: float = DEFAULT_BOUND, on_change: Callable[[], None] | None = None) -> None:
        if not 0 < bound <= 86400:
            raise InvalidArguments(f"approval bound must be between 0 and 86400 seconds (got {bound})")
        self.bound = bound
        self.on_change = on_change
        self._held: dict[str, _Held] = {}
        self.__name__ = CHANNEL

    @hookimpl
    async def kxen_approval_prompt(self, request: ApprovalRequest) -> ApprovalDecision | None:
        if len(self._held) >= MAX_PENDING:
            return ApprovalDecision(approved=False, reason="too many approvals are waiting", channel=CHANNEL)
        held = _Held(id=secrets.token_hex(8), request=request, since=time.time())
        self._held[held.id] = held
        self._changed()
        try:
            with anyio.move_on_after(self.bound):
                await held.answered.wait()
        finally:
            self._held.pop(held.id, None)
            self._changed()
        if held.decision is None:  # fail closed: nobody answered in time
            return ApprovalDecision(
                approved=False, reason=f"nobody answered within {self.bound:g} s", channel=CHANNEL, timed_out=True
            )
        return held.decision

    def pending(self) -> list[dict[str, Any]]:
        """The requests waiting now, oldest first: ``id``, ``kind``, ``server``, ``summary``
        (escaped), ``details`` (as the request holds them: a launch shows sensitive env values as
        digests), ``fingerprint``, ``choices`` (how a yes may be remembered), ``since`` (epoch s)
        and ``expires`` (epoch s: denied then)."""
        return [
            {
                "id": h.id,
                "kind": h.request.kind,
                "server": h.request.server,
                "summary": safe_text(h.request.summary),
                "details": h.request.details,
                "fingerprint": h.request.fingerprint,
                "choices": list(h.request.remember_choices),
                "since": h.since,
                "expires": h.since + self.bound,
            }
            for h in sorted(self._held.values(), key=lambda h: h.since)
        ]

    def answer(self, approval_id: str, approved: bool, *, remember: str | None = None, reason: str = "") -> None:
        """Answer the held request ``approval_id``: the caller waiting on it gets the decision.
        ``remember`` is one of the request's ``choices`` (default: the first, the narrowest: a launch
        ``call``, a tool call ``once``). ``InvalidArguments`` for an id that is not
        waiting (answered, expired, or never handed out) or a choice the request does not allow."""
        held = self._held.get(approval_id)
        if held is None or held.decision is not None:
            raise InvalidArguments(f"no approval {safe_text(approval_id)!r} is waiting (answered or expired)")
        if remember is None:
            remember = held.request.remember_choices[0] if held.request.remember_choices else "once"
        if approved and remember not in held.request.remember_choices:
            choices = ", ".join(held.request.remember_choices)
            raise InvalidArguments(f"remember must be one of: {choices} (got {safe_text(remember)!r})")
        held.decision = ApprovalDecision(
            approved=approved,
            reason=reason or ("approved" if approved else "denied"),
            remember=remember if approved else "once",
            channel=CHANNEL,
        )
        held.answered.set()

    def close(self, reason: str) -> None:
        """Deny every request still waiting (the surface that would answer them is gone)."""
        for held in list(self._held.values()):
            if held.decision is None:
                held.decision = ApprovalDecision(approved=False, reason=reason, remember="once", channel=CHANNEL)
                held.answered.set()

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception as exc:  # a listener must not decide an approval
                log.warning("an approvals listener failed: %s", safe_text(f"{type(exc).__name__}: {exc}"))


__all__ = ["CHANNEL", "DEFAULT_BOUND", "MAX_PENDING", "PendingApprovals"]

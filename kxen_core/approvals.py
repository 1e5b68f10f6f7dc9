"""Approvals: ask a channel, remember what was approved in this process.

A request with a fingerprint (a project launch, a tool call with its arguments) that was approved
once in this process -- by a channel, or up front with ``--approve`` -- is not asked again. Channels
are asked one request at a time (a person answers one prompt at a time); with no channel, or a
channel that fails, the answer is no. Nothing is persisted.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Iterable

import anyio
import attrs

from .errors import KxenError
from .hookcall import acall_first
from .policy import ApprovalDecision, ApprovalRequest

if TYPE_CHECKING:
    from .plugins import KxenPluginManager

log = logging.getLogger("kxen.approvals")

_EARLIER = ApprovalDecision(approved=True, reason="approved earlier in this process", channel="process")


class Approvals:
    def __init__(self, pm: KxenPluginManager, approved: Iterable[str] = ()) -> None:
        self.pm = pm
        #: fingerprints approved for this process (launches, tool calls); never persisted
        self.approved: set[str] = set(approved)
        self._lock = anyio.Lock()

    def is_approved(self, fingerprint: str | None) -> bool:
        return bool(fingerprint) and fingerprint in self.approved

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        """A fingerprint approved in this process, else the first channel that answers, else no."""
        if self.is_approved(request.fingerprint):
            return _EARLIER
        async with self._lock:  # one prompt at a time
            if self.is_approved(request.fingerprint):
                return _EARLIER  # approved while this request waited for the lock
            try:
                answer = await acall_first(self.pm, "kxen_approval_prompt", request=request)
            except KxenError as exc:
                log.warning("approval channel failed: %s", exc)
                return ApprovalDecision(approved=False, reason=f"approval channel failed: {exc}")
        if not isinstance(answer, ApprovalDecision):
            return ApprovalDecision(approved=False, reason="no approval channel is available")
        if answer.approved and request.fingerprint:
            self.approved.add(request.fingerprint)
        if not answer.approved and not answer.reason:
            answer = attrs.evolve(answer, reason="declined")
        return answer


__all__ = ["Approvals"]

"""Tool-call policy: votes, their combination, and approval requests.

Votes come from ``kxen_policy_decision`` implementations (the config's ``toolPolicies`` is itself a
default plugin). The combination is a veto: any ``deny`` wins, else any ``ask``, else any ``allow``,
else the server's ``defaultToolPolicy``. An implementation that raises counts as ``deny``. ``ask``
goes to ``kxen_approval_prompt``; when no channel answers, the answer is no.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, Literal

import attrs

from .agent_tools import qualified_name
from .errors import ApprovalDenied, KxenError, PolicyDenied
from .hookcall import acall_all

if TYPE_CHECKING:
    from .approvals import Approvals
    from .config.models import ServerConfig, Settings
    from .plugins import KxenPluginManager

Decision = Literal["allow", "ask", "deny"]
_RANK = {"allow": 0, "ask": 1, "deny": 2}


@attrs.frozen(kw_only=True)
class ToolCall:
    """A tool call on its way out, as policy plugins see it."""

    server: ServerConfig
    tool: str
    arguments: dict[str, Any]
    role: str | None = None
    tool_info: dict[str, Any] = attrs.field(factory=dict)  # the catalog entry (annotations are hints only)
    settings: Settings | None = None  # the user's settings (roles live there)

    @property
    def qualified_name(self) -> str:
        return f"{self.server.name}__{self.tool}"


@attrs.frozen(kw_only=True)
class Vote:
    decision: Decision
    reason: str = ""
    plugin: str = ""

    @classmethod
    def allow(cls, reason: str = "") -> Vote:
        return cls(decision="allow", reason=reason)

    @classmethod
    def ask(cls, reason: str = "") -> Vote:
        return cls(decision="ask", reason=reason)

    @classmethod
    def deny(cls, reason: str = "") -> Vote:
        return cls(decision="deny", reason=reason)


def combine(votes: list[Vote], default: Decision) -> tuple[Decision, list[Vote]]:
    """Veto combination; returns the decision and the votes that made it."""
    if not votes:
        return default, [Vote(decision=default, reason="defaultToolPolicy", plugin="config")]
    worst = max(_RANK[v.decision] for v in votes)
    decision: Decision = ("allow", "ask", "deny")[worst]  # type: ignore[assignment]
    return decision, [v for v in votes if v.decision == decision]


@attrs.frozen(kw_only=True)
class ApprovalRequest:
    """Something a human must say yes to. ``details`` never holds secret values."""

    kind: Literal["tool_call", "stdio_launch", "remote_enable"]
    server: str
    summary: str
    details: dict[str, Any] = attrs.field(factory=dict)
    fingerprint: str = ""


@attrs.frozen(kw_only=True)
class ApprovalDecision:
    approved: bool
    reason: str = ""
    channel: str = ""


def fingerprint(payload: Any) -> str:
    """A stable SHA-256 over canonical JSON."""
    data = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(data).hexdigest()


async def authorize(pm: KxenPluginManager, call: ToolCall, approvals: Approvals) -> None:
    """Let every policy plugin vote on ``call``; raise ``PolicyDenied`` on deny, and on ask raise
    ``ApprovalDenied`` unless ``approvals`` gets a yes. Returns when the call may go out."""
    def as_deny(err: KxenError) -> Vote:
        return Vote.deny(f"policy plugin failed: {err}")

    answers = await acall_all(pm, "kxen_policy_decision", call=call, on_error=as_deny)
    votes = []
    for plugin, v in answers:
        if not isinstance(v, Vote) or v.decision not in ("allow", "ask", "deny"):
            # an answer that is not a valid vote is a broken plugin: fail closed, name it
            v = Vote.deny(f"returned {type(v).__name__} instead of a Vote")
        votes.append(attrs.evolve(v, plugin=plugin))
    decision, why = combine(votes, call.server.defaultToolPolicy)
    label = qualified_name(call.server.name, call.tool)
    if decision == "deny":
        reasons = "; ".join(f"{v.plugin}: {v.reason}" for v in why)
        raise PolicyDenied(f"{label} denied by policy ({reasons})", why)
    if decision == "ask":
        fp = fingerprint({"server": call.server.name, "tool": call.tool, "arguments": call.arguments})
        request = ApprovalRequest(
            kind="tool_call",
            server=call.server.name,
            summary=f"call tool {label}",
            details={"tool": call.tool, "arguments": call.arguments, "why": [v.reason for v in why]},
            fingerprint=fp,
        )
        answer = await approvals.ask(request)
        if not answer.approved:
            raise ApprovalDenied(f"{label} needs approval: {answer.reason} (fingerprint {fp})")

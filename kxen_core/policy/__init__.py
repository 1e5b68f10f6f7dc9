"""Tool-call policy: votes, their combination, and approval requests.

Votes come from ``kxen_policy_decision`` implementations (the config's ``toolPolicies`` is itself a
default plugin). The combination is a veto: any ``deny`` wins, else any ``ask``, else any ``allow``,
else the server's ``defaultToolPolicy``. An implementation that raises counts as ``deny``. ``ask``
goes to ``kxen_approval_prompt`` (see :mod:`kxen_core.policy.approvals`, which counts the votes of a call);
when no channel answers, the answer is no.

This package's own module holds the values policy and approval plugins exchange with the core
(:class:`ToolCall`, :class:`Vote`, :class:`ApprovalRequest`, :class:`ApprovalDecision`); beside it
are the vote count (:mod:`.votes`), approvals (:mod:`.approvals`), the "always allow" rules
(:mod:`.allow_rules`), the core's default hook implementations (:mod:`.defaults`), the egress
guard's rules (:mod:`.egress`) and the audit trail (:mod:`.audit` and beside it). It uses
:mod:`kxen_core.protocol` (catalog pages), :mod:`kxen_core.launch`, :mod:`kxen_core.config` and the
hook contract; :mod:`kxen_core.plugins` and the runtime use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import attrs

from kxen_core.launch.canonical import fingerprint  # one canonical digest for launches and calls (re-exported)

if TYPE_CHECKING:
    from kxen_core.config.models import ServerConfig, Settings
    from kxen_core.launch.resolve import Launch

Decision = Literal["allow", "ask", "deny"]

#: what kxen's own agent tools send or list, voted on like tool calls under these names; they only
#: read, so the config allows them unless ``toolPolicies`` names them or ``defaultToolPolicy`` is deny
READ_ONLY_METHODS = frozenset(
    {"resources/list", "resources/templates/list", "resources/read", "prompts/list", "prompts/get"}
)
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
    launch: Launch | None = None  # what runs behind a local server's name (its approval is bound to it)
    #: True for one of kxen's own read-only requests (``tool`` is then a READ_ONLY_METHODS name), not a server tool
    read_only_method: bool = False
    #: what kxen holds as secret now (a :class:`kxen_core.safe_text.Secrets`: ``values``, ``text()``), for
    #: votes on the arguments; never shown (:mod:`kxen_core.policy.argument_guard` is the core's)
    secrets: Any = attrs.field(default=None, repr=False, eq=False)
    #: the digest of the tool's definition as listed (:func:`kxen_core.policy.pins.tool_digest`):
    #: what an approval of the call is bound to; "" when not known (the server never listed)
    pin: str = ""
    #: the definition's pin state (:mod:`kxen_core.policy.pins`): ``pinned``, ``first``, ``added``,
    #: ``changed`` or ``unchecked`` (shown, not accepted: a ``warn`` server), ``unpinned`` (``off``); "" unknown
    pin_state: str = ""

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
    decision: Decision = ("allow", "ask", "deny")[worst]
    return decision, [v for v in votes if v.decision == decision]


@attrs.frozen(kw_only=True)
class ApprovalRequest:
    """Something a human must say yes to. ``details`` never holds secret values."""

    kind: Literal["tool_call", "stdio_launch", "remote_enable"]
    server: str
    summary: str
    details: dict[str, Any] = attrs.field(factory=dict)
    fingerprint: str = ""
    #: a tool call's tool, bound to the server's identity: what "allow this tool" remembers
    tool_key: str = ""
    #: which ``ApprovalDecision.remember`` answers this request may take (a launch: only "call")
    remember_choices: tuple[str, ...] = ("call",)


#: how long a yes holds: this one call only; this exact request for the process (a launch, a call
#: with these arguments); the tool, any arguments, for the process; the tool always (the user's
#: toolPolicies gets ``allow``: user servers only)
REMEMBER = ("once", "call", "tool", "always")


@attrs.frozen(kw_only=True)
class ApprovalDecision:
    approved: bool
    reason: str = ""
    channel: str = ""
    remember: str = attrs.field(default="call", validator=attrs.validators.in_(REMEMBER))
    #: a no because nobody answered in time (the audit trail's ``asked-timeout``)
    timed_out: bool = False


__all__ = [
    "REMEMBER",
    "READ_ONLY_METHODS",
    "ApprovalDecision",
    "ApprovalRequest",
    "Decision",
    "ToolCall",
    "Vote",
    "combine",
    "fingerprint",
]

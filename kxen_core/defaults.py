"""The core's own default hook implementations (registered first, run last)."""

from __future__ import annotations

from .plugins import hookimpl
from .policy import ToolCall, Vote


@hookimpl(trylast=True)
def kxen_policy_decision(call: ToolCall) -> Vote | None:
    """The config's per-tool policy; abstains for tools it does not name (the default applies)."""
    decision = call.server.toolPolicies.get(call.tool)
    if decision is None:
        return None
    return Vote(decision=decision, reason=f"toolPolicies.{call.tool}")

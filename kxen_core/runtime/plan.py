"""What a runtime would do with this config, starting and contacting nothing (``kxen mcp plan``).

For each configured server: would it start, from which scope, and if not, why (remote off, the
workspace untrusted, a launch awaiting approval, disabled, a command that cannot be found); the
fingerprint a local launch is approved by; and what it would be started with -- the launch as an
approval shows it (sensitive env values as digests), or the URL with query values hidden and the
names of the configured headers (never their values).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from kxen_core.errors import ConnectError
from kxen_core.launch.resolve import resolve_launch
from kxen_core.runtime.admission import admit
from kxen_core.runtime.remote_ack import ACKNOWLEDGE_STEP, NOT_ACKNOWLEDGED
from kxen_core.runtime.states import State
from kxen_core.safe_text import safe_text, shown_url

if TYPE_CHECKING:
    from pathlib import Path

    from kxen_core.config import Config, ServerConfig
    from kxen_core.policy.approvals import Approvals


def plan(config: Config, workspace: Path, approvals: Approvals) -> list[dict[str, Any]]:
    """One row per configured server, in config order (see the module docstring)."""
    return [_row(config, workspace, approvals, entry) for entry in config.servers.values()]


def _row(config: Config, workspace: Path, approvals: Approvals, entry: ServerConfig) -> dict[str, Any]:
    decision = admit(config, entry)
    run = decision.run
    if decision.error == NOT_ACKNOWLEDGED:
        decision = attrs.evolve(decision, error=f"{NOT_ACKNOWLEDGED}; next: {ACKNOWLEDGE_STEP}")
    row: dict[str, Any] = {
        "name": entry.name,
        "scope": entry.scope,
        "transport": entry.kind,
        "source": entry.source,
        "start": run is not None,
        "runs": run.scope if run is not None else None,  # "user" when the user entry stands in
        "state": None if run is not None else decision.state.value,
        "reason": None if run is not None else (decision.error or decision.note or decision.state.value),
        "note": decision.note,
        "fingerprint": None,
        "approved": None,
        "launch": None,
        "url": None,
        "headers": None,
    }
    if run is None:
        return row
    if run.is_remote:
        row["url"] = shown_url(run)  # as written where it took ${VAR}: those values are secrets
        row["headers"] = sorted(safe_text(k) for k in run.headers)  # names only: values may be secrets
        return row
    try:
        launch = resolve_launch(run, workspace)
    except ConnectError as exc:
        row.update(start=False, state=State.FAILED.value, reason=f"transport: {exc}")
        return row
    row["launch"] = launch.display()
    if run.scope != "project" and not launch.held:
        return row  # the user's own launch: no approval
    row["fingerprint"] = launch.fingerprint
    row["approved"] = approvals.is_approved(launch.fingerprint)
    if launch.held and run.scope != "project" and not config.trusted:
        row.update(
            start=False, state=State.AWAITING_TRUST.value, reason=f"held: {launch.held}; the workspace is not trusted"
        )
    elif not row["approved"]:
        row.update(
            start=False,
            state=State.AWAITING_APPROVAL.value,
            reason=f"its exact launch must be approved: --approve {launch.fingerprint} (or an approval channel asks)",
        )
    return row


__all__ = ["plan"]

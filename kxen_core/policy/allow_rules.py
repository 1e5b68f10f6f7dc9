""" "Always allow this tool": the rule a person's yes leaves behind, in the user's own config.

An approval channel may answer a tool call with ``remember="always"``. For a user server (never a
project one: a repository must not be able to approve its own tools), the runtime then writes
``"toolPolicies": {"<tool>": "allow"}`` into that server's entry of the user's ``mcp.json``, with the
same checks, lock and atomic write as ``kxen mcp add`` (:mod:`kxen_core.config.edit`). The running
runtime remembers the tool for the rest of the process; the next start reads the rule.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kxen_core.errors import ConfigError
from kxen_core.policy import ApprovalRequest


def always_writer(rt: Any) -> Callable[[ApprovalRequest], str]:
    """The ``Approvals.allow_always`` of runtime ``rt``: :func:`write_allow` into the user config of
    its home (the default home when no config is loaded yet) for its workspace."""

    def always(request: ApprovalRequest) -> str:
        from kxen_core.config.loader import default_home

        return write_allow(rt.config.home if rt.config else default_home(), rt.workspace, request)

    return always


def write_allow(home: Path, workspace: Path, request: ApprovalRequest) -> str:
    """Set the tool of ``request`` (a tool call) to ``allow`` in the user's entry of its server;
    returns what was written. Raises ``ConfigError`` when the user file has no such server or the
    result would be invalid (nothing is written then)."""
    from kxen_core.config.edit import update_servers

    tool = request.details.get("tool")
    if request.kind != "tool_call" or not isinstance(tool, str) or not tool:
        raise ConfigError([f"only a tool call can be allowed always (got {request.kind})"])
    server = request.server

    def allow(servers: dict[str, Any]) -> str:
        entry = servers.get(server)
        if not isinstance(entry, dict):
            raise ConfigError([f"mcpServers.{server}: not in the user's config: nothing to allow there"])
        policies = entry.setdefault("toolPolicies", {})
        if not isinstance(policies, dict):
            raise ConfigError([f"mcpServers.{server}.toolPolicies: must be an object"])
        policies[tool] = "allow"
        return f'{Path(home) / "mcp.json"}: mcpServers.{server}.toolPolicies.{tool} = "allow"'

    return update_servers(Path(home), Path(workspace), "user", allow)


__all__ = ["write_allow"]

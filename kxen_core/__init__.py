"""kxen: a strict, fast MCP host runtime.

The names hosts and plugin authors use, importable from here:

* hosts: :class:`Runtime`, :func:`load_config`, :class:`ServerConfig`, :class:`Settings`, :func:`host_guard`,
  :class:`AgentOutput` and :class:`BinaryRef` (what the agent gets), :class:`ResourceContent`;
* plugin authors: ``hookimpl`` (the marker), :class:`TransportContext`, :class:`Transport`,
  :class:`MessageStream`, :class:`RegisterTransport`, :class:`RequestFailed`, :class:`Launch`,
  :class:`CredentialRequest`, :class:`ReusableHeaders`, :class:`AuthChallenge`, :class:`LoginRequest`,
  :class:`AuthFlow`, :class:`ToolCall`, :class:`Vote`, :class:`ApprovalRequest`,
  :class:`ApprovalDecision`, :class:`CatalogPage`, :class:`Verdict`, :class:`SamplingRequest`,
  :class:`ElicitationRequest`;
* host sign-in UIs get :class:`LoginStarted` and :class:`LoginStatus` (``Runtime.login_start``, ``login_poll``);
* host callbacks get :class:`Progress` (``Runtime.call_tool(on_progress=...)``) and
  ``Runtime.subscribe`` returns a :class:`Subscription`;
* the error tree (:mod:`kxen_core.errors`): :class:`KxenError` and every subclass.

Everything but ``hookimpl`` is loaded on first use, so a plugin's entry point stays cheap to import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kxen_core.hookspecs import hookimpl

__version__ = "0.1.0"

if TYPE_CHECKING:
    from kxen_core.agent.output import AgentOutput, BinaryRef
    from kxen_core.asks import ElicitationRequest, SamplingRequest
    from kxen_core.auth import AuthFlow, LoginRequest
    from kxen_core.config import Config, ServerConfig, Settings, load_config
    from kxen_core.errors import (
        ApprovalDenied,
        AuthRequired,
        ClosedError,
        ConfigError,
        ConnectError,
        HTTPStatusError,
        InvalidArguments,
        KxenError,
        PluginError,
        PluginHookError,
        PolicyDenied,
        ProtocolError,
        RemoteError,
        RequestError,
        RequestTimeout,
        ServerNotReady,
        SessionExpired,
        StartTimeout,
        TaskFailed,
        ToolHeld,
        TransportError,
        UnknownTool,
        Unsupported,
    )
    from kxen_core.launch.resolve import Launch
    from kxen_core.policy import ApprovalDecision, ApprovalRequest, ToolCall, Vote
    from kxen_core.policy.egress import EgressPolicy, current_egress, egress_for, using_egress
    from kxen_core.protocol.catalog import CatalogPage, Verdict
    from kxen_core.protocol.notices import Subscription
    from kxen_core.protocol.progress import Progress
    from kxen_core.runtime.contents import ResourceContent
    from kxen_core.runtime.host import host_guard
    from kxen_core.runtime.logins import LoginStarted, LoginStatus
    from kxen_core.runtime.workspace import Runtime
    from kxen_core.transport import (
        AuthChallenge,
        CredentialRequest,
        Message,
        MessageStream,
        RegisterTransport,
        RequestFailed,
        ReusableHeaders,
        Transport,
        TransportContext,
    )

_LAZY = {
    "Runtime": "runtime.workspace",
    "AgentOutput": "agent.output",
    "BinaryRef": "agent.output",
    "ResourceContent": "runtime.contents",
    "Config": "config",
    "ServerConfig": "config",
    "Settings": "config",
    "load_config": "config",
    "CatalogPage": "protocol.catalog",
    "Verdict": "protocol.catalog",
    "Launch": "launch.resolve",
    "LoginStarted": "runtime.logins",
    "LoginStatus": "runtime.logins",
    "ElicitationRequest": "asks",
    "SamplingRequest": "asks",
    "Progress": "protocol.progress",
    "Subscription": "protocol.notices",
    "host_guard": "runtime.host",
    "ApprovalDecision": "policy",
    "ApprovalRequest": "policy",
    "ToolCall": "policy",
    "Vote": "policy",
    "EgressPolicy": "policy.egress",
    "current_egress": "policy.egress",
    "egress_for": "policy.egress",
    "using_egress": "policy.egress",
    "AuthChallenge": "transport",
    "AuthFlow": "auth",
    "LoginRequest": "auth",
    "CredentialRequest": "transport",
    "Message": "transport",
    "MessageStream": "transport",
    "RegisterTransport": "transport",
    "RequestFailed": "transport",
    "ReusableHeaders": "transport",
    "Transport": "transport",
    "TransportContext": "transport",
}
_ERRORS = (
    "ApprovalDenied",
    "AuthRequired",
    "ClosedError",
    "ConfigError",
    "ConnectError",
    "HTTPStatusError",
    "InvalidArguments",
    "KxenError",
    "PluginError",
    "PluginHookError",
    "PolicyDenied",
    "ProtocolError",
    "RemoteError",
    "RequestError",
    "RequestTimeout",
    "ServerNotReady",
    "SessionExpired",
    "StartTimeout",
    "TaskFailed",
    "ToolHeld",
    "TransportError",
    "UnknownTool",
    "Unsupported",
)
_LAZY.update({name: "errors" for name in _ERRORS})


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kxen_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


# every name of _LAZY (tests/test_public_names.py holds the two together)
__all__ = [
    "__version__",
    "hookimpl",
    "AgentOutput",
    "ApprovalDecision",
    "ApprovalDenied",
    "ApprovalRequest",
    "AuthChallenge",
    "AuthFlow",
    "AuthRequired",
    "BinaryRef",
    "CatalogPage",
    "ClosedError",
    "Config",
    "ConfigError",
    "ConnectError",
    "CredentialRequest",
    "ElicitationRequest",
    "HTTPStatusError",
    "InvalidArguments",
    "KxenError",
    "Launch",
    "LoginRequest",
    "LoginStarted",
    "LoginStatus",
    "Message",
    "MessageStream",
    "PluginError",
    "PluginHookError",
    "PolicyDenied",
    "Progress",
    "ProtocolError",
    "RegisterTransport",
    "RemoteError",
    "RequestError",
    "RequestFailed",
    "RequestTimeout",
    "ResourceContent",
    "ReusableHeaders",
    "Runtime",
    "SamplingRequest",
    "ServerConfig",
    "ServerNotReady",
    "SessionExpired",
    "Settings",
    "StartTimeout",
    "Subscription",
    "TaskFailed",
    "ToolCall",
    "ToolHeld",
    "Transport",
    "TransportContext",
    "TransportError",
    "UnknownTool",
    "Unsupported",
    "Verdict",
    "Vote",
    "host_guard",
    "load_config",
    "EgressPolicy",
    "current_egress",
    "egress_for",
    "using_egress",
]

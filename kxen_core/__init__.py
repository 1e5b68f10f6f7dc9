"""kxen: a strict, fast MCP host runtime.

The names hosts and plugin authors use, importable from here:

* hosts: :class:`Runtime`, :func:`load_config`, :class:`ServerConfig`, :class:`Settings`, :func:`host_guard`,
  :class:`AgentOutput` and :class:`BinaryRef` (what the agent gets), :class:`ResourceContent`;
* plugin authors: ``hookimpl`` (the marker), :class:`TransportContext`, :class:`Transport`,
  :class:`MessageStream`, :class:`RegisterTransport`, :class:`RequestFailed`, :class:`Launch`,
  :class:`CredentialRequest`, :class:`AuthChallenge`, :class:`LoginRequest`, :class:`AuthFlow`, :class:`ToolCall`, :class:`Vote`, :class:`ApprovalRequest`,
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

from .hookspecs import hookimpl

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .agent_output import AgentOutput, BinaryRef
    from .asks import ElicitationRequest, SamplingRequest
    from .auth import AuthFlow, LoginRequest
    from .catalog import CatalogPage, Verdict
    from .config import Config, ServerConfig, Settings, load_config
    from .contents import ResourceContent
    from .errors import (
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
        TransportError,
        UnknownTool,
        Unsupported,
    )
    from .host import host_guard
    from .launch import Launch
    from .logins import LoginStarted, LoginStatus
    from .notices import Subscription
    from .policy import ApprovalDecision, ApprovalRequest, ToolCall, Vote
    from .progress import Progress
    from .runtime import Runtime
    from .transport import (
        AuthChallenge,
        CredentialRequest,
        Message,
        MessageStream,
        RegisterTransport,
        RequestFailed,
        Transport,
        TransportContext,
    )

_LAZY = {
    "Runtime": "runtime",
    "AgentOutput": "agent_output",
    "BinaryRef": "agent_output",
    "ResourceContent": "contents",
    "Config": "config",
    "ServerConfig": "config",
    "Settings": "config",
    "load_config": "config",
    "CatalogPage": "catalog",
    "Verdict": "catalog",
    "Launch": "launch",
    "LoginStarted": "logins",
    "LoginStatus": "logins",
    "ElicitationRequest": "asks",
    "SamplingRequest": "asks",
    "Progress": "progress",
    "Subscription": "notices",
    "host_guard": "host",
    "ApprovalDecision": "policy",
    "ApprovalRequest": "policy",
    "ToolCall": "policy",
    "Vote": "policy",
    "AuthChallenge": "transport",
    "AuthFlow": "auth",
    "LoginRequest": "auth",
    "CredentialRequest": "transport",
    "Message": "transport",
    "MessageStream": "transport",
    "RegisterTransport": "transport",
    "RequestFailed": "transport",
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
    "TransportError",
    "UnknownTool",
    "Unsupported",
)
_LAZY.update({name: "errors" for name in _ERRORS})


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kxen_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


__all__ = ["__version__", "hookimpl", *sorted(_LAZY)]

"""Config models of server entries: attrs classes whose attribute names are the file's keys (so error
paths match). The user settings' models are in :mod:`.settings`, the remote URL rules in :mod:`.urls`
(both importable from here too).

``mcp.json`` uses camelCase keys, as common MCP config files do; ``config.toml`` uses snake_case.
"""

from __future__ import annotations

import os
import re
from typing import Any, Literal
from urllib.parse import urlsplit

import attrs

# the settings models and URL rules lived here: importable from here as before (plugins use them)
from kxen_core.config.filters import AnnotationFilter, patterns_validator
from kxen_core.config.settings import McpSettings as McpSettings
from kxen_core.config.settings import Policy as Policy
from kxen_core.config.settings import ProjectTools as ProjectTools
from kxen_core.config.settings import RemoteCatalogLimits as RemoteCatalogLimits
from kxen_core.config.settings import Role as Role
from kxen_core.config.settings import Settings as Settings
from kxen_core.config.urls import check_remote_url as check_remote_url
from kxen_core.config.urls import is_loopback_host as is_loopback_host

#: the protocol era a server entry speaks: found by probing ("auto"), or pinned (no probe)
ProtocolEra = Literal["auto", "legacy", "modern"]
Scope = Literal["user", "project"]

SERVER_KEY_RE = re.compile(r"[A-Za-z0-9_-]{1,32}")
BUILTIN_REMOTE_KINDS = ("http", "sse")
#: the transport of a project entry in an untrusted workspace: only its name was read
UNREAD = "(not read)"


def check_server_key(key: str) -> str | None:
    """Return the rule a server key breaks, or ``None`` when it is fine.

    The rule makes model-facing names (``<server>__<tool>``) injective: a name without ``__`` that
    does not end in ``_`` cannot hold the start of the separator, so the first ``__`` of
    ``server__tool`` is always the separator (``a`` + ``_x`` and ``a_`` + ``x`` would both be
    ``a___x``).
    """
    if not SERVER_KEY_RE.fullmatch(key):
        return "server names are 1-32 characters of A-Z a-z 0-9 _ -"
    if "__" in key:
        return "server names must not contain '__' (it separates server and tool in model-visible names)"
    if key.endswith("_"):
        return (
            "server names must not end with '_' (the model sees <server>__<tool>: 'a_' + 'x' would read as 'a' + '_x')"
        )
    return None


def _positive(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not value > 0 or value > 86400:
        raise ValueError(f"{attribute.name} must be a number of seconds > 0 and <= 86400 (got {value!r})")


def _tool_seconds(instance: Any, attribute: attrs.Attribute, value: dict[str, float]) -> None:
    if len(value) > MAX_TOOL_TIMEOUTS:
        raise ValueError(f"toolSeconds may name at most {MAX_TOOL_TIMEOUTS} tools (got {len(value)})")
    for tool, seconds in value.items():
        if not tool:
            raise ValueError("toolSeconds: tool names must not be empty")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= 86400:
            raise ValueError(f"toolSeconds.{tool[:64]} must be a number of seconds > 0 and <= 86400 (got {seconds!r})")


#: the most tools one server's ``timeouts.toolSeconds`` may name
MAX_TOOL_TIMEOUTS = 1000


@attrs.frozen(kw_only=True)
class Timeouts:
    """A server's time budgets (docs/config.md, "Timeouts")."""

    #: a request's reply; for a tool call, again from each progress notification (``resetOnProgress``)
    requestSeconds: float = attrs.field(default=30.0, validator=_positive)
    #: a local server's start until its first answer (a package runner's first install counts here)
    startupSeconds: float = attrs.field(default=120.0, validator=_positive)
    #: the start once the server answered (a local server); a remote server's whole start
    initializeSeconds: float = attrs.field(default=60.0, validator=_positive)
    #: a progress notification of a tool call starts its timeout again
    resetOnProgress: bool = True
    #: no progress keeps a tool call waiting past this many seconds after it was sent (never
    #: less than the call's own timeout: a longer ``requestSeconds`` is not cut short by it)
    maxTotalSeconds: float = attrs.field(default=600.0, validator=_positive)
    #: a tool's own ``requestSeconds`` (user config only), by the server's name of the tool
    toolSeconds: dict[str, float] = attrs.field(factory=dict, validator=_tool_seconds)

    def for_tool(self, tool: str) -> float:
        """The request timeout of a call of ``tool``."""
        return self.toolSeconds.get(tool, self.requestSeconds) if self.toolSeconds else self.requestSeconds


OAuthGrant = Literal["authorization_code", "client_credentials", "workload_identity", "enterprise_managed"]
TokenEndpointAuthMethod = Literal["none", "client_secret_basic", "client_secret_post", "private_key_jwt"]
SigningAlgorithm = Literal["ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "EdDSA"]
_SCOPE_TOKEN_RE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,200}")  # RFC 6749 §3.3 scope-token


def _scope_tokens(instance: Any, attribute: attrs.Attribute, value: list[str]) -> None:
    for i, scope in enumerate(value):
        if not _SCOPE_TOKEN_RE.fullmatch(scope):
            raise ValueError(
                f"{attribute.name}[{i}] must be one scope token: 1-200 visible ASCII characters without space, '\"' "
                "or '\\'"
            )


@attrs.frozen(kw_only=True)
class OAuthConfig:
    """``oauth`` of a remote server entry (the kxen-oauth plugin reads it; docs/oauth.md).

    ``clientSecret``, ``privateKeyFile`` and the keys of :data:`USER_ONLY_OAUTH_KEYS` are user
    config only (see project.py).
    """

    clientId: str | None = None
    scopes: list[str] = attrs.field(factory=list, validator=_scope_tokens)
    authorizationServerMetadataUrl: str | None = None
    clientSecret: str | None = attrs.field(default=None, repr=False)
    #: ``client_credentials``: a headless grant with the client's own credentials (no person, no browser)
    grant: OAuthGrant = "authorization_code"
    #: how the client authenticates at the token endpoint; by default what the server and the config allow
    tokenEndpointAuthMethod: TokenEndpointAuthMethod | None = None
    #: a PEM private key for ``private_key_jwt`` (an absolute path; user config only)
    privateKeyFile: str | None = None
    signingAlgorithm: SigningAlgorithm | None = None
    #: the https URL of a Client ID Metadata Document to use instead of kxen's own
    clientMetadataUrl: str | None = None
    #: ``workload_identity``: the platform token file (a JWT), read at every grant
    workloadTokenFile: str | None = None
    #: ``enterprise_managed``: the IdP's token endpoint (RFC 8693), the client there, the ID token file
    idpTokenEndpoint: str | None = None
    idpClientId: str | None = None
    idpClientSecret: str | None = attrs.field(default=None, repr=False)
    idTokenFile: str | None = None
    #: DPoP-bound tokens (RFC 9449): true always, false never, unset when the server lists ES256
    dpop: bool | None = None


#: ``oauth`` keys a project file must not set (``grant`` only for the values here): they name
#: local credential files, hold a secret, or change how a token is bound
USER_ONLY_OAUTH_KEYS = (
    "workloadTokenFile",
    "idpTokenEndpoint",
    "idpClientId",
    "idpClientSecret",
    "idTokenFile",
    "dpop",
)
USER_ONLY_GRANTS = ("workload_identity", "enterprise_managed")


def check_oauth_shape(oauth: OAuthConfig) -> list[tuple[str, str]]:
    """Cross-field rules of an ``oauth`` block; ``(key path suffix, rule)`` pairs."""
    problems: list[tuple[str, str]] = []
    if oauth.clientId is not None and not (0 < len(oauth.clientId) <= 1000 and oauth.clientId.isprintable()):
        problems.append(("oauth.clientId", "must be 1-1000 printable characters"))
    if oauth.privateKeyFile is not None and not os.path.isabs(oauth.privateKeyFile):
        problems.append(("oauth.privateKeyFile", "must be an absolute path"))
    method = oauth.tokenEndpointAuthMethod
    if method == "private_key_jwt" and oauth.privateKeyFile is None:
        problems.append(("oauth.tokenEndpointAuthMethod", "private_key_jwt needs oauth.privateKeyFile"))
    if method in ("client_secret_basic", "client_secret_post") and oauth.clientSecret is None:
        problems.append(("oauth.tokenEndpointAuthMethod", f"{method} needs oauth.clientSecret (user config)"))
    if oauth.privateKeyFile is not None and oauth.clientId is None:
        problems.append(("oauth.privateKeyFile", "a private key needs oauth.clientId"))
    if oauth.signingAlgorithm is not None and oauth.privateKeyFile is None:
        problems.append(("oauth.signingAlgorithm", "only used with oauth.privateKeyFile"))
    if oauth.grant == "client_credentials":
        if oauth.clientId is None:
            problems.append(("oauth.grant", "client_credentials needs oauth.clientId"))
        elif oauth.clientSecret is None and oauth.privateKeyFile is None:
            problems.append(("oauth.grant", "client_credentials needs oauth.clientSecret or oauth.privateKeyFile"))
    for key in ("workloadTokenFile", "idTokenFile"):
        path = getattr(oauth, key)
        if path is not None and not os.path.isabs(path):
            problems.append((f"oauth.{key}", "must be an absolute path"))
    if oauth.grant == "workload_identity" and oauth.workloadTokenFile is None:
        problems.append(("oauth.grant", "workload_identity needs oauth.workloadTokenFile"))
    if oauth.workloadTokenFile is not None and oauth.grant != "workload_identity":
        problems.append(("oauth.workloadTokenFile", "only used with grant workload_identity"))
    idp = ("idpTokenEndpoint", "idpClientId", "idpClientSecret", "idTokenFile")
    if oauth.grant == "enterprise_managed":
        for key in ("idpTokenEndpoint", "idTokenFile"):
            if getattr(oauth, key) is None:
                problems.append(("oauth.grant", f"enterprise_managed needs oauth.{key}"))
        if oauth.clientId is None:
            problems.append(
                (
                    "oauth.grant",
                    "enterprise_managed needs oauth.clientId (the client at the MCP server's authorization server)",
                )
            )
    else:
        for key in idp:
            if getattr(oauth, key) is not None:
                problems.append((f"oauth.{key}", "only used with grant enterprise_managed"))
    if oauth.idpClientId is not None and not (0 < len(oauth.idpClientId) <= 1000 and oauth.idpClientId.isprintable()):
        problems.append(("oauth.idpClientId", "must be 1-1000 printable characters"))
    if oauth.idpClientSecret is not None and oauth.idpClientId is None:
        problems.append(("oauth.idpClientSecret", "needs oauth.idpClientId"))
    if oauth.clientMetadataUrl is not None:
        parts = urlsplit(oauth.clientMetadataUrl)
        if parts.scheme != "https" or not parts.hostname or parts.path in ("", "/") or parts.fragment:
            problems.append(("oauth.clientMetadataUrl", "must be an https:// URL with a path and no fragment"))
    return problems


@attrs.frozen(kw_only=True)
class Expanded:
    """One value of a user entry that took host variables at load (``${VAR}``): its key path suffix
    (``env.TOKEN``, ``headers.Authorization``, ``url``), the value as written, and the values the
    host environment supplied -- secrets, never shown."""

    path: str
    written: str
    values: tuple[str, ...] = attrs.field(default=(), repr=False)


@attrs.frozen(kw_only=True)
class Unset:
    """A ``${VAR}`` of a user entry whose variable was not set (and had no default) when the config
    was loaded: the key path suffix as messages show it (``env.TOKEN``) and the variable's name."""

    path: str
    variable: str


@attrs.frozen(kw_only=True)
class ServerConfig:
    """One MCP server definition.

    ``name``, ``scope``, ``source``, ``expanded`` and ``unset`` are not read from the file: the
    loader sets them from the entry's key, the file it came from, the ``${VAR}`` references it
    expanded, and the ones whose variable was not set (then nothing is expanded and the server fails
    in phase ``config`` instead of starting).
    """

    name: str = ""
    scope: Scope = "user"
    source: str = ""  # the file this entry came from (for messages)
    #: the values that took host variables at load (set by the loader, never read from the file)
    expanded: tuple[Expanded, ...] = attrs.field(default=(), repr=False, eq=False)
    #: the ``${VAR}`` references whose variable was not set at load (set by the loader)
    unset: tuple[Unset, ...] = ()

    # stdio
    command: str | None = None
    args: list[str] = attrs.field(factory=list)
    env: dict[str, str] = attrs.field(factory=dict, repr=False)
    #: a file of KEY=VALUE lines read into ``env`` at load (user config only: :mod:`.envfile`)
    envFile: str | None = None
    cwd: str | None = None
    # remote
    url: str | None = None
    transport: str | None = None
    headers: dict[str, str] = attrs.field(factory=dict, repr=False)
    oauth: OAuthConfig | None = None
    # plugin-owned transport kinds keep their own options here; the plugin validates them
    options: dict[str, Any] = attrs.field(factory=dict)
    # policy and runtime
    toolPolicies: dict[str, Policy] = attrs.field(factory=dict)
    defaultToolPolicy: Policy = "ask"
    enabled: bool = True
    timeouts: Timeouts = attrs.field(factory=Timeouts)
    protocolEra: ProtocolEra = "auto"
    #: the guard on what a call's arguments carry out (kxen_core.policy.argument_guard); "off" in user config only
    egressGuard: Literal["on", "off"] = "on"
    #: what a changed tool definition does (kxen_core.policy.pins): None = the default, ``hold`` for a
    #: project or remote server, ``warn`` for a user's local one; a project entry may only say ``hold``
    pinning: Literal["hold", "warn", "off"] | None = None
    #: a user server's pinned tools that say they only read (``readOnlyHint``) are allowed where
    #: ``defaultToolPolicy`` would ask (kxen_core.policy.claims.read_only_vote); user config only
    allowReadOnly: bool = False
    # what the model is shown of the server's tools (kxen_core.policy.tool_filters): None = every tool. They
    # change nothing about what runs, so they are left out of equality: a reload that changes only them
    # keeps the server running and its catalog (the runtime applies the new filters to it)
    enabledTools: list[str] | None = attrs.field(default=None, validator=patterns_validator, eq=False)
    disabledTools: list[str] = attrs.field(factory=list, validator=patterns_validator, eq=False)
    annotationFilter: AnnotationFilter | None = attrs.field(default=None, eq=False)

    @property
    def kind(self) -> str:
        """The transport kind: the explicit ``transport``, else ``stdio`` for a command, ``http`` for a url."""
        if self.transport:
            return self.transport
        return "stdio" if self.command is not None else "http"

    @property
    def unread(self) -> bool:
        """A project entry of an untrusted workspace: only its name was read (nothing can start it)."""
        return self.transport == UNREAD

    @property
    def is_remote(self) -> bool:
        """http, sse, or any plugin kind that connects to a ``url``: all behind the remote switch."""
        return self.kind in BUILTIN_REMOTE_KINDS or (self.url is not None and self.kind != "stdio")


def check_project_cwd(cwd: str) -> str | None:
    """The rule a project entry's ``cwd`` breaks, or None: it must name a directory inside the
    workspace, so it is relative, without ``~`` and without ``..`` (a symlink that leads out is
    refused when the launch is resolved)."""
    if not cwd or "\0" in cwd:
        return "must be a non-empty path without NUL"
    if cwd.startswith("~"):
        return "must stay inside the workspace: '~' is not expanded in project config"
    if os.path.isabs(cwd) or cwd.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", cwd):
        return "must stay inside the workspace: an absolute path is not allowed in project config"
    if ".." in re.split(r"[/\\]", cwd):
        return "must stay inside the workspace: '..' is not allowed in project config"
    return None


def check_server_shape(server: ServerConfig) -> list[tuple[str, str]]:
    """Cross-field rules; returns ``(key path suffix, rule)`` pairs."""
    problems: list[tuple[str, str]] = []
    kind = server.kind
    if kind == "stdio":
        if server.command is None:
            problems.append(("command", "a stdio server needs 'command' (or a 'url' for a remote server)"))
        elif not server.command.strip():
            problems.append(("command", "must not be empty"))
        if server.url is not None:
            problems.append(("url", "a stdio server takes 'command', not 'url'"))
    elif kind in BUILTIN_REMOTE_KINDS:
        if server.url is None:
            if server.transport is None:
                problems.append(("", "a server needs 'command' (stdio) or 'url' (remote)"))
            else:
                problems.append(("url", f"a {kind} server needs 'url'"))
        if server.command is not None:
            problems.append(("command", f"a {kind} server takes 'url', not 'command'"))
    for tool in server.toolPolicies:
        if not tool:
            problems.append(("toolPolicies", "tool names must not be empty"))
    for key in server.env:
        if not key or "=" in key or "\0" in key:
            problems.append((f"env.{key}", "env names must be non-empty and contain no '=' or NUL"))
    if server.oauth is not None:
        if not server.is_remote:
            problems.append(("oauth", "only a remote (url) server signs in with OAuth"))
        problems.extend(check_oauth_shape(server.oauth))
    for name, value in server.headers.items():
        if not _HEADER_NAME_RE.fullmatch(name):
            problems.append((f"headers.{name}", "header names are HTTP tokens (letters, digits, !#$%&'*+-.^_`|~)"))
        elif not _HEADER_VALUE_RE.fullmatch(value):
            # never echo the value: it is usually a credential
            problems.append(
                (
                    f"headers.{name}",
                    "header values must be visible characters and spaces, without leading or trailing space",
                )
            )
    return problems


_HEADER_NAME_RE = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE_RE = re.compile(r"(?:[\x21-\x7e\x80-\xff](?:[\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?)?")

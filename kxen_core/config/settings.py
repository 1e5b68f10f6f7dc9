"""User settings, ``$KXEN_HOME/config.toml`` (snake_case keys): ``[mcp]`` (the remote switch, loopback
HTTP, bounds), trusted workspaces, roles, the user's policy for project tools and ``[audit]`` (the
audit trail) and ``[tool_search]``. attrs classes
whose attribute names are the file's keys, so error paths match; only the user writes them."""

from __future__ import annotations

import os
import re
from typing import Any, Literal

import attrs

from kxen_core.config.filters import AnnotationFilter, patterns_validator

Policy = Literal["allow", "ask", "deny"]


def _bounded_int(low: int, high: int):
    def check(instance: Any, attribute: attrs.Attribute, value: int) -> None:
        if not low <= value <= high:
            raise ValueError(f"{attribute.name} must be between {low} and {high} (got {value})")

    return check


def _server_names(instance: Any, attribute: attrs.Attribute, value: list[str]) -> None:
    for i, name in enumerate(value):
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", name):
            raise ValueError(f"{attribute.name}[{i}] must be a server name: 1-32 characters of A-Z a-z 0-9 _ -")


@attrs.frozen(kw_only=True)
class RemoteCatalogLimits:
    """Bounds on each item of a remote server's ``tools/list`` (``[mcp.remote_catalog]``)."""

    max_description_chars: int = attrs.field(default=4096, validator=_bounded_int(0, 1_000_000))
    max_schema_bytes: int = attrs.field(default=65536, validator=_bounded_int(64, 16 * 1024 * 1024))
    max_schema_depth: int = attrs.field(default=32, validator=_bounded_int(2, 256))


@attrs.frozen(kw_only=True)
class PrivateNetwork:
    """``[mcp.private_network]``: remote connections (and OAuth's) may reach private addresses --
    for every server (``allow``), or for the user's own servers named in ``servers``."""

    allow: bool = False
    servers: list[str] = attrs.field(factory=list, validator=_server_names)


def _acknowledged(instance: Any, attribute: attrs.Attribute, value: list[str] | None) -> None:
    for i, key in enumerate(value or ()):
        ok = key.startswith(("https://", "http://")) or re.fullmatch(r"sha256:[0-9a-f]{64}", key) is not None
        if not ok or len(key) > 2048:
            raise ValueError(
                f"{attribute.name}[{i}] must be a remote server's canonical URL (or sha256: and 64 hex digits), "
                "as kxen remote on writes it"
            )


@attrs.frozen(kw_only=True)
class McpSettings:
    """``[mcp]`` in config.toml. Only the user's settings can turn remote MCP on."""

    remote_enabled: bool = False
    #: the remote servers whose operator, data retention and access scope the user confirmed, by
    #: canonical URL (``kxen remote on``, ``Runtime.acknowledge_remote``); only the servers it names
    #: run: None (the key absent, a hand-written switch) confirms none, like an empty list
    remote_acknowledged: list[str] | None = attrs.field(default=None, validator=_acknowledged)
    allow_loopback_http: bool = False
    #: which remote connections may reach private addresses (RFC 1918, ULA, CGNAT)
    private_network: PrivateNetwork = attrs.field(factory=lambda: PrivateNetwork())
    remote_catalog: RemoteCatalogLimits = attrs.field(factory=RemoteCatalogLimits)
    #: the most characters of any one output handed to the agent (a tool result, a read, a prompt, an error)
    max_output_chars: int = attrs.field(default=50_000, validator=_bounded_int(10_000, 10_000_000))


def _absolute_paths(instance: Any, attribute: attrs.Attribute, value: list[str]) -> None:
    # a relative entry would trust whatever directory kxen happens to run in
    for i, path in enumerate(value):
        if not os.path.isabs(path):
            raise ValueError(f"{attribute.name}[{i}] must be an absolute path")


def _globs(instance: Any, attribute: attrs.Attribute, value: list[str]) -> None:
    for pattern in value:
        if not pattern or len(pattern) > 200:
            raise ValueError(f"{attribute.name}: patterns are 1-200 characters (got {len(pattern)})")


@attrs.frozen(kw_only=True)
class Role:
    """What one acting role may do: glob patterns over qualified tool names (``server__tool``).

    ``deny`` beats ``ask`` beats ``allow``; a tool that no pattern matches is denied to the role.
    """

    allow: list[str] = attrs.field(factory=list, validator=_globs)
    ask: list[str] = attrs.field(factory=list, validator=_globs)
    deny: list[str] = attrs.field(factory=list, validator=_globs)


def _workspace(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if not os.path.isabs(value):
        raise ValueError("must be an absolute path (the workspace whose project server this is)")


def _launch_fingerprint(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise ValueError("must be the 64 hex characters of the approved launch (kxen mcp approvals)")


@attrs.frozen(kw_only=True)
class ProjectTools:
    """The user's policy for tools of one project server, bound to the workspace and to the exact
    launch the user approved: when the launch changes (a command, an argument, a file it runs), the
    rule no longer applies. A project file cannot hold this (a repository must not allow its own tools)."""

    workspace: str = attrs.field(validator=_workspace)
    server: str
    launch: str = attrs.field(validator=_launch_fingerprint)
    tools: dict[str, Policy] = attrs.field(factory=dict)


def _server_name(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", value) or "__" in value or value.endswith("_"):
        raise ValueError("must be a server name: 1-32 characters of A-Z a-z 0-9 _ -, without '__', not ending in '_'")


@attrs.frozen(kw_only=True)
class ProjectFilters:
    """The user's filters on what the model is shown of one project server of one workspace (the
    workspace, or a directory inside it): applied on top of the project entry's own filters, so
    they only take tools away. Not bound to the launch, unlike :class:`ProjectTools`: a filter
    only hides, and a changed launch must not bring back what the user hid."""

    workspace: str = attrs.field(validator=_workspace)
    server: str = attrs.field(validator=_server_name)
    enabled_tools: list[str] | None = attrs.field(default=None, validator=patterns_validator)
    disabled_tools: list[str] = attrs.field(factory=list, validator=patterns_validator)
    annotation_filter: AnnotationFilter | None = None


@attrs.frozen(kw_only=True)
class AuditSettings:
    """``[audit]``: the audit trail of decided calls (:mod:`kxen_core.policy.audit`). ``enabled``
    unset: the host decides (the ``kxen`` command: on; ``Runtime(audit=False)``, the default: off);
    written, it decides for every host using this home. The trail is ``audit.jsonl`` in the data
    directory, rotated at ``max_file_bytes`` into at most ``max_files`` files in all."""

    enabled: bool | None = None
    max_file_bytes: int = attrs.field(default=10 * 1024 * 1024, validator=_bounded_int(65536, 1024**3))
    max_files: int = attrs.field(default=5, validator=_bounded_int(2, 100))


def _visible_patterns(instance: Any, attribute: attrs.Attribute, value: list[str]) -> None:
    if len(value) > 1000:
        raise ValueError(f"{attribute.name}: at most 1000 patterns (got {len(value)})")
    for i, pattern in enumerate(value):
        if not re.fullmatch(r"[A-Za-z0-9_\-.*?\[\]!]{1,200}", pattern):
            raise ValueError(
                f"{attribute.name}[{i}] must be a qualified tool name (server__tool) or a glob of one: "
                "1-200 characters of A-Z a-z 0-9 _ - . * ? [ ] !"
            )


@attrs.frozen(kw_only=True)
class ToolSearchSettings:
    """``[tool_search]``: whether the model is shown every tool, or the pinned ones and a search
    tool (``kxen_search_tools``) that finds the others (:mod:`kxen_core.runtime.search_tools`).
    ``auto``: on once the workspace's model-visible server tools pass ``threshold_tools`` in
    number or ``threshold_tokens`` in estimated tokens (docs/config.md, "Tool search").
    ``always_visible``: qualified names (``server__tool``) or globs of them that stay listed."""

    enabled: Literal["auto", "on", "off"] = "auto"
    threshold_tools: int = attrs.field(default=50, validator=_bounded_int(1, 1_000_000))
    threshold_tokens: int = attrs.field(default=10_000, validator=_bounded_int(100, 100_000_000))
    results: int = attrs.field(default=5, validator=_bounded_int(1, 20))
    always_visible: list[str] = attrs.field(factory=list, validator=_visible_patterns)


@attrs.frozen(kw_only=True)
class Settings:
    """User settings, ``$KXEN_HOME/config.toml``. Only the user writes these; no project can."""

    mcp: McpSettings = attrs.field(factory=McpSettings)
    trusted_workspaces: list[str] = attrs.field(factory=list, validator=_absolute_paths)
    roles: dict[str, Role] = attrs.field(factory=dict)
    #: ``[[project_tools]]``: the user's policy for tools of project servers (see ProjectTools)
    project_tools: list[ProjectTools] = attrs.field(factory=list)
    #: ``[[project_filters]]``: the user's filters on project servers' tools (see ProjectFilters)
    project_filters: list[ProjectFilters] = attrs.field(factory=list)
    audit: AuditSettings = attrs.field(factory=AuditSettings)
    tool_search: ToolSearchSettings = attrs.field(factory=ToolSearchSettings)


__all__ = [
    "AuditSettings",
    "McpSettings",
    "PrivateNetwork",
    "ProjectFilters",
    "ProjectTools",
    "RemoteCatalogLimits",
    "Role",
    "Settings",
    "ToolSearchSettings",
]

"""What the model sees of one server's tools: the tools filtered or denied (:mod:`kxen_core.policy.tool_filters`),
the entries ``Runtime.tools()`` gives, and their size.

:class:`ToolView` is the part of :class:`kxen_core.runtime.server.Server` that decides it. The catalog
stays as the server listed it (``catalogs["tools"]``, ``tools_by_name``, the name map); only
``hidden_tools`` (tool -> why) says which of them the model is not shown. A call of one is refused
before anything is sent: a filtered one (``filtered_tools``) with the filter that hides it, a
denied one by the policy votes that deny it (the same votes, counted once per tool, with the
reasons and plugin names a denial has always carried).

The view is computed again when the tools are listed and when a reload changes the config, never
per call: a filter toggled by a reload needs no new listing. The size of what the model is shown
(the compact JSON of the entries, and about a quarter of that in tokens) is computed when a status
asks for it after the catalog or the view changed, not per status.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kxen_core.policy import READ_ONLY_METHODS, ToolCall, Vote
from kxen_core.policy.tool_filters import denied, filtered, fixed_decision, fixed_impls, layers_for, may_deny
from kxen_core.runtime.states import State

if TYPE_CHECKING:
    from kxen_core.config import ServerConfig
    from kxen_core.launch.resolve import Launch
    from kxen_core.protocol.catalog import Catalog
    from kxen_core.runtime.admission import Admission

#: characters per token in the estimate of ``toolTokens`` (a real tokenizer differs by model)
CHARS_PER_TOKEN = 4
#: a tool the view does not know why it is missing from the shown tools (a pin holds it back)
WITHHELD = "held back: its definition is not accepted (kxen mcp status)"


class ToolView:
    """Mixed into ``Server``: the attributes below are the server's own (attrs fields there)."""

    if TYPE_CHECKING:
        env: Any
        entry: ServerConfig
        admission: Admission
        config: ServerConfig
        state: State
        launch: Launch | None
        catalogs: dict[str, Catalog]
        tools_by_name: dict[str, dict[str, Any]]
        tool_names: dict[str, str]
        hidden_tools: dict[str, str]
        held_tools: dict[str, Any]
        filtered_tools: dict[str, str]
        denied_methods: frozenset[str]
        _size: tuple[tuple[Any, ...], int] | None
        _policies: tuple[tuple[Any, ...], dict[str, str]] | None
        pin_states: dict[str, str]
        _unmatched: frozenset[str]

        @property
        def name(self) -> str: ...

        def changed(self) -> None: ...

        def diag(self, message: str) -> None: ...

    def refilter(self) -> None:
        """Decide again which tools the model is not shown (filters, a config or role ``deny``)
        and which of kxen's read-only methods the policy denies on this server."""
        self.refilter_tools()
        self.refilter_methods()

    def refilter_tools(self) -> None:
        env = self.env
        catalog = self.catalogs.get("tools")
        if env is None or catalog is None:
            self.hidden_tools = {}
            return
        server = self.config
        user = env.user_servers.get(server.name) if server.scope == "project" else None
        layers = layers_for(server, user_entry=user, settings=env.settings, workspace=env.workspace)
        deny = may_deny(server, env.role, env.settings)
        hidden: dict[str, str] = {}
        refused: dict[str, str] = {}
        if layers or deny:
            impls = fixed_impls(env.pm) if deny else []
            for item in catalog.items:
                name = item["name"]
                why = filtered(layers, name, item) if layers else None
                if why is not None:
                    refused[name] = why
                elif impls:
                    why = denied(env.pm, self._call(name, item), impls)
                if why is not None:
                    hidden[name] = why
        self.filtered_tools = refused if refused != self.filtered_tools else self.filtered_tools
        if hidden != self.hidden_tools:
            self.hidden_tools = hidden
            self.changed()
        named = frozenset(n for f in layers for n in f.exact_names)
        unmatched = named - {item["name"] for item in catalog.items} if named else frozenset()
        if unmatched and unmatched != self._unmatched:  # most likely a typo: said once per change
            shown = ", ".join(repr(n) for n in sorted(unmatched)[:10])
            self.diag(f"tool filters name tools the server does not list: {shown}")
        self._unmatched = unmatched

    def refilter_methods(self) -> None:
        env = self.env
        if env is None or not may_deny(self.config, env.role, env.settings):
            self.denied_methods = frozenset()
            return
        impls = fixed_impls(env.pm)
        self.denied_methods = frozenset(
            m for m in READ_ONLY_METHODS if denied(env.pm, self._call(m, {}, read_only=True), impls)
        )

    def _call(self, tool: str, info: dict[str, Any], *, read_only: bool = False) -> ToolCall:
        env = self.env
        return ToolCall(
            server=self.config,
            tool=tool,
            arguments={},
            role=env.role,
            tool_info=info,
            settings=env.settings,
            launch=self.launch,
            read_only_method=read_only,
        )

    def take_entry(self, entry: ServerConfig, admission: Admission) -> None:
        """A reload kept this server running (what runs is the same): the new entry and admission
        stand in for the old ones, so what only the view reads (the filters) is the new config's,
        and the view is decided again."""
        current = self.config
        user = self.env.user_servers.get(self.name) if self.env is not None else None
        for candidate in (admission.run, entry, user):
            if candidate is not None and candidate == current:
                self.config = candidate
                break
        self.entry, self.admission = entry, admission
        self.refilter()

    def tool_policies(self) -> dict[str, str]:
        """Each tool the model may see, and what a call of it with nothing else voting would be:
        ``allow`` or ``ask`` -- the config's and the role's votes (those that cannot change between
        calls), ``allowReadOnly``, and ``ask`` for a definition not accepted (pinning warn). A
        plugin's vote or one on the arguments (the argument guard) may still ask or deny a call.
        Worked out once per listing and config, when first asked for."""
        env = self.env
        if env is None:
            return {}
        tools, config, launch, states = self.tools_by_name, self.config, self.launch, self.pin_states
        role, settings = env.role, env.settings
        key = (tools, config, role, settings, launch, states)
        cached = self._policies
        if cached is not None and all(a is b for a, b in zip(cached[0], key, strict=True)):
            return cached[1]
        from kxen_core.policy.claims import read_only_vote
        from kxen_core.policy.pins import UNACCEPTED

        impls = fixed_impls(env.pm)
        # the common case, without a ToolCall per tool: the core's two votes, no role, no user rule
        plain = (
            role is None
            and len(impls) == 2
            and not (config.scope == "project" and settings is not None and settings.project_tools)
        )
        default = [Vote(decision=config.defaultToolPolicy, reason="defaultToolPolicy", plugin="kxen.config-policy")]
        out: dict[str, str] = {}
        decision: str
        for tool, info in tools.items():
            if plain:
                given = config.toolPolicies.get(tool)
                decision, why = (given, []) if given is not None else (config.defaultToolPolicy, default)
            else:
                call = self._call(tool, info)
                decision, why = fixed_decision(call, impls)
            state = states.get(tool, "")
            if decision == "ask" and why and config.allowReadOnly:
                lifted = read_only_vote(ToolCall(server=config, tool=tool, arguments={}, tool_info=info,
                                                 pin_state=state), why)  # fmt: skip
                decision = "allow" if lifted is not None else decision
            if decision == "allow" and state in UNACCEPTED:
                decision = "ask"
            out[tool] = decision
        self._policies = (key, out)
        return out

    def model_entries(self) -> list[dict[str, Any]]:
        """The tools the model sees of this server, as ``Runtime.tools(server)`` gives them (new
        dicts the host may change; their schemas are the catalog's own, copy one before changing it),
        each with its ``policy`` (:meth:`tool_policies`)."""
        name, model_names, hidden = self.name, self.tool_names, self.hidden_tools
        catalog = self.catalogs.get("tools")
        notes = catalog.notes if catalog is not None else {}
        policies = self.tool_policies()
        out: list[dict[str, Any]] = []
        append, policy = out.append, policies.get
        for tool, t in self.tools_by_name.items():  # keyed by each tool's "name"
            if hidden and tool in hidden:
                continue
            # a new dict per tool, made in one step (a key the tool has already keeps its place)
            entry = {**t, "server": name, "qualifiedName": model_names[tool], "policy": policy(tool, "deny")}
            if notes and tool in notes:
                entry["notes"] = notes[tool]  # what catalog plugins annotated
            append(entry)
        return out

    def listed_entries(self) -> list[dict[str, Any]]:
        """Every tool the server listed, each with ``hidden`` and ``why`` (None when shown)."""
        catalog = self.catalogs.get("tools")
        if catalog is None:
            return []
        notes = catalog.notes
        policies = self.tool_policies()
        out = []
        for t in catalog.items:
            tool = t["name"]
            entry = t.copy()
            entry["server"], entry["qualifiedName"] = self.name, self.tool_names.get(tool, tool)
            if notes and tool in notes:
                entry["notes"] = notes[tool]
            why = self.hidden_tools.get(tool) or (None if tool in self.tools_by_name else self._held_why(tool))
            entry["hidden"], entry["why"] = why is not None, why
            if why is None:
                entry["policy"] = policies.get(tool, "deny")
            out.append(entry)
        return out

    def _held_why(self, tool: str) -> str:
        """Why a listed tool that no filter hides is not shown: held (pinning), with the next step."""
        held = self.held_tools.get(tool)
        if held is None:
            return WITHHELD
        from kxen_core.runtime.server_pins import next_step

        return f"held (pinning hold): {held.reason}; next: {next_step(self.name, held)}"

    def context_view(self) -> dict[str, Any]:
        """The status keys of what the model is shown: ``toolsHidden`` (listed tools it is not
        shown), ``toolChars`` (characters of the compact JSON of the tools it is shown, as
        ``Runtime.tools(server)`` gives them) and ``toolTokens`` (about ``toolChars / 4``)."""
        ready = self.state == State.READY
        key = (self.catalogs.get("tools"), self.tools_by_name, self.tool_names, self.hidden_tools, ready)
        cached = self._size
        if cached is None or any(a is not b for a, b in zip(cached[0], key, strict=True)):
            entries = self.model_entries() if ready else []
            chars = len(json.dumps(entries, ensure_ascii=False, separators=(",", ":"))) if entries else 0
            cached = self._size = (key, chars)
        chars = cached[1]
        return {
            "toolsHidden": len(self.hidden_tools),
            "toolChars": chars,
            "toolTokens": -(-chars // CHARS_PER_TOKEN),
        }


__all__ = ["CHARS_PER_TOKEN", "ToolView"]

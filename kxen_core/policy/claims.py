"""What a tool claims about itself, as an approval shows it: its title and its annotations
(``readOnlyHint``, ``destructiveHint``, ``idempotentHint``, ``openWorldHint``), said in words, with
whose claim it is, and the state of its pin (:mod:`kxen_core.policy.pins`). MCP calls annotations
hints a client must not rely on for a server it does not trust: for a project or remote server the
approval says they are the server's own, unverified.

One claim can also decide: a user who trusts their own server's word opts it in with
``"allowReadOnly": true``, and its pinned tools that say they only read are allowed where the
server's ``defaultToolPolicy`` would ask (:func:`read_only_vote`). Never for a project server (its
file cannot say it either), never for a tool whose definition nobody accepted (held, changed, new
or unchecked: the claim may be the change), never with pinning off (no pin to hold the claim to),
and never over any other vote: a ``toolPolicies`` or role ``ask``, the argument guard's, a plugin's.
"""

from __future__ import annotations

from typing import Any

#: each hint, and what it says when true and when false (MCP's defaults when a hint is absent:
#: not read-only, destructive, not idempotent, open world)
HINTS: dict[str, tuple[str, str]] = {
    "readOnlyHint": ("read-only", "may change things"),
    "destructiveHint": ("may destroy data", "not destructive"),
    "idempotentHint": ("idempotent", "not idempotent"),
    "openWorldHint": ("reaches the open world", "a closed world"),
}
MAX_TITLE_CHARS = 200
#: what an approval says of each pin state (:attr:`kxen_core.policy.ToolCall.pin_state`)
PIN_WORDS: dict[str, str] = {
    "pinned": "pinned: the definition accepted before",
    "first": "pinned now: the first listing of this server",
    "added": "pinned now: new on this server (pinning warn)",
    "changed": "changed since it was accepted: not accepted yet",
    "new": "new since the server was pinned: not accepted yet",
    "unchecked": "not checked: the pin store cannot be used",
    "unpinned": "not pinned (pinning off)",
}
#: the pin states whose definition is the accepted one (a claim in it can be relied on as the user's)
ACCEPTED = frozenset({"pinned", "first", "added"})
#: the reason of the vote :func:`read_only_vote` gives
READ_ONLY_REASON = "allowReadOnly: a pinned tool that says it only reads (readOnlyHint)"


def hints(tool_info: dict[str, Any]) -> dict[str, bool]:
    """The tool's standard hints that are booleans (anything else a server sends is left out)."""
    raw = tool_info.get("annotations")
    if not isinstance(raw, dict):
        return {}
    return {k: v for k, v in raw.items() if k in HINTS and isinstance(v, bool)}


def trusted(server: Any) -> bool:
    """Whether the user wrote this server in: their own local one (a project's or a remote one is not)."""
    return server.scope == "user" and not server.is_remote


def claims(server: Any, tool_info: dict[str, Any], pin_state: str = "") -> dict[str, Any]:
    """The approval's details about the tool: ``title``, ``annotations`` (as sent), ``claims`` (a
    line saying them in words and whose claims they are) and ``pin`` (its pin state in words, when
    known). Empty when the tool claims nothing and its pin state is not known."""
    out: dict[str, Any] = {}
    title = tool_info.get("title")
    if not isinstance(title, str):
        title = (
            (tool_info.get("annotations") or {}).get("title")
            if isinstance(tool_info.get("annotations"), dict)
            else None
        )
    if isinstance(title, str) and title.strip():
        out["title"] = title.strip()[:MAX_TITLE_CHARS]
    given = hints(tool_info)
    if given:
        out["annotations"] = given
        words = "; ".join(HINTS[k][0] if v else HINTS[k][1] for k, v in given.items())
        whose = (
            "what your own server says"
            if trusted(server)
            else f"the {'remote' if server.is_remote else 'project'} server's own claims, unverified"
        )
        out["claims"] = f"{words} ({whose})"
    if pin_state in PIN_WORDS:
        out["pin"] = PIN_WORDS[pin_state]
    return out


def read_only_vote(call: Any, why: list[Any]) -> Any:
    """The ``allow`` that ``allowReadOnly`` gives ``call`` (a :class:`kxen_core.policy.ToolCall`
    the votes decided ``ask`` on, for the reasons ``why``), or None: a user server that opted in, a
    tool whose definition is the accepted one and says ``readOnlyHint: true``, and no ask but the
    server's ``defaultToolPolicy``."""
    from kxen_core.policy import Vote

    server = call.server
    if not (getattr(server, "allowReadOnly", False) and server.scope == "user" and not call.read_only_method):
        return None
    if call.pin_state not in ACCEPTED or hints(call.tool_info).get("readOnlyHint") is not True:
        return None
    if not why or not all(v.reason == "defaultToolPolicy" and v.plugin in _CONFIG for v in why):
        return None
    return Vote(decision="allow", reason=READ_ONLY_REASON, plugin="kxen.config-policy")


#: the plugin names the config's own default vote comes under (a vote of the core, or none at all)
_CONFIG = frozenset({"kxen.config-policy", "config"})


__all__ = ["ACCEPTED", "HINTS", "PIN_WORDS", "claims", "hints", "read_only_vote", "trusted"]

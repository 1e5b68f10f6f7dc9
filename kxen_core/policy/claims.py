"""What a tool claims about itself, as an approval shows it: its title and its annotations
(``readOnlyHint``, ``destructiveHint``, ``idempotentHint``, ``openWorldHint``), said in words, with
whose claim it is. MCP calls annotations hints a client must not rely on for a server it does not
trust: for a project or remote server the approval says they are the server's own, unverified.
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


def hints(tool_info: dict[str, Any]) -> dict[str, bool]:
    """The tool's standard hints that are booleans (anything else a server sends is left out)."""
    raw = tool_info.get("annotations")
    if not isinstance(raw, dict):
        return {}
    return {k: v for k, v in raw.items() if k in HINTS and isinstance(v, bool)}


def trusted(server: Any) -> bool:
    """Whether the user wrote this server in: their own local one (a project's or a remote one is not)."""
    return server.scope == "user" and not server.is_remote


def claims(server: Any, tool_info: dict[str, Any]) -> dict[str, Any]:
    """The approval's details about the tool: ``title``, ``annotations`` (as sent) and ``claims``, a
    line saying them in words and whose claims they are. Empty when the tool claims nothing."""
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
    return out


__all__ = ["HINTS", "claims", "hints", "trusted"]

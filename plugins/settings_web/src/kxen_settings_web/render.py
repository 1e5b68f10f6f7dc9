"""What the page shows, rendered from the core's Settings API (``Runtime.settings_snapshot``).

One Jinja2 environment, autoescaping on: every string from a server, a config or a request goes
into the page as text, never as markup (the filters below also show control characters as
escapes and bound long values). The page is made of parts (:data:`PARTS`), rendered alone for the
live updates: the event stream sends the parts that changed and the page swaps them in.
"""

from __future__ import annotations

import json
import time
from typing import Any

import jinja2
import markupsafe

from kxen_core.safe_text import safe_text

#: the page's parts, each an element id and its template
PARTS = ("summary", "servers", "approvals", "pins", "remote", "logins", "problems", "tool-choice")
#: the most characters a value takes on the page (the rest is cut, and said so)
MAX_VALUE_CHARS = 2000
#: the most tools offered in "try a tool"
MAX_TOOLS = 500
#: the most held (or changed) tools shown, each with its diff; the rest are counted
MAX_PINS = 20
#: the most characters of one diff shown
DIFF_CHARS = 12000

_env = jinja2.Environment(
    loader=jinja2.PackageLoader("kxen_settings_web", "templates"),
    autoescape=True,  # every template, whatever its name
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)

#: how each state looks: its group (colour and shape) and the word shown beside it
STATES = {
    "ready": ("ok", "Ready"),
    "failed": ("bad", "Failed"),
    "awaiting_approval": ("wait", "Waiting for your approval"),
    "awaiting_trust": ("wait", "Waiting for workspace trust"),
    "needs_login": ("wait", "Needs sign-in"),
    "authenticating": ("busy", "Signing in"),
    "connecting": ("busy", "Connecting"),
    "initializing": ("busy", "Initializing"),
    "listing": ("busy", "Listing its catalogs"),
    "disabled": ("off", "Off"),
    "stopped": ("off", "Stopped"),
}
KINDS = {"stdio_launch": "Start a server", "tool_call": "Run a tool", "remote_enable": "Remote MCP"}
CHOICES = {
    "once": "Allow once",
    "call": "Allow",
    "tool": "Allow this tool (this run)",
    "always": "Always allow this tool",
}


def text(value: Any, limit: int = MAX_VALUE_CHARS) -> str:
    """A value as one escaped, bounded piece of text (JSON for what is not a string)."""
    if value is None:
        return ""
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    shown = safe_text(shown, multiline=True)
    if len(shown) > limit:
        shown = shown[:limit] + f" … [cut: {len(shown)} characters]"
    return shown


def pretty(value: Any, limit: int = MAX_VALUE_CHARS) -> str:
    """A JSON value over lines (an approval's arguments, a launch's env), escaped and bounded."""
    if isinstance(value, str):
        return text(value, limit)
    return text(json.dumps(value, ensure_ascii=False, indent=2, default=str), limit)


def when(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(epoch))


_env.filters.update(text=text, pretty=pretty, when=when)
_env.globals.update(STATES=STATES, KINDS=KINDS, CHOICES=CHOICES, DIFF_CHARS=DIFF_CHARS)


def tool_options(tools: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The tools offered in "try a tool": the model-facing name and the first line of the description."""
    out = []
    for t in tools[:MAX_TOOLS]:
        raw = t.get("description")
        description = raw if isinstance(raw, str) else ""
        out.append({"name": str(t.get("qualifiedName", "")), "about": text(description.strip().split("\n")[0], 90)})
    return out


def context(
    snapshot: dict[str, Any],
    tools: list[dict[str, Any]],
    *,
    workspace: str,
    pins: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """What the templates read: the snapshot, its servers and their counts by group, the tools
    offered, and ``pins``: the held or changed tools (:data:`MAX_PINS` of them), each with its
    ``diff`` and the ``digest`` an acceptance is bound to when the pin store has them."""
    servers = snapshot["servers"]
    waiting = pins if pins is not None else snapshot.get("pins", [])
    counts: dict[str, int] = {}
    for s in servers:
        group = STATES.get(s["state"], ("off", s["state"]))[0]
        counts[group] = counts.get(group, 0) + 1
    return {
        "snap": snapshot,
        "servers": servers,
        "counts": counts,
        "tools": tool_options(tools),
        "more_tools": max(0, len(tools) - MAX_TOOLS),
        "workspace": text(workspace, 300),
        "pins": waiting[:MAX_PINS],
        "more_pins": max(0, len(snapshot.get("pins", [])) - MAX_PINS),
    }


def render_part(name: str, ctx: dict[str, Any]) -> str:
    return _env.get_template(f"{name}.html").render(**ctx)


def render_parts(ctx: dict[str, Any]) -> dict[str, str]:
    return {name: render_part(name, ctx) for name in PARTS}


def render_page(ctx: dict[str, Any], *, csrf: str) -> str:
    # the parts are this module's own output, escaped when they were rendered: markup, not text
    parts = {name: markupsafe.Markup(html) for name, html in render_parts(ctx).items()}
    return _env.get_template("page.html").render(parts=parts, csrf=csrf, **ctx)


__all__ = ["MAX_PINS", "PARTS", "context", "render_page", "render_part", "render_parts", "text"]

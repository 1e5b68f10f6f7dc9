"""``kxen mcp status``: what each server is doing, and what to do next.

The table has one row per server (state, counts: the tools listed and how many the model is not
shown, and about how many tokens the definitions it is shown take); below it, for each server that is not plainly
ready, its failed phase and reason, its note, the next step a person can take, and its last
diagnostics (a stdio server's stderr tail among them). ``--json`` carries the same rows plus
``next``.
"""

from __future__ import annotations

import argparse
from typing import Any

from kxen_core.cli.output import print_json, print_problems, say, table
from kxen_core.cli.problems import problem_objects
from kxen_core.safe_text import safe_text

EXIT_OK, EXIT_FAILED = 0, 1
#: the most diagnostics shown per server in the human output (--json has the last 20)
SHOWN_DIAGNOSTICS = 3


NO_SERVERS = (
    "no servers configured: add one with kxen mcp add NAME -- COMMAND [ARGS...] (a local server), "
    "kxen mcp add NAME --url URL (a remote one), or kxen mcp import FILE (from another tool's config)"
)


def say_indented(text: str, indent: str, *, err: bool = False) -> None:
    """``text`` (a reason, a diagnostic: a server's stderr may span lines) at ``indent``, each further
    line indented two more; every line escaped on its own (a newline starts a line, nothing else does)."""
    first, *rest = str(text).replace("\r\n", "\n").split("\n")
    say(indent + safe_text(first), err=err)
    for line in rest:
        if line.strip():
            say(indent + "  " + safe_text(line), err=err)


def next_step(row: dict[str, Any], workspace: Any, source: str | None) -> str | None:
    """The next thing a person can do about a server in this state, or None."""
    state, error = row["state"], row.get("error") or ""
    if state == "awaiting_trust":
        return f"kxen trust {workspace}  (then approve its launch: kxen mcp approvals)"
    if state == "awaiting_approval":
        fingerprint = row.get("fingerprint")
        return (
            f"kxen --approve {fingerprint} mcp status  (see what it runs: kxen mcp approvals)" if fingerprint else None
        )
    if state == "disabled":
        if "remote MCP is off" in (row.get("note") or ""):
            return "kxen remote on"
        return f"kxen mcp enable {row['name']}" + (f"  (in {source})" if source else "")
    if state == "failed":
        if row.get("phase") == "transport" and "not found" in error:
            return "install the command, or fix 'command' in its config (kxen mcp plan shows what would run)"
        return "see the reason and diagnostics above; kxen -v mcp status logs every step"
    if state == "needs_login":
        return f"kxen mcp login {row['name']}"
    if state in ("connecting", "initializing", "listing"):
        return "still starting: wait longer with --wait S, or look at it with kxen -v mcp status"
    return None


def transport_cell(row: dict[str, Any]) -> str:
    """The transport column, with the protocol era once connected: ``http (modern)`` for the
    stateless 2026-07-28 era, ``stdio (legacy)`` for the handshake era (the version is in --json)."""
    return f"{row['transport']} ({row['era']})" if row.get("era") else str(row["transport"])


def tools_cell(row: dict[str, Any]) -> str:
    """The tools column: the listed tools, and how many of them the model is not shown (``12 (3
    hidden)``: filtered or denied; ``kxen mcp tools --all`` says why)."""
    hidden = row.get("toolsHidden") or 0
    return f"{row['tools']} ({hidden} hidden)" if hidden else str(row["tools"])


def status(rt: Any, args: argparse.Namespace) -> int:
    servers = rt.status()
    sources = {name: s.config.source for name, s in rt.servers.items()}
    for row in servers:
        # the server's own next step (an auth failure's: kxen mcp login NAME) comes first
        row["next"] = row.get("next") or next_step(row, rt.workspace, sources.get(row["name"]))
    if args.json:
        files = rt.config.files if rt.config is not None else ()
        print_json({"servers": servers, "problems": problem_objects(rt.problems, files)})
    elif not servers:
        print_problems(rt.problems)
        say(NO_SERVERS)
    else:
        print_problems(rt.problems)
        table(
            "MCP servers",
            ["name", "scope", "transport", "state", "tools", "~tokens", "resources", "prompts"],
            [
                [
                    s["name"],
                    s["scope"],
                    transport_cell(s),
                    s["state"] + (f" ({s['phase']})" if s["phase"] else ""),
                    tools_cell(s),
                    f"{s['toolTokens']:,}" if s.get("toolTokens") else "",
                    s["resources"],
                    s["prompts"],
                ]
                for s in servers
            ],
        )
        waiting = _waiting(rt)
        for s in servers:
            lines = []
            if s["error"]:
                lines.append(s["error"])
            if s["note"]:
                lines.append(f"note: {s['note']}")
            lines.extend(waiting.get(s["name"], ()))
            if s["next"]:
                lines.append(f"next: {s['next']}")
            if s["state"] != "ready":
                lines.extend(f"diagnostic: {d}" for d in s["diagnostics"][-SHOWN_DIAGNOSTICS:])
            if lines:
                say(safe_text(f"{s['name']}:"))
                for line in lines:
                    say_indented(line, "  ")
    return EXIT_FAILED if any(s["state"] in ("failed", "needs_login") for s in servers) else EXIT_OK


#: the most held or unaccepted tools named per server in the human output (kxen mcp pins has them all)
SHOWN_HELD = 5
#: the most changed lines of one tool's diff shown under it, and the most characters of each
SHOWN_DIFF_LINES = 8
DIFF_LINE_CHARS = 160


def _waiting(rt: Any) -> dict[str, list[str]]:
    """Per server, a line for each tool whose definition waits for a person (at most SHOWN_HELD),
    each followed by the changed lines of its diff (at most SHOWN_DIFF_LINES)."""
    out: dict[str, list[str]] = {}
    shown: dict[str, int] = {}
    for h in rt.held_tools():
        lines = out.setdefault(h["server"], [])
        count = shown.get(h["server"], 0)
        shown[h["server"]] = count + 1
        if count < SHOWN_HELD:
            if h["held"]:
                lines.append(f"held: {h['tool']}: {h['reason']} (not shown to the model; calls refused)")
            else:
                lines.append(f"changed: {h['tool']}: {h['reason']} (pinning warn: still shown; calls ask again)")
            lines.extend(_changed_lines(rt, h["server"], h["tool"]))
        elif count == SHOWN_HELD:
            lines.append("... and more: kxen mcp pins " + h["server"])
    return out


def _changed_lines(rt: Any, server: str, tool: str) -> list[str]:
    """The removed and added lines of ``tool``'s diff (escaped by the diff), indented, bounded;
    nothing when the store has no diff for it."""
    from kxen_core.errors import KxenError

    try:
        diff = rt.pin_diff(server, tool)["diff"]
    except (KxenError, OSError):
        return []
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    out = [f"  {line[:DIFF_LINE_CHARS]}{' ...' if len(line) > DIFF_LINE_CHARS else ''}" for line in changed]
    if len(out) > SHOWN_DIFF_LINES:
        out = [*out[:SHOWN_DIFF_LINES], f"  ... the whole diff: kxen mcp pins diff {server} {tool}"]
    return out


__all__ = ["NO_SERVERS", "next_step", "say_indented", "status", "tools_cell", "transport_cell"]

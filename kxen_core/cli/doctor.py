"""``kxen mcp doctor SERVER``: start one server and check each step of its start on its own -- the
gate (trust, approval, the remote switch), the transport, auth, initialize, the tool list, and
optionally one call -- each with its time and its exact error, stopping at the first that fails --
and then the time budgets in force for the server (``timeouts``).

The transport step names the process it started (its pid). A process that runs but never answers
``initialize`` is named as such (with its pid), not reported as a generic timeout. A reason that
spans lines (a server's stderr) is printed as indented lines, each escaped.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from kxen_core.cli.entry_view import budgets
from kxen_core.cli.output import print_json
from kxen_core.cli.status import next_step, say_indented
from kxen_core.runtime.states import State
from kxen_core.safe_text import safe_text

EXIT_OK, EXIT_FAILED = 0, 1


def _entered(server: Any, state: State) -> float | None:
    return next((t for t, s in server.timeline if s == state), None)


def _ms(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else round((end - start) * 1000, 1)


def diagnose(rt: Any, name: str, waited: float) -> list[dict[str, Any]]:
    """The steps of ``name``'s start as far as it got, each ``{"step", "ok", "ms", "detail"}``."""
    server = rt.servers[name]
    row = next(s for s in rt.status() if s["name"] == name)
    t0 = server.timeline[0][0]
    init, listing, ready = (_entered(server, s) for s in (State.INITIALIZING, State.LISTING, State.READY))
    state, phase, error = row["state"], row["phase"], row["error"]
    steps: list[dict[str, Any]] = []

    def step(name: str, ok: bool, ms: float | None = None, detail: str | None = None) -> bool:
        steps.append({"step": name, "ok": ok, "ms": ms, "detail": detail})
        return ok

    if state in ("awaiting_trust", "awaiting_approval", "disabled"):
        step(
            "gate",
            False,
            None,
            f"{state}: {error or row['note'] or ''} -- next: {next_step(row, rt.workspace, server.config.source)}",
        )
        return steps
    step("gate", True, None, f"{row['scope']} server, {row['transport']}" + (f"; {row['note']}" if row["note"] else ""))
    # a server that wants a sign-in was reached (SSE's refused stream never got to initialize)
    reached = init is not None or state == "needs_login"
    pid = (row["transportInfo"] or {}).get("pid") or server.pid  # the process may have ended since
    started = f"pid {pid}" if pid else None
    if not step("transport", reached, _ms(t0, init), started if reached else error or state):
        return steps
    remote = server.config.is_remote
    auth_failed = (
        state == "needs_login"
        or phase == "auth"
        or (bool(error) and any(f"HTTP {code}" in error for code in (401, 403)))
    )
    headers = sorted(server.config.headers)
    auth = ("headers set: " + ", ".join(headers)) if headers else ("none configured" if remote else "not used (local)")
    failed_auth = f"{error} -- next: {row['next']}" if auth_failed and row.get("next") else error
    if not step("auth", not auth_failed, None, failed_auth if auth_failed else auth):
        return steps
    if listing is None:
        if state == "initializing":
            who = f"the process runs (pid {pid}) but" if pid else "the server"
            detail = f"{who} never answered initialize within {waited:g} s"
        else:  # the step is named already: "initialize: initialize: ..." says it twice
            detail = (error or state).removeprefix("initialize: ")
        step("initialize", False, _ms(init, time.monotonic()) if state == "initializing" else None, detail)
        return steps
    step("initialize", True, _ms(init, listing), None)
    if ready is None:
        step("tools", False, None, error or f"still {state}")
        return steps
    step(
        "tools",
        True,
        _ms(listing, ready),
        f"{row['tools']} tool(s), {row['resources']} resource(s), {row['prompts']} prompt(s)",
    )
    if phase is not None and state == "failed":  # ready once, failed since
        step("connection", False, None, error)
    return steps


async def doctor(rt: Any, args: argparse.Namespace, call_args: dict[str, Any]) -> int:
    steps = diagnose(rt, args.server, args.wait)
    if getattr(args, "call", None) and all(s["ok"] for s in steps):
        start = time.monotonic()
        try:
            result = await rt.call_tool(args.call, call_args, server=args.server, timeout=args.timeout)
        except Exception as exc:  # the exact error is the point
            steps.append(
                {
                    "step": "call",
                    "ok": False,
                    "ms": _ms(start, time.monotonic()),
                    "detail": f"{type(exc).__name__}: {exc}",
                }
            )
        else:
            failed = bool(result.get("isError"))
            steps.append({"step": "call", "ok": not failed, "ms": _ms(start, time.monotonic()),
                          "detail": "the tool reported an error (isError)" if failed else "ok"})  # fmt: skip
    ok = all(s["ok"] for s in steps)
    limits = budgets(rt.servers[args.server].config)
    if args.json:
        print_json({"server": args.server, "ok": ok, "steps": steps, "timeouts": limits})
    else:
        for s in steps:
            took = f" ({s['ms']:g} ms)" if s["ms"] is not None else ""
            say_indented(
                f"{'ok  ' if s['ok'] else 'FAIL'} {s['step']}{took}" + (f": {s['detail']}" if s["detail"] else ""), ""
            )
        say_indented(f"     timeouts: {_budget_words(limits)}", "")
    return EXIT_OK if ok else EXIT_FAILED


def _budget_words(limits: dict[str, Any]) -> str:
    """The budgets in force, in one line (docs/config.md, "Timeouts")."""
    start = f"start {limits['initializeSeconds']:g} s"
    if "startupSeconds" in limits:  # a local server: up to its first answer, then the rest of the start
        start = f"start {limits['startupSeconds']:g} s to its first answer, then {limits['initializeSeconds']:g} s"
    words = f"{start}, each request {limits['requestSeconds']:g} s"
    if limits["resetOnProgress"]:
        words += f" (a tool call's restarted by its progress, at most {limits['maxTotalSeconds']:g} s in all)"
    own = limits.get("toolSeconds") or {}
    if own:
        shown = ", ".join(f"{safe_text(tool)[:64]} {seconds:g} s" for tool, seconds in list(own.items())[:10])
        more = f" and {len(own) - 10} more" if len(own) > 10 else ""
        words += f"; tools of their own: {shown}{more}"
    return words


__all__ = ["diagnose", "doctor"]

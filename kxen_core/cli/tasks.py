"""``kxen mcp tasks [SERVER] [--cancel TASK_ID] [--json]``: the tasks of tool calls (2025-11-25 tasks)
that each ready server lists (``tasks/list``) and that this runtime knows, or the cancellation of
one (``tasks/cancel``; docs/cli.md)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from kxen_core.cli.output import print_json, say, table
from kxen_core.errors import KxenError
from kxen_core.runtime.states import State
from kxen_core.safe_text import safe_text

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
#: the longest status message the table shows (--json has what the runtime keeps)
SHOWN_MESSAGE = 60


def add_command(mcp: Any, common: Any) -> None:
    tasks = mcp.add_parser("tasks", help="the tasks of tool calls each server runs: list them, or cancel one")
    tasks.add_argument("server", nargs="?", help="only this server (needed with --cancel)")
    tasks.add_argument("--cancel", metavar="TASK_ID", help="cancel this task of SERVER (tasks/cancel)")
    common(tasks)


async def run(rt: Any, args: argparse.Namespace) -> int:
    if args.cancel is not None:
        return await _cancel(rt, args)
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    for server in rt.servers.values():
        if args.server is not None and server.name != args.server:
            continue
        if server.state != State.READY:
            if args.server is not None:
                problems.append(f"server {server.name!r} is {server.state.value}: its tasks cannot be listed")
            continue
        try:
            rows.extend(await rt.server_tasks(server.name))
        except KxenError as exc:
            problems.append(f"server {server.name!r}: tasks/list failed: {exc}")
    if args.json:
        print_json({"tasks": rows, "problems": [safe_text(p) for p in problems]})
    else:
        if rows:
            table(
                "tasks",
                ["server", "task", "tool", "status", "message"],
                [[r["server"], r["taskId"], r["tool"] or "-", r["status"], _cut(r["statusMessage"])] for r in rows],
            )
        else:
            say("no tasks: none listed by a ready server, none known to this runtime")
        for problem in problems:
            say(safe_text(f"kxen: {problem}"), err=True)
    return EXIT_FAILED if problems else EXIT_OK


async def _cancel(rt: Any, args: argparse.Namespace) -> int:
    if args.server is None:
        say(
            "kxen: error: --cancel TASK_ID needs the SERVER it runs on (kxen mcp tasks SERVER --cancel TASK_ID)",
            err=True,
        )
        return EXIT_USAGE
    known = [t for t in rt.tasks(args.server) if t["taskId"] == args.cancel]
    handle = (
        known[0]
        if known
        else {"server": args.server, "taskId": args.cancel, "tool": "-", "ttl": None, "created": time.time()}
    )
    try:
        done = await rt.cancel_task(handle)
    except KxenError as exc:
        if args.json:
            print_json({"cancelled": None, "error": safe_text(str(exc))})
        else:
            say(safe_text(f"kxen: error: {exc}"), err=True)
        return EXIT_FAILED
    if args.json:
        print_json({"cancelled": done, "error": None})
    else:
        say(safe_text(f"task {done['taskId']} of {done['server']}: {done['status']}"))
    return EXIT_OK


def _cut(text: Any) -> str:
    if not text:
        return ""
    text = str(text)
    return text if len(text) <= SHOWN_MESSAGE else text[: SHOWN_MESSAGE - 3] + "..."


__all__ = ["add_command", "run"]

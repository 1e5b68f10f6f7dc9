"""``kxen mcp ...`` with servers running: a Runtime entered for the command, every server closed with
the usual bounds when it ends or a signal arrives, and 128 + N after signal N.

Signals: SIGINT, SIGTERM, SIGHUP (a closed terminal) and every other catchable signal whose default
would end the process (SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM...) do what Ctrl-C does: the command is
cancelled, every server is closed (its whole process group and its descendants; on Linux kxen is a
child subreaper while it runs, so orphans that double-forked away are ended too, see
:mod:`kxen_core.runtime.host`). A second signal during that close is absorbed: the close is bounded
anyway.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

import anyio

from kxen_core.cli import contents, login
from kxen_core.cli import status as cli_status
from kxen_core.cli.output import print_json, say, table, use_secrets
from kxen_core.cli.wait import wait_visibly
from kxen_core.safe_text import Secrets, safe_text

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


#: the signals that end ``kxen mcp ...`` cleanly (those this platform has)
#: every catchable signal whose default action ends the process: each closes the servers first
#: (SIGKILL cannot be caught: what it leaves is ended at the next start, see kxen_core.runtime.host)
STOP_SIGNALS = tuple(
    getattr(signal, n)
    for n in (
        "SIGINT",
        "SIGTERM",
        "SIGHUP",
        "SIGQUIT",
        "SIGUSR1",
        "SIGUSR2",
        "SIGALRM",
        "SIGVTALRM",
        "SIGPROF",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGPOLL",
        "SIGPWR",
    )
    if hasattr(signal, n)
)


async def _mcp_until_signal(args: argparse.Namespace) -> int:
    """:func:`_mcp`, cancelled by any of :data:`STOP_SIGNALS`; then 128 + the signal number.

    The receiver stays installed until every server is closed, so a repeated signal cannot kill
    kxen in the middle of its (shielded, bounded) close. Around the work, every plugin's host guard
    (:func:`kxen_core.runtime.host.host_guard`): the stdio transport's ends what a crashed kxen left running,
    records this process's servers, and adopts and ends the orphans of double-forking servers."""
    from kxen_core.config.loader import default_home
    from kxen_core.errors import printable
    from kxen_core.plugins.manager import make_plugin_manager
    from kxen_core.runtime.host import host_guard

    received: list[int] = []
    code, error = EXIT_FAILED, None  # type: int, Exception | None
    home = args.home or default_home()
    if getattr(args, "pm", None) is None:  # a plugin's command comes with the manager that added it
        args.pm = make_plugin_manager()
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        command = getattr(args, "plugin_command", None)
        adopt = command is None or command.adopt_orphans
        async with host_guard(args.pm, home, subreaper=adopt) as problems:
            for problem in problems:
                print(f"kxen: warning: {printable(problem)}", file=sys.stderr)
            async with anyio.create_task_group() as tg:
                work = anyio.CancelScope()

                async def watch() -> None:
                    async for signum in signals:
                        received.append(int(signum))
                        work.cancel()

                tg.start_soon(watch)
                with work:
                    try:
                        code = await _mcp(args)
                    except Exception as exc:  # raised as itself below, not in a task group's ExceptionGroup
                        error = exc
                tg.cancel_scope.cancel()
        if received:
            # leaving the receiver puts each signal back to its default (death by signal): until
            # they are ignored below, a signal still coming waits, blocked, instead of killing kxen
            _mask(signal.SIG_BLOCK)
    if error is not None and not received:
        raise error
    if received:
        # kxen exits now: a signal still coming must not turn 128+N into death by signal
        for signum in STOP_SIGNALS:
            try:
                signal.signal(signum, signal.SIG_IGN)
            except (ValueError, OSError):  # not the main thread: nothing to protect
                pass
        _mask(signal.SIG_UNBLOCK)  # what arrived meanwhile is discarded: it is ignored now
        return 128 + received[0]
    return code


def _mask(how: int) -> None:
    """Block or unblock :data:`STOP_SIGNALS` for this thread (where the platform can)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(how, STOP_SIGNALS)


async def _mcp(args: argparse.Namespace) -> int:
    from kxen_core.config.converter import SURROGATE_RULE, lone_surrogates
    from kxen_core.errors import printable
    from kxen_core.runtime.workspace import Runtime

    command = getattr(args, "plugin_command", None)
    if command is not None:  # kxen_register_commands: the runtime made here, entered by the command
        rt = Runtime(
            home=args.home, workspace=args.workspace, pm=args.pm, approve=args.approve, role=args.role, audit=True
        )
        # what it prints and logs is scrubbed of the runtime's secrets, as for the other commands;
        # asked at each line, since the command loads the config (and signs in) after this
        use_secrets(Secrets(sources=[lambda: rt.secrets.values]))
        return await command.run(rt, args)
    only = None
    if getattr(args, "server", None):  # a command about one server starts only that one
        only = {args.server}
    call_args: dict[str, Any] = {}
    if args.mcp_command in ("call", "get-prompt", "doctor"):
        problem = None
        try:
            call_args = json.loads(args.args)
        except RecursionError:
            problem = "--args is not valid JSON: nested too deeply"
        except ValueError as exc:  # UnicodeError included
            problem = f"--args is not valid JSON: {exc}"
        else:
            if not isinstance(call_args, dict):
                problem = "--args must be a JSON object"
            elif lone_surrogates(call_args, limit=1):  # undecodable argv bytes or "\ud800" escapes
                problem = f"--args: {lone_surrogates(call_args, limit=1)[0]}: {SURROGATE_RULE}"
        if problem is not None:
            print(f"kxen: error: {printable(problem)}", file=sys.stderr)
            return EXIT_USAGE

    pm = getattr(args, "pm", None)
    # the kxen command keeps the audit trail (docs/config.md [audit]: the user's setting decides)
    async with Runtime(
        home=args.home, workspace=args.workspace, pm=pm, only=only, approve=args.approve, role=args.role, audit=True
    ) as rt:
        if only and not set(only) <= set(rt.servers):
            say(f"kxen: error: no server named {safe_text(repr(args.server))} is configured", err=True)
            return EXIT_USAGE
        assert rt.config is not None
        use_secrets(rt.secrets)  # the config's and what plugins hold (the tokens of a sign-in)
        if args.mcp_command in login.COMMANDS:  # no waiting first: the server may well need the sign-in
            return await login.run(rt, args)
        await wait_visibly(rt, args.wait)
        if args.mcp_command == "status":
            return cli_status.status(rt, args)
        if args.mcp_command == "tools":
            return await _tools(rt, args)
        if args.mcp_command == "doctor":
            from kxen_core.cli.doctor import doctor

            return await doctor(rt, args, call_args)
        if args.mcp_command in ("resources", "templates", "prompts"):
            return getattr(contents, args.mcp_command)(rt, args)
        if args.mcp_command == "tasks":
            from kxen_core.cli import tasks as cli_tasks

            return await cli_tasks.run(rt, args)
        if args.mcp_command == "read":
            return await contents.read(rt, args)
        if args.mcp_command == "get-prompt":
            return await contents.get_prompt(rt, args, call_args)
        return await contents.call(rt, args, call_args)


async def _tools(rt: Any, args: argparse.Namespace) -> int:
    every = getattr(args, "all", False)
    tools = rt.tools(args.server, include_hidden=every)
    for t in tools:  # what a call would meet: allow, ask (an approval) or deny
        if t["server"] is None:
            t["policy"] = "allow" if not t.get("hidden") else "deny"  # kxen's read-only tools (docs/config.md)
        else:
            t["policy"], t["policyReasons"] = await rt.tool_policy(t["server"], t["name"])
    waiting = _not_listed(rt, args.server)
    if args.json:
        print_json({"tools": tools, "notListed": waiting})
    else:
        columns = ["model-facing name", "server", "tool", "policy", "description"]
        rows = [
            [t["qualifiedName"], t["server"] or "(kxen)", t["name"], t["policy"], _first_line(t.get("description"))]
            for t in tools
        ]
        if every:  # why the model is not shown a tool ("" when it is)
            columns.insert(4, "not shown: why")
            for row, t in zip(rows, tools, strict=True):
                row.insert(4, t.get("why") or "")
        table("tools", columns, rows)
        if any(t["policy"] == "ask" for t in tools):
            say(
                "tools whose policy is 'ask' need an approval for each call (a terminal asks; else kxen --approve, "
                "or toolPolicies)"
            )
        if not every:
            for s in rt.status():
                if s.get("toolsHidden") and (args.server is None or s["name"] == args.server):
                    n = s["toolsHidden"]
                    say(
                        safe_text(
                            f"{s['name']}: {n} listed tool{'s' if n != 1 else ''} not shown to the model "
                            "(filtered or denied): kxen mcp tools --all shows why"
                        )
                    )
        search = rt.tool_search_state()
        if search["on"] and args.server is None and not every:
            n = search["deferred"]
            say(
                f"tool search is on ({search['why']}): {n} tool{'s' if n != 1 else ''} not listed here are found "
                "by kxen_search_tools and called by name (docs/config.md, Tool search); kxen mcp tools --all lists them"
            )
        for w in waiting:  # a server whose tools are not listed yet says why, not nothing
            say(safe_text(f"{w['server']}: no tools listed: {w['state']}: {w['reason']}"))
            if w["next"]:
                say(safe_text(f"  next: {w['next']}"))
    failed = [s for s in rt.status() if s["state"] == "failed"]
    for s in failed:
        say(safe_text(f"kxen: server {s['name']!r} failed ({s['phase']}): {s['error']}"), err=True)
    return EXIT_FAILED if failed else EXIT_OK


#: the states in which a server's tools are not listed because a person has a step to take
WAITING = ("awaiting_trust", "awaiting_approval", "needs_login", "disabled")


def _not_listed(rt: Any, only: str | None) -> list[dict[str, Any]]:
    """The servers waiting on trust, an approval, a sign-in or a switch: ``{"server", "state",
    "reason", "next"}`` each (a failed one is reported on stderr)."""
    sources = {name: s.config.source for name, s in rt.servers.items()}
    out = []
    for row in rt.status():
        if row["state"] not in WAITING or (only is not None and row["name"] != only):
            continue
        reason = row["error"] or row["note"] or row["state"].replace("_", " ")
        step = row.get("next") or cli_status.next_step(row, rt.workspace, sources.get(row["name"]))
        out.append({"server": row["name"], "state": row["state"], "reason": reason, "next": step})
    return out


def _first_line(text: Any) -> str:
    """The first line of a description, at most 100 characters; a cut says so with an ellipsis."""
    lines = (text if isinstance(text, str) else "").strip().split("\n")
    first = lines[0]
    if len(first) > 100:
        return first[:99] + "…"
    return first + (" …" if len(lines) > 1 and any(line.strip() for line in lines[1:]) else "")


__all__ = ["STOP_SIGNALS"]

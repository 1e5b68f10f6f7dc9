"""``kxen mcp login SERVER`` and ``kxen mcp logout SERVER``: signing in to a remote server.

``login`` starts the sign-in (:meth:`kxen_core.Runtime.login_start`; a plugin such as kxen-oauth does
the protocol), prints the authorization URL, opens it with the standard ``webbrowser`` unless
``--no-browser``, and waits -- a spinner on a terminal, a "still waiting" line elsewhere -- at most
``--timeout`` seconds for the person to finish; then the server restarts with its new credential
and the outcome is printed. ``logout`` forgets what the plugins stored for the server.

Everything shown that came from outside kxen (the URL, a reason) is escaped.
"""

from __future__ import annotations

import argparse
import sys
import time
import webbrowser
from typing import Any

import anyio

from kxen_core.cli.output import say
from kxen_core.cli.wait import wait_visibly
from kxen_core.errors import AuthRequired, KxenError
from kxen_core.safe_text import safe_text

EXIT_OK, EXIT_FAILED = 0, 1
#: the default of ``--timeout``: as long as a sign-in flow keeps its redirect listener
DEFAULT_TIMEOUT = 300.0
#: the default of ``--wait``: how long the server may take to be ready again after the sign-in
DEFAULT_WAIT = 60.0
#: how long opening a browser may take before kxen stops waiting for it
BROWSER_SECONDS = 10.0
#: how often the sign-in is polled (the spinner's tick); then the "still waiting" lines
TICK = 0.2
FIRST_NOTICE, NOTICE_EVERY = 3.0, 10.0

COMMANDS = ("login", "logout")


def add_commands(mcp: Any, seconds: Any) -> None:
    """Register ``login`` and ``logout`` on the ``kxen mcp`` subparsers."""
    login = mcp.add_parser(
        "login", help="sign in to a remote server (OAuth, through a sign-in plugin such as kxen-oauth)"
    )
    login.add_argument("server")
    login.add_argument("--no-browser", action="store_true", help="print the sign-in URL only; do not open a browser")
    login.add_argument(
        "--timeout",
        type=seconds,
        default=DEFAULT_TIMEOUT,
        help=f"seconds to wait for the sign-in (default {DEFAULT_TIMEOUT:g})",
    )
    login.add_argument(
        "--scope",
        action="append",
        default=[],
        metavar="SCOPE",
        help="ask for this scope too (repeatable; space-separated lists too)",
    )
    login.add_argument(
        "--wait",
        type=seconds,
        default=DEFAULT_WAIT,
        help="seconds to wait for the server to be ready after the sign-in",
    )
    logout = mcp.add_parser("logout", help="forget the tokens stored for a remote server")
    logout.add_argument("server")
    logout.add_argument("--forget-client", action="store_true", help="forget the client registration too")


async def run(rt: Any, args: argparse.Namespace) -> int:
    if args.mcp_command == "logout":
        return await logout(rt, args)
    return await login(rt, args)


async def logout(rt: Any, args: argparse.Namespace) -> int:
    try:
        removed = await rt.logout(args.server, forget_client=args.forget_client)
    except KxenError as exc:
        say(safe_text(f"kxen: sign-out of {args.server!r} failed: {exc}"), err=True)
        return EXIT_FAILED
    if removed:
        say(safe_text(f"signed out of {args.server}: its stored tokens were removed"))
    else:
        say(safe_text(f"nothing was stored for {args.server}"))
    return EXIT_OK


async def login(rt: Any, args: argparse.Namespace) -> int:
    name = args.server
    scopes = [s for value in args.scope for s in value.split()]
    try:
        started = await rt.login_start(name, scopes=scopes, open_browser=not args.no_browser)
    except AuthRequired as exc:
        say(safe_text(f"kxen: cannot sign in to {name!r}: {exc}"), err=True)
        return EXIT_FAILED
    except KxenError as exc:  # no sign-in plugin for it, an unknown server, a plugin that broke
        say(safe_text(f"kxen: cannot sign in to {name!r}: {exc}"), err=True)
        return EXIT_FAILED
    if started.url:
        say(safe_text(f"To sign in to {name}, open this URL in a browser:"))
        say("  " + safe_text(started.url))
        if not args.no_browser and not await _open_browser(started.url):
            say("kxen: could not open a browser; open the URL above yourself", err=True)
    status = await _wait(rt, started.flow_id, name, args.timeout)
    for note in status.notes if status is not None else ():
        say(safe_text(f"kxen: note: {note}"), err=True)  # what the plugin repaired on the way
    if status is None:
        await rt.login_cancel(started.flow_id)
        say(safe_text(f"kxen: the sign-in to {name} was not finished within {args.timeout:g} s; cancelled"), err=True)
        return EXIT_FAILED
    if status.state != "complete":
        say(safe_text(f"kxen: sign-in to {name} {status.state}: {status.reason or 'no reason given'}"), err=True)
        return EXIT_FAILED
    say(safe_text(f"signed in to {name}"))
    await wait_visibly(rt, args.wait)
    row = next((s for s in rt.status() if s["name"] == name), None)
    if row is None:
        return EXIT_OK
    if row.get("note") and row["note"] not in status.notes:
        say(safe_text(f"kxen: note: {row['note']}"), err=True)  # a repair made while it started, among others
    if row["state"] == "ready":
        say(safe_text(f"{name} is ready: {row['tools']} tool(s)"))
        return EXIT_OK
    detail = f": {row['error']}" if row.get("error") else ""
    say(safe_text(f"kxen: {name} is {row['state']}{detail}"), err=True)
    if row.get("next"):
        say(safe_text(f"  next: {row['next']}"), err=True)
    return EXIT_FAILED


async def _open_browser(url: str) -> bool:
    """``webbrowser.open(url)`` in a worker thread, bounded (a console browser could hold it)."""
    opened = False
    with anyio.move_on_after(BROWSER_SECONDS):
        try:
            opened = bool(await anyio.to_thread.run_sync(webbrowser.open, url, abandon_on_cancel=True))
        except Exception:  # no usable browser: the URL is printed anyway
            opened = False
    return opened


async def _wait(rt: Any, flow_id: str, name: str, timeout: float) -> Any:
    """The sign-in's final :class:`~kxen_core.runtime.logins.LoginStatus`, or None after ``timeout``."""
    tty = sys.stderr.isatty()
    start = time.monotonic()
    notice = FIRST_NOTICE
    spinner: Any = None
    console_status: Any = None
    if tty:
        from rich.console import Console

        console_status = Console(stderr=True, markup=False, emoji=False, highlight=False).status("")
        spinner = console_status.__enter__()
    try:
        with anyio.move_on_after(timeout):
            while True:
                status = rt.login_poll(flow_id)
                if status.state != "pending":
                    return status
                waited = time.monotonic() - start
                if spinner is not None:
                    spinner.update(safe_text(f"waiting for the sign-in to {name} ({waited:.0f} s; Ctrl-C cancels)"))
                elif waited >= notice:
                    say(safe_text(f"kxen: still waiting for the sign-in to {name} after {waited:.0f} s"), err=True)
                    notice += NOTICE_EVERY
                await anyio.sleep(TICK)
        return None
    finally:
        if console_status is not None:
            console_status.__exit__(None, None, None)


__all__ = ["COMMANDS", "add_commands", "run"]

"""Entry point ``settings`` of the ``kxen`` group: the ``kxen settings`` command.

``kxen settings [--port N] [--no-open]`` serves the Settings page of the workspace's runtime on
127.0.0.1 (:func:`kxen_settings_web.serve`), prints its URL and opens a browser. Approvals of the
runtime wait on the page (the page is this process's approval channel) until the command ends; Ctrl-C
closes every server, as ``kxen mcp`` does. Nothing heavy is imported here: Starlette, uvicorn and
Jinja2 load when the command runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kxen_core import hookimpl
from kxen_core.commands import Command


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text[:40]!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535 (0: any free port): {value}")
    return value


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=_port, default=0, help="the port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--no-open", action="store_true", help="print the URL only; do not open a browser")


async def _run(runtime: Any, args: argparse.Namespace) -> int:
    from kxen_settings_web.serving import PortInUse, serve

    try:
        await serve(runtime, port=args.port, open_browser=not args.no_open)
    except PortInUse as exc:
        print(f"kxen: error: {exc}", file=sys.stderr)
        return 2
    return 0


@hookimpl
def kxen_register_commands(register: Any) -> None:
    register(
        Command(
            name="settings",
            help="open the Settings page: every server's state, approvals, remote MCP, sign-in, restart",
            configure=_configure,
            run=_run,
            # the browser it opens must outlive the command: kxen does not adopt orphans here (its
            # servers are still ended: process groups, and the descendants it records)
            adopt_orphans=False,
        )
    )

"""``kxen mcp pins [list] [SERVER] | diff SERVER TOOL | accept SERVER [TOOL] | reset SERVER``: the
pinned tool definitions (:mod:`kxen_core.policy.pins`), and the ones waiting for a person.

Nothing here starts or contacts a server: each command reads or changes the pin store (under its
lock) through the Runtime's pin API on a runtime it never enters (:mod:`kxen_core.runtime.pins_api`).
A kxen that runs meanwhile sees an acceptance at its next listing of the server, or its restart.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from kxen_core.cli.output import print_json, say, table
from kxen_core.errors import ConnectError, InvalidArguments, UnknownTool
from kxen_core.safe_text import safe_text

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
COMMANDS = ("pins",)
VERBS = ("list", "diff", "accept", "reset")

USAGE = """kxen mcp pins [list] [SERVER] [--json]
       kxen mcp pins diff SERVER TOOL [--json]
       kxen mcp pins accept SERVER [TOOL] [--digest D] [--json]
       kxen mcp pins reset SERVER [--json]"""

EPILOG = """A tool whose definition changed since it was pinned (or that is new on a pinned server) waits
for you: with pinning "hold" kxen keeps it from the model and refuses its calls until you accept it;
with "warn" it is shown and a call that policy would allow asks again.

examples:
  kxen mcp pins                       every server's pins and what waits
  kxen mcp pins diff github create_issue   what changed, as a diff
  kxen mcp pins accept github create_issue accept that definition
  kxen mcp pins accept github         accept every waiting definition of github
  kxen mcp pins reset github          forget github's pins: its next listing pins them again
"""


def add_commands(mcp: Any) -> None:
    """Register ``kxen mcp pins`` on the ``kxen mcp`` subparsers."""
    sp = mcp.add_parser(
        "pins",
        help="pinned tool definitions: list, diff, accept, reset (starts nothing)",
        usage=USAGE,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sp.add_argument("words", nargs="*", metavar="[VERB] ARGS", help="list [SERVER] | diff SERVER TOOL | ...")
    sp.add_argument("--digest", help="accept: only if the waiting definition is this one (at least 12 hex characters)")
    sp.add_argument("--json", action="store_true", help="print JSON for scripts")


def run(args: argparse.Namespace) -> int:
    import anyio

    from kxen_core.cli.change import plugin_manager, where
    from kxen_core.policy.pin_store import PinStoreError
    from kxen_core.runtime.workspace import Runtime

    words = list(args.words)
    verb = words.pop(0) if words and words[0] in VERBS else "list"
    wanted = {"list": (0, 1), "diff": (2, 2), "accept": (1, 2), "reset": (1, 1)}[verb]
    if not wanted[0] <= len(words) <= wanted[1] or (args.digest and verb != "accept"):
        say(f"kxen: error: usage:\n{USAGE}", err=True)
        return EXIT_USAGE
    home, workspace = where(args)
    rt = Runtime(home=home, workspace=workspace, pm=plugin_manager())
    try:
        if verb == "list":
            return _list(rt, words[0] if words else None, args.json)
        if verb == "diff":
            return _diff(rt, words[0], words[1], args.json)
        if verb == "accept":
            tool = words[1] if len(words) > 1 else None
            accepted = anyio.run(lambda: rt.accept_pin(words[0], tool, digest=args.digest))
            return _done(args.json, {"server": words[0], "accepted": accepted}, _accepted_text(words[0], accepted))
        forgotten = anyio.run(rt.reset_pins, words[0])
        text = (
            f"{words[0]}: {forgotten} pinned or waiting definitions forgotten; its next listing pins its tools again"
            if forgotten
            else f"{words[0]}: nothing was pinned"
        )
        return _done(args.json, {"server": words[0], "forgotten": forgotten}, text)
    except (UnknownTool, InvalidArguments, ConnectError, PinStoreError) as exc:
        if args.json:
            print_json({"ok": False, "error": safe_text(exc)})
        else:
            say(f"kxen: error: {safe_text(exc)}", err=True)
        return EXIT_USAGE if isinstance(exc, (UnknownTool, InvalidArguments)) else EXIT_FAILED


def _done(as_json: bool, data: dict[str, Any], text: str) -> int:
    if as_json:
        print_json({"ok": True, **data})
    else:
        say(safe_text(text))
    return EXIT_OK


def _accepted_text(server: str, accepted: list[str]) -> str:
    if not accepted:
        return f"{server}: no definition waits for acceptance"
    return (
        f"{server}: accepted {', '.join(accepted)}; a kxen that runs now shows and calls "
        f"{'them' if len(accepted) > 1 else 'it'} from its next listing of {server} (or its restart)"
    )


def _when(stamp: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if isinstance(stamp, int) else "?"


def _list(rt: Any, server: str | None, as_json: bool) -> int:
    rows = rt.pins(server)
    if as_json:
        print_json({"servers": rows})
        return EXIT_OK
    table(
        "tool pins",
        ["server", "scope", "pinning", "pinned", "waiting"],
        [
            [r["server"], r.get("scope", ""), r.get("pinning", ""), len(r.get("pinned", [])), len(r.get("waiting", []))]
            for r in rows
        ],
    )
    for r in rows:
        if r.get("error"):
            say(safe_text(f"{r['server']}: {r['error']}"))
        for w in r.get("waiting", []):
            what = f"changed: {', '.join(w['fields']) or 'definition'}" if w["state"] == "changed" else "new"
            how = "held" if r["pinning"] == "hold" else "shown, asks again" if r["pinning"] == "warn" else "not checked"
            say(safe_text(f"{r['server']}: {w['tool']} ({what}) since {_when(w.get('since'))}: {how}"))
            say(safe_text(f"  next: kxen mcp pins diff {r['server']} {w['tool']}, then kxen mcp pins accept "
                          f"{r['server']} {w['tool']}"))  # fmt: skip
    return EXIT_OK


def _diff(rt: Any, server: str, tool: str, as_json: bool) -> int:
    shown = rt.pin_diff(server, tool)
    if as_json:
        print_json(shown)
        return EXIT_OK
    what = f"changed ({', '.join(shown['fields']) or 'definition'})" if shown["state"] == "changed" else "new"
    say(safe_text(f"{server}: {tool} is {what} since {_when(shown.get('since'))}"))
    for line in shown["diff"].splitlines():
        say(line)  # escaped already (pins.diff)
    listed = shown.get("listed") or ""
    say(safe_text(f"accept this definition: kxen mcp pins accept {server} {tool} --digest {listed[:16]}"))
    return EXIT_OK


__all__ = ["COMMANDS", "add_commands", "run"]

"""``kxen mcp list | get | add | add-json | remove | import``: servers managed from the command line.

Nothing here starts or contacts a server. Reads go through the loader (:func:`load_config`, so
``list`` and ``get`` show entries exactly as kxen reads them, secrets redacted); writes go through
:mod:`kxen_core.config.edit` (checked by the loader's rules before they are saved, atomic, locked).
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

from kxen_core.cli.add import ADD_EPILOG, ADD_USAGE, add_options, entry_from
from kxen_core.cli.change import plugin_manager, refused, where
from kxen_core.cli.entry_view import describe
from kxen_core.cli.output import print_json, say, table, use_config
from kxen_core.cli.problems import problem_objects
from kxen_core.config.edit import add_server, check_document, read_document, remove_server, servers_file
from kxen_core.config.expand import unset_warnings
from kxen_core.config.models import UNREAD, ServerConfig
from kxen_core.errors import ConfigError
from kxen_core.safe_text import safe_text

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
COMMANDS = ("list", "get", "add", "add-json", "remove", "import")
SCOPES = ("user", "project")


def add_commands(mcp: Any) -> None:
    """Register the subcommands on the ``kxen mcp`` subparsers."""
    ls = mcp.add_parser("list", help="configured servers, from config (starts nothing)")
    ls.add_argument("--json", action="store_true", help="print JSON for scripts")
    get = mcp.add_parser("get", help="one server's entry as kxen reads it, secrets redacted")
    get.add_argument("name")
    get.add_argument("--scope", choices=SCOPES, help="the entry of this scope (default: the one in force)")
    get.add_argument("--json", action="store_true", help="print JSON for scripts")
    add = mcp.add_parser(
        "add",
        help="add a server: NAME [options] -- COMMAND ARGS..., or NAME --url URL",
        usage=ADD_USAGE,
        epilog=ADD_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add.add_argument("name")
    add_options(add)
    add.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    js = mcp.add_parser("add-json", help="add a server from a JSON entry (kxen's format, as in mcp.json)")
    js.add_argument("name")
    js.add_argument("entry", metavar="JSON")
    for sp in (js,):
        sp.add_argument("--scope", choices=SCOPES, default="user", help="which file (default: user)")
        sp.add_argument("--json", action="store_true", help="print JSON for scripts")
    rm = mcp.add_parser("remove", help="remove a server from config")
    rm.add_argument("name")
    rm.add_argument("--scope", choices=SCOPES, help="which file (needed when both have NAME)")
    rm.add_argument("--json", action="store_true", help="print JSON for scripts")
    imp = mcp.add_parser(
        "import", help="import servers from Claude Desktop, Claude Code, Cursor, VS Code or Gemini files"
    )
    imp.add_argument(
        "file", type=Path, nargs="?", help="the file (default with --from: where that tool keeps it; see docs/cli.md)"
    )
    imp.add_argument("--scope", choices=SCOPES, default="user", help="which file to write (default: user)")
    imp.add_argument(
        "--from", dest="source_format", choices=["auto", *_formats()], default="auto", help="the file's format"
    )
    imp.add_argument("--yes", action="store_true", help="write without asking")
    imp.add_argument("--json", action="store_true", help="print JSON for scripts")


def _formats() -> tuple[str, ...]:
    from kxen_core.config.imports import FORMATS

    return FORMATS


WRITES = ("add", "add-json", "remove", "import")


def run(args: argparse.Namespace) -> int:
    handler = {"list": _list, "get": _get, "add": _add, "add-json": _add_json, "remove": _remove, "import": _import}
    try:
        return handler[args.mcp_command](args)
    except ConfigError as exc:
        if args.mcp_command not in WRITES:
            raise
        return refused(args, exc)


def _load(args: argparse.Namespace) -> Any:
    from kxen_core.config import load_config

    home, workspace = where(args)
    config = load_config(home, workspace, pm=plugin_manager())  # raises ConfigError
    use_config(config)
    return config


# --- list and get -----------------------------------------------------------------------------


def _entries(config: Any) -> list[tuple[ServerConfig, dict[str, Any]]]:
    """Every entry of both files (user first), each with what the list says about it."""
    out = []
    project = {n: s for n, s in config.servers.items() if s.scope == "project"}
    for name, server in sorted(config.user_servers.items()):
        out.append((server, {"replacedByProject": name in project}))
    for _name, server in sorted(project.items()):
        out.append((server, {"replacedByProject": False}))
    return out


def _note(server: ServerConfig, extra: dict[str, Any]) -> str | None:
    if server.kind == UNREAD:
        return "not read: the workspace is not trusted (kxen trust)"
    if extra.get("replacedByProject"):
        return "a project entry of this name is used instead when it may start"
    if server.unset:
        from kxen_core.config.expand import unset_reason

        return f"will fail (phase config): {unset_reason(server)}"
    return None


def _list(args: argparse.Namespace) -> int:
    config = _load(args)
    rows = []
    for server, extra in _entries(config):
        rows.append({**describe(server, brief=True), **extra, "note": _note(server, extra)})
    problems = list(config.project_problems)
    if args.json:
        print_json({"servers": rows, "problems": problem_objects(problems, config.files), "trusted": config.trusted})
        return EXIT_OK
    from kxen_core.cli.output import print_problems

    print_problems(problems)
    if not rows:
        say(
            safe_text(
                f"no servers configured (kxen mcp add, or kxen mcp import FILE; files: {', '.join(config.files[1:])})"
            )
        )
        return EXIT_OK
    table(
        "MCP servers (from config; nothing started)",
        ["name", "scope", "transport", "command or URL", "enabled"],
        [[r["name"], r["scope"], r["transport"], _launch_text(r), _enabled_text(r)] for r in rows],
    )
    for r in rows:
        if r["note"]:
            say(safe_text(f"{r['name']} ({r['scope']}): {r['note']}"))
    return EXIT_OK


def _launch_text(row: dict[str, Any]) -> str:
    if row["url"]:
        return row["url"]
    if row["command"] is None:
        return ""
    return shlex.join([row["command"], *row["args"]])


def _enabled_text(row: dict[str, Any]) -> str:
    return "" if row["enabled"] is None else ("yes" if row["enabled"] else "no")


def _get(args: argparse.Namespace) -> int:
    config = _load(args)
    entries = [(s, extra) for s, extra in _entries(config) if s.name == args.name]
    if args.scope:
        entries = [(s, extra) for s, extra in entries if s.scope == args.scope]
    elif len(entries) > 1:  # the one in force: the project entry replaces the user's
        entries = [(s, extra) for s, extra in entries if s.scope == "project"]
    if not entries:
        say(
            safe_text(
                f"kxen: error: no server named {args.name!r}"
                + (f" in {args.scope} config" if args.scope else "")
                + " is configured"
            ),
            err=True,
        )
        return EXIT_USAGE
    server, extra = entries[0]
    others = [
        {"scope": s.scope, "source": s.source} for s in [*config.user_servers.values(), *config.servers.values()]
        if s.name == server.name and s.scope != server.scope
    ]  # fmt: skip
    shown = {**describe(server), **extra, "alsoIn": others[:1], "note": _note(server, extra)}
    if args.json:
        print_json(shown)
        return EXIT_OK
    for key, value in shown.items():
        if value in (None, [], {}, False) and key not in ("enabled",):
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        say(f"{key}: {safe_text(text)}")
    return EXIT_OK


# --- add, add-json, remove --------------------------------------------------------------------


def _add(args: argparse.Namespace) -> int:
    made = entry_from(args)
    if isinstance(made, int):
        return made
    entry, opts = made
    return _write_entry(args, opts.scope, entry, opts.json)


def _add_json(args: argparse.Namespace) -> int:
    try:
        entry = json.loads(args.entry)
    except RecursionError:
        return _usage("JSON: nested too deeply")
    except ValueError as exc:
        return _usage(f"JSON is not valid: {exc}")
    if not isinstance(entry, dict):
        return _usage("JSON must be an object: one server entry, as in mcp.json")
    return _write_entry(args, args.scope, entry, args.json)


def _write_entry(args: argparse.Namespace, scope: str, entry: dict[str, Any], as_json: bool) -> int:
    home, workspace = where(args)
    pm = plugin_manager()
    path = add_server(home, workspace, scope, args.name, entry, pm=pm)  # raises ConfigError
    warnings = unset_warnings(check_document({"mcpServers": {args.name: entry}}, path, scope, home=home, pm=pm)[0])
    if as_json:
        print_json({"ok": True, "name": args.name, "scope": scope, "file": str(path), "warnings": warnings})
        return EXIT_OK
    say(safe_text(f"added server {args.name!r} to {path} ({scope} config)"))
    for warning in warnings:
        say(f"warning: {safe_text(warning)}", err=True)
    if scope == "project":
        say(
            "project servers start only in a trusted workspace (kxen trust), stdio ones once their launch is "
            "approved (kxen mcp approvals)"
        )
    return EXIT_OK


def _remove(args: argparse.Namespace) -> int:
    home, workspace = where(args)
    scope = args.scope
    if scope is None:
        found = []
        for s in SCOPES:
            try:
                if args.name in read_document(servers_file(home, workspace, s), s)["mcpServers"]:
                    found.append(s)
            except ConfigError:
                continue  # an unreadable file: named below if the server is nowhere else
        if len(found) > 1:
            return _usage(f"{args.name!r} is in both user and project config: give --scope user or --scope project")
        scope = found[0] if found else "user"
    path = remove_server(home, workspace, scope, args.name, pm=plugin_manager())  # raises ConfigError
    if args.json:
        print_json({"ok": True, "name": args.name, "scope": scope, "file": str(path)})
    else:
        say(safe_text(f"removed server {args.name!r} from {path} ({scope} config)"))
    return EXIT_OK


def _usage(message: str) -> int:
    say(f"kxen: error: {safe_text(message)}", err=True)
    return EXIT_USAGE


def _import(args: argparse.Namespace) -> int:
    from kxen_core.cli.imports import run_import

    home, workspace = where(args)
    return run_import(args, home, workspace, plugin_manager())


__all__ = ["COMMANDS", "add_commands", "run"]

"""The ``kxen`` command: thin -- parse, call the Runtime, print text or ``--json``.

Exit codes: 0 success, 1 a server or call failed, 2 bad usage or invalid config.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

import anyio

from .config import load_config
from .errors import ConfigError, KxenError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_WAIT = 90.0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kxen", description="kxen: a strict, fast MCP host runtime.")
    p.add_argument("--home", type=Path, help="settings and user servers (default $KXEN_HOME or ~/.kxen)")
    p.add_argument("--workspace", type=Path, help="the workspace (default: the current directory)")
    p.add_argument(
        "--approve",
        action="append",
        default=[],
        metavar="FINGERPRINT",
        help="approve exactly this project server launch or tool call for this process (repeatable)",
    )
    p.add_argument("--role", help="the acting role (its permissions come from user settings)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    mcp = sub.add_parser("mcp", help="MCP servers: status, tools, calls").add_subparsers(
        dest="mcp_command", required=True, metavar="SUBCOMMAND"
    )
    status = mcp.add_parser("status", help="connect every server and show its state")
    approvals = mcp.add_parser("approvals", help="project server launches that need approval (starts nothing)")
    approvals.add_argument("--json", action="store_true")
    tools = mcp.add_parser("tools", help="list the tools the model sees")
    tools.add_argument("server", nargs="?", help="only this server")
    call = mcp.add_parser("call", help="call one tool and print its result")
    call.add_argument("server")
    call.add_argument("tool")
    call.add_argument("--args", default="{}", help="the tool arguments as a JSON object")
    call.add_argument("--timeout", type=float, help="seconds to wait for the result")
    for sp in (status, tools, call):
        sp.add_argument("--json", action="store_true", help="print JSON for scripts")
        sp.add_argument("--wait", type=float, default=DEFAULT_WAIT, help="seconds to wait for servers to settle")

    for verb, text in (("trust", "trust a workspace: its project servers may load"), ("untrust", "stop trusting a workspace")):
        tp = sub.add_parser(verb, help=text)
        tp.add_argument("path", nargs="?", type=Path, help="the workspace (default: --workspace or the current directory)")
    remote = sub.add_parser("remote", help="turn remote MCP (http, sse servers) on or off in user settings")
    remote.add_argument("switch", choices=["on", "off"])
    plugins = sub.add_parser("plugins", help="loaded plugins and load failures")
    plugins.add_argument("--json", action="store_true")
    config = sub.add_parser("config", help="configuration").add_subparsers(dest="config_command", required=True)
    check = config.add_parser("check", help="validate every config file and list every problem")
    check.add_argument("--json", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "plugins":
            return _plugins(args)
        if args.command == "config":
            return _config_check(args)
        if args.command in ("trust", "untrust"):
            return _trust(args)
        if args.command == "remote":
            return _remote(args)
        if args.command == "mcp" and args.mcp_command == "approvals":
            return _approvals(args)
        return anyio.run(_mcp, args)
    except ConfigError as exc:
        if getattr(args, "json", False):
            _print_json({"ok": False, "problems": exc.problems})
        else:
            print(f"kxen: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for c in columns:
        table.add_column(c, overflow="fold")
    for row in rows:
        table.add_row(*["" if v is None else str(v) for v in row])
    Console(soft_wrap=False).print(table)


# --- kxen config check / kxen plugins ---------------------------------------------------------


def _config_check(args: argparse.Namespace) -> int:
    from .plugins import make_plugin_manager

    # kinds and their options are checked against the installed plugins
    config = load_config(args.home, args.workspace, pm=make_plugin_manager())  # raises ConfigError
    problems = list(config.project_problems)
    if args.json:
        _print_json(
            {"ok": not problems, "problems": problems, "files": list(config.files), "servers": sorted(config.servers)}
        )
    elif problems:
        _print_problems(problems)
    else:
        print(f"OK: {len(config.servers)} server(s) in {', '.join(config.files)}")
    return EXIT_USAGE if problems else EXIT_OK


def _trust(args: argparse.Namespace) -> int:
    from .config.loader import default_home
    from .config.trust import trust, untrust

    path = (args.path or args.workspace or Path.cwd()).resolve()
    changed = (trust if args.command == "trust" else untrust)(args.home or default_home(), path)
    verb = "trusted" if args.command == "trust" else "not trusted"
    print(f"{path}: {verb}" + ("" if changed else " (unchanged)"))
    return EXIT_OK


def _remote(args: argparse.Namespace) -> int:
    # the user typing this is the decision: no further approval is asked
    from .config.loader import default_home
    from .config.trust import set_remote_enabled

    set_remote_enabled(args.home or default_home(), args.switch == "on")
    print(f"remote MCP is {args.switch}")
    return EXIT_OK


def _approvals(args: argparse.Namespace) -> int:
    from .runtime import Runtime

    rt = Runtime(home=args.home, workspace=args.workspace, approve=args.approve)
    config = rt.load()  # nothing starts
    rows = []
    for server, launch, error in rt.pending_launches():
        rows.append(
            {
                "server": server.name,
                "kind": "stdio_launch",
                "scope": server.scope,
                "held": launch.held if launch else None,
                "transport": server.kind,
                "source": server.source,
                "trusted": config.trusted,
                "approved": bool(launch and rt.approvals.is_approved(launch.fingerprint)),
                "fingerprint": launch.fingerprint if launch else None,
                "launch": launch.display() if launch else None,
                "error": error,
            }
        )
    problems = list(config.project_problems)
    if args.json:
        _print_json({"approvals": rows, "problems": problems})
    else:
        _print_problems(problems)
        if not rows and not problems:
            print("no project servers to approve in this workspace")
        for r in rows:
            state = "approved" if r["approved"] else "needs approval"
            if not r["trusted"]:
                state += " (workspace not trusted: kxen trust)"
            print(f"{r['server']}: {state}")
            if r["held"]:
                print(f"  held: {r['held']}")
            if r["error"]:
                print(f"  error: {r['error']}")
            else:
                print(f"  fingerprint: {r['fingerprint']}")
                print("  launch: " + json.dumps(r["launch"], indent=2).replace("\n", "\n  "))
    return EXIT_OK


def _plugins(args: argparse.Namespace) -> int:
    from .plugins import make_plugin_manager

    pm = make_plugin_manager()
    plugins: list[dict[str, Any]] = [
        {
            "name": p.name,
            "dist": p.dist,
            "version": p.version,
            "source": p.source,
            "hooks": list(p.hooks),
            "transports": list(p.transports),
        }
        for p in pm.infos()
    ]
    failures = [{"dist": f.dist, "entryPoint": f.entry_point, "error": f.error} for f in pm.failures if not f.skipped]
    skipped = [{"dist": f.dist, "entryPoint": f.entry_point} for f in pm.failures if f.skipped]
    if args.json:
        _print_json({"plugins": plugins, "failures": failures, "skipped": skipped})
    else:
        _table(
            "plugins",
            ["name", "dist", "version", "source", "transports", "hooks"],
            [
                [p["name"], p["dist"], p["version"], p["source"], ", ".join(p["transports"]), ", ".join(p["hooks"])]
                for p in plugins
            ],
        )
        for f in failures:
            print(f"failed to load {f['dist']}[{f['entryPoint']}]: {f['error']}", file=sys.stderr)
    return EXIT_FAILED if failures else EXIT_OK


# --- kxen mcp ... -----------------------------------------------------------------------------


async def _mcp(args: argparse.Namespace) -> int:
    from .runtime import Runtime

    only = None
    if args.mcp_command == "call" or (args.mcp_command == "tools" and args.server):
        only = {args.server}
    call_args: dict[str, Any] = {}
    if args.mcp_command == "call":
        try:
            call_args = json.loads(args.args)
        except ValueError as exc:
            print(f"kxen: error: --args is not valid JSON: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if not isinstance(call_args, dict):
            print("kxen: error: --args must be a JSON object", file=sys.stderr)
            return EXIT_USAGE

    async with Runtime(home=args.home, workspace=args.workspace, only=only, approve=args.approve, role=args.role) as rt:
        if only and not set(only) <= set(rt.servers):
            print(f"kxen: error: no server named {args.server!r} is configured", file=sys.stderr)
            return EXIT_USAGE
        await rt.wait_ready(args.wait)
        if args.mcp_command == "status":
            return _status(rt, args)
        if args.mcp_command == "tools":
            return _tools(rt, args)
        return await _call(rt, args, call_args)


def _status(rt: Any, args: argparse.Namespace) -> int:
    servers = rt.status()
    if args.json:
        _print_json({"servers": servers, "problems": rt.problems})
    else:
        _print_problems(rt.problems)
        _table(
            "MCP servers",
            ["name", "scope", "transport", "state", "tools", "resources", "prompts"],
            [
                [s["name"], s["scope"], s["transport"], s["state"], s["tools"], s["resources"], s["prompts"]]
                for s in servers
            ],
        )
        for s in servers:
            if s["error"]:
                where = f" ({s['phase']})" if s["phase"] else ""
                print(f"{s['name']}{where}: {s['error']}")
            if s["note"]:
                print(f"{s['name']}: {s['note']}")
    return EXIT_FAILED if any(s["state"] == "failed" for s in servers) else EXIT_OK


def _print_problems(problems: list[str]) -> None:
    if problems:
        print("kxen: the project config was rejected (none of its servers will start):", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)


def _tools(rt: Any, args: argparse.Namespace) -> int:
    tools = rt.tools(args.server)
    if args.json:
        _print_json({"tools": tools})
    else:
        _table(
            "tools",
            ["qualified name", "description"],
            [[t["qualifiedName"], (t["description"] or "").strip().split("\n")[0][:100]] for t in tools],
        )
    failed = [s for s in rt.status() if s["state"] == "failed"]
    for s in failed:
        print(f"kxen: server {s['name']!r} failed ({s['phase']}): {s['error']}", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


async def _call(rt: Any, args: argparse.Namespace, call_args: dict[str, Any]) -> int:
    from .agent_tools import result_text

    try:
        result = await rt.call_tool(args.tool, call_args, server=args.server, timeout=args.timeout)
    except KxenError as exc:
        if args.json:
            _print_json({"error": {"type": type(exc).__name__, "message": str(exc)}})
        else:
            print(f"kxen: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        _print_json(result)
    else:
        print(result_text(result))
    return EXIT_FAILED if result.get("isError") is True else EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

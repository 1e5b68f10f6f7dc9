"""The ``kxen`` command: thin -- parse, call the Runtime, print text or ``--json``.

Exit codes: 0 success, 1 a server or call failed, 2 bad usage or invalid config, 128+N after signal N.

Signals: while ``kxen mcp ...`` runs, SIGINT, SIGTERM and SIGHUP (a closed terminal) all do what
Ctrl-C does: the command is cancelled, every server is closed with the usual bounds (its whole
process group and its descendants; on Linux kxen is a child subreaper while it runs, so orphans
that double-forked away are ended too, see :mod:`.procs`), and kxen exits with 128 plus
the signal number (130, 143, 129). A second signal during that close is absorbed: the close is
bounded anyway.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any, Sequence

import anyio

from .config import load_config
from .errors import ConfigError, KxenError
from .safe_text import Secrets, config_secrets, json_text, safe_text

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_WAIT = 90.0


def _path(text: str) -> Path:
    """A path option: a usage error (exit 2), not a traceback, when it holds a NUL byte or cannot
    be resolved (a symlink loop)."""
    try:
        Path(text).resolve()
    except (OSError, RuntimeError, ValueError):
        raise argparse.ArgumentTypeError(f"cannot be resolved (a symlink loop or a NUL byte): {text!r}") from None
    return Path(text)


def _seconds(text: str) -> float:
    """Seconds: a finite number >= 0 ("nan", "inf" and negatives are usage errors)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= 86400 * 365:
        raise argparse.ArgumentTypeError(f"must be a number of seconds from 0 to 31536000: {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kxen", description="kxen: a strict, fast MCP host runtime.")
    p.add_argument("--home", type=_path, help="settings and user servers (default $KXEN_HOME or ~/.kxen)")
    p.add_argument("--workspace", type=_path, help="the workspace (default: the current directory)")
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
    call.add_argument("--timeout", type=_seconds, help="seconds to wait for the result")
    for sp in (status, tools, call):
        sp.add_argument("--json", action="store_true", help="print JSON for scripts")
        sp.add_argument("--wait", type=_seconds, default=DEFAULT_WAIT, help="seconds to wait for servers to settle")

    for verb, text in (("trust", "trust a workspace: its project servers may load"), ("untrust", "stop trusting a workspace")):
        tp = sub.add_parser(verb, help=text)
        tp.add_argument("path", nargs="?", type=_path, help="the workspace (default: --workspace or the current directory)")
    remote = sub.add_parser("remote", help="turn remote MCP (http, sse servers) on or off in user settings")
    remote.add_argument("switch", choices=["on", "off"])
    plugins = sub.add_parser("plugins", help="loaded plugins and load failures")
    plugins.add_argument("--json", action="store_true")
    config = sub.add_parser("config", help="configuration").add_subparsers(dest="config_command", required=True)
    check = config.add_parser("check", help="validate every config file and list every problem")
    check.add_argument("--json", action="store_true")
    return p


#: what the loaded config says must never be printed; scrubbed from all output (see _use_config)
_secrets = Secrets()


def _use_config(config: Any) -> None:
    """Scrub the secrets of ``config`` (user and project entries) from everything printed from now on."""
    global _secrets
    _secrets = config_secrets([*config.servers.values(), *config.user_servers.values()])


def main(argv: Sequence[str] | None = None) -> int:
    global _secrets
    _secrets = Secrets()
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
        return anyio.run(_mcp_until_signal, args)
    except ConfigError as exc:
        if getattr(args, "json", False):
            _print_json({"ok": False, "problems": exc.problems})
        else:
            _say(f"kxen: {safe_text(exc, multiline=True)}", err=True)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


def _print_json(data: Any) -> None:
    """Strict JSON, safe on a terminal (non-finite numbers as strings: see :mod:`.safe_text`)."""
    _say(json_text(_secrets.data(data)))


def _say(text: str, *, err: bool = False) -> None:
    """Print one line. ``text`` must already be safe (:func:`safe_text`); a terminal whose encoding
    cannot show a character gets a backslash escape instead of a crash."""
    stream = sys.stderr if err else sys.stdout
    text = _secrets.text(text)
    try:
        stream.write(text + "\n")
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write((text + "\n").encode(encoding, "backslashreplace").decode(encoding))
    stream.flush()


def _table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """A rich table; every cell is a ``Text`` of :func:`safe_text` (never markup)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title), title_justify="left")
    for c in columns:
        table.add_column(Text(c), overflow="fold")
    for row in rows:
        table.add_row(*[Text(_secrets.text(safe_text(v))) for v in row])
    console = Console(soft_wrap=False, markup=False, emoji=False, highlight=False)
    try:
        console.print(table)
    except UnicodeEncodeError:
        # a terminal that cannot show some character: the same table in ASCII with escapes
        for row in rows:
            _say("  ".join(safe_text(v).encode("ascii", "backslashreplace").decode("ascii") for v in row))  # scrubbed by _say


# --- kxen config check / kxen plugins ---------------------------------------------------------


def _config_check(args: argparse.Namespace) -> int:
    from .plugins import make_plugin_manager

    # kinds and their options are checked against the installed plugins
    config = load_config(args.home, args.workspace, pm=make_plugin_manager())  # raises ConfigError
    _use_config(config)
    problems = list(config.project_problems)
    if args.json:
        _print_json(
            {"ok": not problems, "problems": problems, "files": list(config.files), "servers": sorted(config.servers)}
        )
    elif problems:
        _print_problems(problems)
    else:
        _say(safe_text(f"OK: {len(config.servers)} server(s) in {', '.join(config.files)}"))
    return EXIT_USAGE if problems else EXIT_OK


def _trust(args: argparse.Namespace) -> int:
    from .config.loader import default_home
    from .config.trust import trust, untrust

    path = (args.path or args.workspace or Path.cwd()).resolve()
    changed = (trust if args.command == "trust" else untrust)(args.home or default_home(), path)
    verb = "trusted" if args.command == "trust" else "not trusted"
    _say(safe_text(f"{path}: {verb}" + ("" if changed else " (unchanged)")))
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
    _use_config(config)
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
            _say("no project servers to approve in this workspace")
        for r in rows:
            state = "approved" if r["approved"] else "needs approval"
            if not r["trusted"]:
                state += " (workspace not trusted: kxen trust)"
            _say(f"{safe_text(r['server'])}: {state}")
            if r["held"]:
                _say(f"  held: {safe_text(r['held'])}")
            if r["error"]:
                _say(f"  error: {safe_text(r['error'])}")
            else:
                _say(f"  fingerprint: {safe_text(r['fingerprint'])}")
                _say("  launch: " + json_text(r["launch"]).replace("\n", "\n  "))
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
            _say(safe_text(f"failed to load {f['dist']}[{f['entryPoint']}]: {f['error']}"), err=True)
    return EXIT_FAILED if failures else EXIT_OK


# --- kxen mcp ... -----------------------------------------------------------------------------


#: the signals that end ``kxen mcp ...`` cleanly (those this platform has)
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


async def _mcp_until_signal(args: argparse.Namespace) -> int:
    """:func:`_mcp`, cancelled by SIGINT, SIGTERM or SIGHUP; then 128 + the signal number.

    The receiver stays installed until every server is closed, so a repeated signal cannot kill
    kxen in the middle of its (shielded, bounded) close."""
    from . import procs

    received: list[int] = []
    # orphans of our servers' descendants (double-forked daemons) are adopted by kxen, not init,
    # and ended once every server is closed (Linux; best effort)
    subreaper = not procs.is_subreaper() and procs.become_subreaper()
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        # servers a crashed kxen left running (pid, start time and command still matching) end
        # first; this process records its own servers until they are stopped
        from .config.loader import default_home

        home = args.home or default_home()
        with anyio.CancelScope(shield=True):
            await procs.end_leftovers(home)
        procs.open_ledger(home)
        try:
            async with anyio.create_task_group() as tg:
                work = anyio.CancelScope()

                async def watch() -> None:
                    async for signum in signals:
                        received.append(int(signum))
                        work.cancel()

                tg.start_soon(watch)
                code, error = EXIT_FAILED, None  # type: int, Exception | None
                with work:
                    try:
                        code = await _mcp(args)
                    except Exception as exc:  # raised as itself below, not in a task group's ExceptionGroup
                        error = exc
                tg.cancel_scope.cancel()
        finally:
            if subreaper:
                with anyio.CancelScope(shield=True):
                    await procs.end_adopted()
                procs.stop_subreaper()
            procs.close_ledger()
    if error is not None and not received:
        raise error
    if received:
        # kxen exits now: a signal still coming must not turn 128+N into death by signal
        for signum in STOP_SIGNALS:
            try:
                signal.signal(signum, signal.SIG_IGN)
            except (ValueError, OSError):  # not the main thread: nothing to protect
                pass
        return 128 + received[0]
    return code


async def _mcp(args: argparse.Namespace) -> int:
    from .converter import SURROGATE_RULE, lone_surrogates
    from .errors import printable
    from .runtime import Runtime

    only = None
    if args.mcp_command == "call" or (args.mcp_command == "tools" and args.server):
        only = {args.server}
    call_args: dict[str, Any] = {}
    if args.mcp_command == "call":
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

    async with Runtime(home=args.home, workspace=args.workspace, only=only, approve=args.approve, role=args.role) as rt:
        if only and not set(only) <= set(rt.servers):
            _say(f"kxen: error: no server named {safe_text(repr(args.server))} is configured", err=True)
            return EXIT_USAGE
        assert rt.config is not None
        _use_config(rt.config)
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
                _say(safe_text(f"{s['name']}{where}: {s['error']}"))
            if s["note"]:
                _say(safe_text(f"{s['name']}: {s['note']}"))
    return EXIT_FAILED if any(s["state"] == "failed" for s in servers) else EXIT_OK


def _print_problems(problems: list[str]) -> None:
    if problems:
        _say("kxen: the project config was rejected (none of its servers will start):", err=True)
        for p in problems:
            _say(f"  - {safe_text(p)}", err=True)


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
        _say(safe_text(f"kxen: server {s['name']!r} failed ({s['phase']}): {s['error']}"), err=True)
    return EXIT_FAILED if failed else EXIT_OK


async def _call(rt: Any, args: argparse.Namespace, call_args: dict[str, Any]) -> int:
    from .agent_tools import result_text

    try:
        result = await rt.call_tool(args.tool, call_args, server=args.server, timeout=args.timeout)
    except KxenError as exc:
        if args.json:
            _print_json({"error": {"type": type(exc).__name__, "message": str(exc)}})
        else:
            _say(f"kxen: error: {safe_text(exc)}", err=True)
        return EXIT_FAILED
    if args.json:
        _print_json(result)
    else:
        _say(safe_text(result_text(result), multiline=True))
    return EXIT_FAILED if result.get("isError") is True else EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

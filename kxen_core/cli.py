"""The ``kxen`` command: thin -- parse, call the Runtime, print text or ``--json``.

Exit codes: 0 success, 1 a server or call failed, 2 bad usage or invalid config, 128+N after signal N.

Signals: while ``kxen mcp ...`` runs, SIGINT, SIGTERM, SIGHUP (a closed terminal) and every other
catchable signal whose default would end the process (SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM...) do what
Ctrl-C does: the command is cancelled, every server is closed with the usual bounds (its whole
process group and its descendants; on Linux kxen is a child subreaper while it runs, so orphans
that double-forked away are ended too, see :mod:`.host`), and kxen exits with 128 plus
the signal number (130, 143, 129). A second signal during that close is absorbed: the close is
bounded anyway.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from . import cli_commands as commands
from . import cli_contents as contents
from . import cli_login as login
from . import cli_manage as manage
from . import cli_output as output
from . import cli_setup as setup
from . import cli_status
from .cli_output import print_json, say, table, use_config
from .cli_wait import wait_visibly
from .errors import ConfigError
from .safe_text import safe_text

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


def _fingerprint(text: str) -> str:
    """``--approve``: a fingerprint (64 hex characters) or a prefix of at least 12."""
    value = text.strip().lower()
    if not (12 <= len(value) <= 64) or any(c not in "0123456789abcdef" for c in value):
        raise argparse.ArgumentTypeError(
            f"not a fingerprint: {text[:80]!r} (the 64 hex characters kxen printed, or at least the first 12)"
        )
    return value


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
    p = argparse.ArgumentParser(
        prog="kxen",
        description="kxen: a strict, fast MCP host runtime.",
        epilog="Global options (--home, --workspace, --approve, --role, -v, --log-file) may stand anywhere on the line.",
    )
    setup.add_global_options(p)
    p.add_argument("--home", type=setup.existing_home, help="settings and user servers (default $KXEN_HOME or ~/.kxen)")
    p.add_argument("--workspace", type=_path, help="the workspace (default: the current directory)")
    p.add_argument(
        "--approve",
        action="append",
        default=[],
        metavar="FINGERPRINT",
        type=_fingerprint,
        help="approve exactly this project server launch or tool call for this process (repeatable; "
        "the fingerprint kxen printed, or at least its first 12 characters)",
    )
    p.add_argument("--role", help="the acting role (its permissions come from user settings)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    mcp = sub.add_parser("mcp", help="MCP servers: status, tools, calls").add_subparsers(
        dest="mcp_command", required=True, metavar="SUBCOMMAND"
    )
    status = mcp.add_parser("status", help="connect every server and show its state")
    approvals = mcp.add_parser("approvals", help="project server launches that need approval (starts nothing)")
    approvals.add_argument("--json", action="store_true")
    plan = mcp.add_parser("plan", help="what would start and why not, with fingerprints (starts and contacts nothing)")
    plan.add_argument("--json", action="store_true")
    tools = mcp.add_parser("tools", help="list the tools the model sees")
    tools.add_argument("server", nargs="?", help="only this server")
    call = mcp.add_parser("call", help="call one tool and print its result")
    call.add_argument("server")
    call.add_argument("tool")
    call.add_argument("--args", default="{}", help="the tool arguments as a JSON object")
    call.add_argument("--timeout", type=_seconds, help="seconds to wait for the result")
    doctor = mcp.add_parser(
        "doctor", help="start one server and check each step: gate, transport, auth, initialize, tools, a call"
    )
    doctor.add_argument("server")
    doctor.add_argument("--call", metavar="TOOL", help="also call this tool (through policy and approval) and time it")
    doctor.add_argument("--args", default="{}", help="the arguments of --call as a JSON object")
    doctor.add_argument("--timeout", type=_seconds, help="seconds to wait for the call's result")

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--json", action="store_true", help="print JSON for scripts")
        sp.add_argument("--wait", type=_seconds, default=DEFAULT_WAIT, help="seconds to wait for servers to settle")

    for sp in (status, tools, call, doctor):
        common(sp)
    doctor.set_defaults(wait=30.0)
    contents.add_commands(mcp, common)
    manage.add_commands(mcp)
    login.add_commands(mcp, _seconds)

    for verb, text in (
        ("trust", "trust a workspace: its project servers may load"),
        ("untrust", "stop trusting a workspace"),
    ):
        tp = sub.add_parser(verb, help=text)
        tp.add_argument(
            "path", nargs="?", type=_path, help="the workspace (default: --workspace or the current directory)"
        )
    remote = sub.add_parser("remote", help="turn remote MCP (http, sse servers) on or off in user settings")
    remote.add_argument("switch", choices=["on", "off"])
    plugins = sub.add_parser("plugins", help="loaded plugins and load failures")
    plugins.add_argument("--json", action="store_true")
    config = sub.add_parser("config", help="configuration").add_subparsers(dest="config_command", required=True)
    check = config.add_parser("check", help="validate every config file and list every problem")
    check.add_argument("--json", action="store_true")
    completion = sub.add_parser("completion", help='print a shell completion script (eval "$(kxen completion bash)")')
    completion.add_argument("shell", choices=["bash", "zsh"])
    return p


def main(argv: Sequence[str] | None = None) -> int:
    output.reset()
    setup.reset_logging()
    args = _parser().parse_args(setup.hoist_globals(sys.argv[1:] if argv is None else argv))
    problem = setup.configure_logging(args.verbose, args.log_file)
    if problem:
        say(f"kxen: warning: {safe_text(problem)}", err=True)
    try:
        if args.command == "plugins":
            return commands.plugins(args)
        if args.command == "completion":
            from .cli_completion import script

            sys.stdout.write(script(_parser(), args.shell))
            return EXIT_OK
        if args.command == "config":
            return commands.config_check(args)
        if args.command in ("trust", "untrust"):
            return commands.trust(args)
        if args.command == "remote":
            return commands.remote(args)
        if args.command == "mcp" and args.mcp_command == "approvals":
            return commands.approvals(args)
        if args.command == "mcp" and args.mcp_command == "plan":
            return commands.plan(args)
        if args.command == "mcp" and args.mcp_command in manage.COMMANDS:
            return manage.run(args)
        return anyio.run(_mcp_until_signal, args)
    except ConfigError as exc:
        if getattr(args, "json", False):
            print_json({"ok": False, "problems": exc.problems})
        else:
            say(f"kxen: {safe_text(exc, multiline=True)}", err=True)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    finally:
        setup.reset_logging()


# --- kxen mcp ... -----------------------------------------------------------------------------


#: the signals that end ``kxen mcp ...`` cleanly (those this platform has)
#: every catchable signal whose default action ends the process: each closes the servers first
#: (SIGKILL cannot be caught: what it leaves is ended at the next start, see kxen_core.host)
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
    (:func:`kxen_core.host.host_guard`): the stdio transport's ends what a crashed kxen left running,
    records this process's servers, and adopts and ends the orphans of double-forking servers."""
    from .config.loader import default_home
    from .errors import printable
    from .host import host_guard
    from .plugins import make_plugin_manager

    received: list[int] = []
    code, error = EXIT_FAILED, None  # type: int, Exception | None
    home = args.home or default_home()
    args.pm = make_plugin_manager()
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with host_guard(args.pm, home, subreaper=True) as problems:
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
    from .converter import SURROGATE_RULE, lone_surrogates
    from .errors import printable
    from .runtime import Runtime

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
    async with Runtime(
        home=args.home, workspace=args.workspace, pm=pm, only=only, approve=args.approve, role=args.role
    ) as rt:
        if only and not set(only) <= set(rt.servers):
            say(f"kxen: error: no server named {safe_text(repr(args.server))} is configured", err=True)
            return EXIT_USAGE
        assert rt.config is not None
        use_config(rt.config)
        if args.mcp_command in login.COMMANDS:  # no waiting first: the server may well need the sign-in
            return await login.run(rt, args)
        await wait_visibly(rt, args.wait)
        if args.mcp_command == "status":
            return cli_status.status(rt, args)
        if args.mcp_command == "tools":
            return await _tools(rt, args)
        if args.mcp_command == "doctor":
            from .cli_doctor import doctor

            return await doctor(rt, args, call_args)
        if args.mcp_command in ("resources", "templates", "prompts"):
            return getattr(contents, args.mcp_command)(rt, args)
        if args.mcp_command == "read":
            return await contents.read(rt, args)
        if args.mcp_command == "get-prompt":
            return await contents.get_prompt(rt, args, call_args)
        return await contents.call(rt, args, call_args)


async def _tools(rt: Any, args: argparse.Namespace) -> int:
    tools = rt.tools(args.server)
    for t in tools:  # what a call would meet: allow, ask (an approval) or deny
        if t["server"] is None:
            t["policy"] = "allow"  # kxen's read-only tools (toolPolicies can deny them: docs/config.md)
        else:
            t["policy"], t["policyReasons"] = await rt.tool_policy(t["server"], t["name"])
    if args.json:
        print_json({"tools": tools})
    else:
        table(
            "tools",
            ["model-facing name", "server", "tool", "policy", "description"],
            [
                [t["qualifiedName"], t["server"] or "(kxen)", t["name"], t["policy"], _first_line(t.get("description"))]
                for t in tools
            ],
        )
        if any(t["policy"] == "ask" for t in tools):
            say(
                "tools whose policy is 'ask' need an approval for each call (a terminal asks; else kxen --approve, or toolPolicies)"
            )
    failed = [s for s in rt.status() if s["state"] == "failed"]
    for s in failed:
        say(safe_text(f"kxen: server {s['name']!r} failed ({s['phase']}): {s['error']}"), err=True)
    return EXIT_FAILED if failed else EXIT_OK


def _first_line(text: Any) -> str:
    """The first line of a description, at most 100 characters; a cut says so with an ellipsis."""
    lines = (text if isinstance(text, str) else "").strip().split("\n")
    first = lines[0]
    if len(first) > 100:
        return first[:99] + "…"
    return first + (" …" if len(lines) > 1 and any(line.strip() for line in lines[1:]) else "")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

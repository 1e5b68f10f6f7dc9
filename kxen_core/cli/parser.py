"""The ``kxen`` command line: every command, its options and their types.

An option's value is checked by its type (a path that can be resolved, a fingerprint, a number of
seconds): a bad one is a usage error (exit 2) naming the option, never a traceback.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from kxen_core.cli import audit, change, contents, login, manage, pins, setup
from kxen_core.cli import tasks as cli_tasks

if TYPE_CHECKING:
    from kxen_core.commands import Command

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


#: the commands of the core (a word after ``kxen`` that is not one of them may be a plugin's)
CORE_COMMANDS = frozenset({"mcp", "trust", "untrust", "remote", "plugins", "config", "completion"})


def _parser(extra: Mapping[str, Command] | None = None) -> argparse.ArgumentParser:
    """The command line; ``extra``: the commands plugins added (``kxen_register_commands``)."""
    p = argparse.ArgumentParser(
        prog="kxen",
        description="kxen: a strict, fast MCP host runtime.",
        epilog="Global options (--home, --workspace, --approve, --role, -v, --log-file) may stand anywhere on "
        "the line.",
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
    tools.add_argument(
        "--all", action="store_true", help="also the tools the model is not shown (filtered or denied), with why"
    )
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
    cli_tasks.add_command(mcp, common)
    manage.add_commands(mcp)
    change.add_commands(mcp)
    pins.add_commands(mcp)
    login.add_commands(mcp, _seconds)
    audit.add_command(mcp)

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
    remote.add_argument(
        "--yes",
        action="store_true",
        help="confirm, without a terminal, that you know each listed remote server's operator, data retention "
        "and access scope",
    )
    plugins = sub.add_parser("plugins", help="loaded plugins and load failures")
    plugins.add_argument("--json", action="store_true")
    config = sub.add_parser("config", help="configuration").add_subparsers(dest="config_command", required=True)
    check = config.add_parser("check", help="validate every config file and list every problem")
    check.add_argument("--json", action="store_true")
    change.add_config_set(config)
    completion = sub.add_parser("completion", help='print a shell completion script (eval "$(kxen completion bash)")')
    completion.add_argument("shell", choices=["bash", "zsh"])
    for name, command in (extra or {}).items():
        command.configure(sub.add_parser(name, help=command.help))
    return p


__all__ = ["CORE_COMMANDS", "DEFAULT_WAIT"]

"""The ``kxen`` command: thin -- parse, call the Runtime, print text or ``--json``.

Exit codes: 0 success, 1 a server or call failed, 2 bad usage or invalid config, 128+N after signal N.

Signals: while ``kxen mcp ...`` runs (:mod:`.mcp`), SIGINT, SIGTERM, SIGHUP and every other catchable
signal whose default would end the process close every server and kxen exits with 128 plus the
signal number (130, 143, 129). The command line itself is in :mod:`.parser`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio

from kxen_core.cli import change, commands, manage, output, pins, setup
from kxen_core.cli.mcp import STOP_SIGNALS, _mcp_until_signal
from kxen_core.cli.output import print_json, say
from kxen_core.cli.parser import CORE_COMMANDS, DEFAULT_WAIT, _parser
from kxen_core.cli.problems import config_files, problem_objects
from kxen_core.errors import ConfigError
from kxen_core.safe_text import safe_text

if TYPE_CHECKING:
    from kxen_core.commands import Command

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def main(argv: Sequence[str] | None = None) -> int:
    output.reset()
    setup.reset_logging()
    words = setup.hoist_globals(sys.argv[1:] if argv is None else argv)
    pm, extra = _plugin_commands(words)
    args = _parser(extra).parse_args(words)
    if args.command in extra:
        args.pm, args.plugin_command = pm, extra[args.command]
    problem = setup.configure_logging(args.verbose, args.log_file)
    if problem:
        say(f"kxen: warning: {safe_text(problem)}", err=True)
    try:
        if args.command == "plugins":
            return commands.plugins(args)
        if args.command == "completion":
            from kxen_core.cli.completion import script

            sys.stdout.write(script(_parser(), args.shell))
            return EXIT_OK
        if args.command == "config":
            return change.config_set(args) if args.config_command == "set" else commands.config_check(args)
        if args.command in ("trust", "untrust"):
            return commands.trust(args)
        if args.command == "remote":
            return commands.remote(args)
        if args.command == "mcp" and args.mcp_command == "approvals":
            return commands.approvals(args)
        if args.command == "mcp" and args.mcp_command == "plan":
            return commands.plan(args)
        if args.command == "mcp" and args.mcp_command == "audit":
            from kxen_core.cli import audit

            return audit.run(args)
        if args.command == "mcp" and args.mcp_command in manage.COMMANDS:
            return manage.run(args)
        if args.command == "mcp" and args.mcp_command in change.COMMANDS:
            return change.run(args)
        if args.command == "mcp" and args.mcp_command in pins.COMMANDS:
            return pins.run(args)
        return anyio.run(_mcp_until_signal, args)
    except ConfigError as exc:
        if getattr(args, "json", False):
            print_json({"ok": False, "problems": problem_objects(exc.problems, config_files(args))})
        else:
            say(f"kxen: {safe_text(exc, multiline=True)}", err=True)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    finally:
        setup.reset_logging()


#: the commands a plugin dist adds, and the dist (a hint when it is not installed)
PLUGIN_DISTS = {"settings": "kxen-settings-web (pip install 'kxen[settings]')"}


def _plugin_commands(words: list[str]) -> tuple[Any, dict[str, Command]]:
    """The plugins' commands, loaded only when the command word is not one of the core's."""
    word = setup.command_word(words)
    helping = word is None and any(w in ("-h", "--help") for w in words)  # kxen --help lists them too
    if (word is None and not helping) or word in CORE_COMMANDS:
        return None, {}
    from kxen_core.plugins.commands import plugin_commands
    from kxen_core.plugins.manager import make_plugin_manager

    pm = make_plugin_manager()
    extra, warnings = plugin_commands(pm, CORE_COMMANDS)
    for warning in warnings:
        say(f"kxen: warning: {safe_text(warning)}", err=True)
    if word is not None and word not in extra and word in PLUGIN_DISTS:
        say(f"kxen: error: kxen {word} is a plugin's command: install {PLUGIN_DISTS[word]}", err=True)
        raise SystemExit(EXIT_USAGE)
    return pm, extra


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


# what tests and embedders reach through this module
__all__ = ["DEFAULT_WAIT", "STOP_SIGNALS", "_mcp_until_signal", "_parser", "main"]

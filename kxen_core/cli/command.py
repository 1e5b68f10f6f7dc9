"""The ``kxen`` command: thin -- parse, call the Runtime, print text or ``--json``.

Exit codes: 0 success, 1 a server or call failed, 2 bad usage or invalid config, 128+N after signal N.

Signals: while ``kxen mcp ...`` runs (:mod:`.mcp`), SIGINT, SIGTERM, SIGHUP and every other catchable
signal whose default would end the process close every server and kxen exits with 128 plus the
signal number (130, 143, 129). The command line itself is in :mod:`.parser`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import anyio

from kxen_core.cli import change, commands, manage, output, setup
from kxen_core.cli.mcp import STOP_SIGNALS, _mcp_until_signal
from kxen_core.cli.output import print_json, say
from kxen_core.cli.parser import DEFAULT_WAIT, _parser
from kxen_core.cli.problems import config_files, problem_objects
from kxen_core.errors import ConfigError
from kxen_core.safe_text import safe_text

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


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
        if args.command == "mcp" and args.mcp_command in manage.COMMANDS:
            return manage.run(args)
        if args.command == "mcp" and args.mcp_command in change.COMMANDS:
            return change.run(args)
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


# what tests and embedders reach through this module
__all__ = ["DEFAULT_WAIT", "STOP_SIGNALS", "_mcp_until_signal", "_parser", "main"]

"""``kxen mcp policy | enable | disable`` and ``kxen config set``: one setting changed without
hand-editing a file.

Nothing here starts or contacts a server. Server entries change through
:mod:`kxen_core.config.edit`, user settings through :mod:`kxen_core.config.trust`: each change is
checked by the loader's own rules before it is saved, under the file's lock, written atomically;
a refused change leaves the file byte-identical (exit 2, every problem as ``file: key path: rule``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kxen_core.cli.output import print_json, say
from kxen_core.cli.problems import config_files, problem_objects
from kxen_core.errors import ConfigError
from kxen_core.safe_text import safe_text

EXIT_OK, EXIT_USAGE = 0, 2
COMMANDS = ("policy", "enable", "disable")
SCOPES = ("user", "project")
POLICIES = ("allow", "ask", "deny")

POLICY_EPILOG = """examples:
  kxen mcp policy github create_issue ask     ask before each call of this tool
  kxen mcp policy github delete_repo deny     never call it
  kxen mcp policy github --default allow      tools without their own policy run without asking
"""


def add_commands(mcp: Any) -> None:
    """Register ``policy``, ``enable`` and ``disable`` on the ``kxen mcp`` subparsers."""
    policy = mcp.add_parser(
        "policy",
        help="set a tool's policy (allow, ask, deny), or with --default the server's default",
        usage="kxen mcp policy SERVER TOOL allow|ask|deny [--scope S] [--json]\n"
        "       kxen mcp policy SERVER --default allow|ask|deny [--scope S] [--json]",
        epilog=POLICY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    policy.add_argument("server")
    policy.add_argument("words", nargs="+", metavar="TOOL POLICY", help="the server's own tool name and a policy")
    policy.add_argument("--default", action="store_true", help="set defaultToolPolicy (no TOOL)")
    for verb, text in (("enable", "let a configured server start again"), ("disable", "keep a server from starting")):
        sp = mcp.add_parser(verb, help=text)
        sp.add_argument("server")
    for sp in (policy, mcp.choices["enable"], mcp.choices["disable"]):
        sp.add_argument("--scope", choices=SCOPES, help="which file (needed when both have SERVER)")
        sp.add_argument("--json", action="store_true", help="print JSON for scripts")


def add_config_set(config: Any) -> None:
    """Register ``kxen config set KEY VALUE``."""
    from kxen_core.config.trust import settable_keys

    keys = settable_keys()
    sp = config.add_parser(
        "set",
        help="set one key of config.toml (checked before it is saved)",
        epilog="keys: " + ", ".join(sorted(keys)) + "\nexample:\n  kxen config set mcp.allow_loopback_http true",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sp.add_argument("key", metavar="KEY")
    sp.add_argument("value", metavar="VALUE")
    sp.add_argument("--json", action="store_true", help="print JSON for scripts")


def run(args: argparse.Namespace) -> int:
    """``kxen mcp policy|enable|disable``."""
    try:
        if args.mcp_command == "policy":
            return _policy(args)
        return _enabled(args)
    except ConfigError as exc:
        return refused(args, exc)


def refused(args: argparse.Namespace, exc: ConfigError) -> int:
    if getattr(args, "json", False):
        print_json({"ok": False, "problems": problem_objects(exc.problems, config_files(args))})
    else:
        say("kxen: not saved (no file was changed):", err=True)
        for problem in exc.problems:
            say(f"  - {safe_text(problem)}", err=True)
    return EXIT_USAGE


def where(args: argparse.Namespace) -> tuple[Path, Path]:
    from kxen_core.config.loader import default_home

    return Path(args.home or default_home()), Path(args.workspace or Path.cwd()).resolve()


def plugin_manager() -> Any:
    from kxen_core.plugins.manager import make_plugin_manager

    return make_plugin_manager()


def find_scope(home: Path, workspace: Path, name: str, scope: str | None) -> str | None:
    """``scope``, or the one file that has server ``name`` (user when neither has it, so the error
    names the user file); None when both have it."""
    from kxen_core.config.edit import read_document, servers_file

    if scope is not None:
        return scope
    found = []
    for s in SCOPES:
        try:
            if name in read_document(servers_file(home, workspace, s), s)["mcpServers"]:
                found.append(s)
        except ConfigError:
            continue  # an unreadable file: named by the write if the server is nowhere else
    if len(found) > 1:
        return None
    return found[0] if found else "user"


def _usage(message: str) -> int:
    say(f"kxen: error: {safe_text(message)}", err=True)
    return EXIT_USAGE


def _policy(args: argparse.Namespace) -> int:
    from kxen_core.config.edit import set_tool_policy

    words = list(args.words)
    if args.default:
        if len(words) != 1:
            return _usage("kxen mcp policy SERVER --default allow|ask|deny (a policy, no tool)")
        tool, policy = None, words[0]
    else:
        if len(words) != 2:
            return _usage("kxen mcp policy SERVER TOOL allow|ask|deny (or SERVER --default POLICY)")
        tool, policy = words
    if policy not in POLICIES:
        return _usage(f"the policy is one of allow, ask, deny (got {policy!r})")
    home, workspace = where(args)
    scope = find_scope(home, workspace, args.server, args.scope)
    if scope is None:
        return _usage(f"{args.server!r} is in both user and project config: give --scope user or --scope project")
    path, changed = set_tool_policy(home, workspace, scope, args.server, tool, policy, pm=plugin_manager())
    what = "defaultToolPolicy" if tool is None else f"toolPolicies.{tool}"
    return _done(args, path, scope, changed, f"{args.server}: {what} = {policy}", {"tool": tool, "policy": policy})


def _enabled(args: argparse.Namespace) -> int:
    from kxen_core.config.edit import set_enabled

    home, workspace = where(args)
    scope = find_scope(home, workspace, args.server, args.scope)
    if scope is None:
        return _usage(f"{args.server!r} is in both user and project config: give --scope user or --scope project")
    enabled = args.mcp_command == "enable"
    path, changed = set_enabled(home, workspace, scope, args.server, enabled, pm=plugin_manager())
    text = f"{args.server}: {'enabled' if enabled else 'disabled'}"
    return _done(args, path, scope, changed, text, {"enabled": enabled})


def _done(args: argparse.Namespace, path: Path, scope: str, changed: bool, text: str, extra: dict[str, Any]) -> int:
    if args.json:
        print_json({"ok": True, "name": args.server, "scope": scope, "file": str(path), "changed": changed, **extra})
    else:
        say(safe_text(f"{text} in {path} ({scope} config)" + ("" if changed else " (unchanged)")))
    return EXIT_OK


def config_set(args: argparse.Namespace) -> int:
    """``kxen config set KEY VALUE``."""
    from kxen_core.config.loader import default_home
    from kxen_core.config.trust import set_setting

    home = Path(args.home or default_home())
    try:
        changed = set_setting(home, args.key, args.value)
    except ConfigError as exc:
        return refused(args, exc)
    path = home / "config.toml"
    if args.json:
        print_json({"ok": True, "key": args.key, "file": str(path), "changed": changed})
    else:
        say(safe_text(f"{args.key} = {args.value} in {path}" + ("" if changed else " (unchanged)")))
    return EXIT_OK


__all__ = [
    "COMMANDS",
    "add_commands",
    "add_config_set",
    "config_set",
    "find_scope",
    "plugin_manager",
    "refused",
    "run",
    "where",
]

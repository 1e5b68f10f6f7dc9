"""``kxen mcp add``: the options and the entry they make (written by :mod:`.manage`).

The server's command starts at ``--`` or at the first word that is not an option; options may come
before and after NAME. ``--timeout``, ``--policy`` and ``--cwd`` fill the entry's ``timeouts``,
``defaultToolPolicy``/``toolPolicies`` and ``cwd``; every value is then checked by the loader's rules
when the file is written.
"""

from __future__ import annotations

import argparse
from typing import Any

from kxen_core.cli.output import say
from kxen_core.safe_text import safe_text

EXIT_USAGE = 2
SCOPES = ("user", "project")

ADD_USAGE = (
    "kxen mcp add NAME [--scope user|project] [--env K=V]... [--cwd DIR] [--transport KIND] [OPTIONS] -- COMMAND "
    "[ARGS...]\n"
    "       kxen mcp add NAME --url URL [--transport http|sse] [--header 'K: V']... [--scope ...] [OPTIONS]"
)
ADD_EPILOG = """options for either kind: --timeout S (seconds per request), --policy allow|ask|deny (the default
for tools), --policy TOOL=allow|ask|deny (one tool; repeatable), --scope, --json.

examples:
  kxen mcp add files --env ROOT=/srv/data --cwd /srv -- npx -y @modelcontextprotocol/server-filesystem /srv/data
  kxen mcp add weather --timeout 60 --policy ask --policy get_forecast=allow -- python3 /home/me/weather/server.py
  kxen mcp add github --url https://api.githubcopilot.com/mcp/ --header 'Authorization: Bearer ${GH_TOKEN}'
"""


def add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scope", choices=SCOPES, default="user", help="which file (default: user)")
    p.add_argument(
        "--env", action="append", default=[], metavar="K=V", help="an env variable of a stdio server (repeatable)"
    )
    p.add_argument(
        "--header", action="append", default=[], metavar="K:V", help="a header of a remote server (repeatable)"
    )
    p.add_argument("--cwd", metavar="DIR", help="the working directory of a stdio server")
    p.add_argument(
        "--timeout", type=_request_seconds, metavar="S", help="seconds to wait for each request (default 30)"
    )
    p.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="POLICY|TOOL=POLICY",
        help="allow, ask or deny: the default for the server's tools, or for one TOOL (repeatable)",
    )
    p.add_argument("--url", help="a remote server's endpoint")
    p.add_argument("--transport", help="the transport kind (default: stdio with a command, http with --url)")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")


def _request_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0 and <= 86400: {text!r}")
    return value


def entry_from(args: argparse.Namespace) -> tuple[dict[str, Any], argparse.Namespace] | int:
    """The entry ``kxen mcp add`` writes, with the options it was given; an exit code (a usage
    error, already printed) when the line does not make one."""
    opts, command = _split_rest(args)
    args.json = opts.json  # a refusal is printed as JSON too when --json came after NAME
    if not opts.url and not command:
        return _usage(
            "no server given: give either a command after -- (a stdio server: kxen mcp add NAME -- COMMAND ARGS...) "
            "or --url URL (a remote server)"
        )
    if opts.url and command:
        return _usage("give either a command after -- (a stdio server) or --url URL (a remote server), not both")
    entry: dict[str, Any] = {}
    if command:
        if opts.header:
            return _usage("--header is for a remote server (--url)")
        entry["command"], entry["args"] = command[0], command[1:]
    else:
        if opts.env:
            return _usage("--env is for a stdio server (a command after --)")
        if opts.cwd is not None:
            return _usage("--cwd is for a stdio server (a command after --)")
        entry["url"] = opts.url
    if opts.transport:
        entry["transport"] = opts.transport
    if opts.cwd is not None:
        entry["cwd"] = opts.cwd
    if opts.timeout is not None:
        entry["timeouts"] = {"requestSeconds": int(opts.timeout) if opts.timeout.is_integer() else opts.timeout}
    policies = _policies(opts.policy)
    if policies is None:
        return EXIT_USAGE
    default, tools = policies
    if tools:
        entry["toolPolicies"] = tools
    if default is not None:
        entry["defaultToolPolicy"] = default
    env = _pairs(opts.env, "=", "--env", "K=V")
    headers = _pairs(opts.header, ":", "--header", "'K: V'")
    if env is None or headers is None:
        return EXIT_USAGE
    if env:
        entry["env"] = env
    if headers:
        entry["headers"] = headers
    return entry, opts


def _split_rest(args: argparse.Namespace) -> tuple[argparse.Namespace, list[str]]:
    """Options may come before and after NAME; the server's command starts at the first word that
    is not an option (or after ``--``), and everything from there belongs to it."""
    rest = list(args.rest)
    p = argparse.ArgumentParser(prog="kxen mcp add", usage=ADD_USAGE)
    add_options(p)
    defaults = argparse.Namespace(**_add_defaults(args))
    if "--" in rest:
        at = rest.index("--")
        return p.parse_args(rest[:at], namespace=defaults), rest[at + 1 :]
    p.add_argument("command", nargs=argparse.REMAINDER)
    opts = p.parse_args(rest, namespace=defaults)
    return opts, list(opts.command)


def _add_defaults(args: argparse.Namespace) -> dict[str, Any]:
    keys = ("scope", "env", "header", "url", "transport", "json", "cwd", "timeout", "policy")
    return {k: getattr(args, k) for k in keys}


def _policies(items: list[str]) -> tuple[str | None, dict[str, str]] | None:
    """``--policy`` values: a bare policy is the default, ``TOOL=POLICY`` one tool's."""
    default: str | None = None
    tools: dict[str, str] = {}
    for item in items:
        tool, found, policy = item.rpartition("=")
        if policy not in ("allow", "ask", "deny") or (found and not tool):
            say(
                f"kxen: error: --policy takes allow, ask or deny, or TOOL=allow|ask|deny (got {safe_text(item)!r})",
                err=True,
            )
            return None
        if found:
            tools[tool] = policy
        else:
            default = policy
    return default, tools


def _pairs(items: list[str], sep: str, option: str, form: str) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for item in items:
        key, found, value = item.partition(sep)
        key = key.strip()
        if not found or not key:
            say(f"kxen: error: {option} takes {form} (got an item without {sep!r} or without a name)", err=True)
            return None
        out[key] = value.strip() if sep == ":" else value
    return out


def _usage(message: str) -> int:
    say(f"kxen: error: {safe_text(message)}", err=True)
    return EXIT_USAGE


__all__ = ["ADD_EPILOG", "ADD_USAGE", "add_options", "entry_from"]

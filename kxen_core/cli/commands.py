"""The ``kxen`` commands that start no server: ``config check``, ``trust``/``untrust``, ``remote``,
``mcp approvals`` and ``plugins``. Thin: parse, call public config and Runtime APIs, print."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kxen_core.cli.output import print_json, print_problems, say, table, use_config
from kxen_core.cli.problems import problem_objects
from kxen_core.config import load_config
from kxen_core.safe_text import json_text, safe_text

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def config_check(args: argparse.Namespace) -> int:
    from kxen_core.plugins.manager import make_plugin_manager

    # kinds and their options are checked against the installed plugins
    config = load_config(args.home, args.workspace, pm=make_plugin_manager())  # raises ConfigError
    use_config(config)
    # an unset ${VAR} fails only its server at run time, but the config is not ready: reported here
    problems = [*config.unset_problems, *config.project_problems]
    unread = sorted(n for n, s in config.servers.items() if s.scope == "project" and not config.trusted)
    note = (
        f"{config.files[-1]}: not checked: the workspace is not trusted (kxen trust); "
        f"it names {len(unread)} server(s): {', '.join(unread)}"
        if unread
        else None
    )
    if args.json:
        print_json(
            {
                "ok": not problems,
                "problems": problem_objects(problems, config.files),
                "files": list(config.files),
                "servers": sorted(config.servers),
                "trusted": config.trusted,
                "note": note,
            }
        )
    elif problems:
        print_problems(problems)
    else:
        say(safe_text(f"OK: {len(config.servers)} server(s) in {', '.join(config.files)}"))
        if note:
            say(safe_text(note))
    return EXIT_USAGE if problems else EXIT_OK


def trust(args: argparse.Namespace) -> int:
    from kxen_core.config.loader import default_home
    from kxen_core.config.trust import trust, untrust

    path = (args.path or args.workspace or Path.cwd()).resolve()
    changed = (trust if args.command == "trust" else untrust)(args.home or default_home(), path)
    verb = "trusted" if args.command == "trust" else "not trusted"
    say(safe_text(f"{path}: {verb}" + ("" if changed else " (unchanged)")))
    return EXIT_OK


def remote(args: argparse.Namespace) -> int:
    """``kxen remote off`` writes the switch; ``kxen remote on`` first lists each remote server not
    confirmed yet and asks, per server, whether the user knows its operator, data retention and
    access scope (on a terminal; ``--yes`` confirms them all; neither: exit 2, nothing written). The
    confirmed ones are recorded per canonical URL in the user's config.toml, with the switch."""
    import sys

    from kxen_core.config.loader import default_home
    from kxen_core.config.trust import acknowledge_remote, set_remote_enabled

    home = args.home or default_home()
    if args.switch == "off":
        set_remote_enabled(home, False)
        print("remote MCP is off")
        return EXIT_OK
    from kxen_core.plugins.manager import make_plugin_manager
    from kxen_core.runtime.remote_ack import QUESTION, remote_servers

    config = load_config(args.home, args.workspace, pm=make_plugin_manager())  # raises ConfigError
    use_config(config)
    pending = [r for r in remote_servers(config) if not r["acknowledged"]]
    if pending:
        table(
            "remote servers to confirm",
            ["name", "scope", "transport", "url", "host"],
            [[r["name"], r["scope"], r["transport"], r["url"], r["host"]] for r in pending],
        )
    confirmed = pending if args.yes else []
    if pending and not args.yes:
        if not sys.stdin.isatty():
            say(
                "remote MCP stays off: each remote server must be confirmed (its operator, data retention and "
                "access scope) on a terminal; next: run kxen remote on in a terminal, or kxen remote on --yes "
                "to confirm that you know them for every server listed",
                err=True,
            )
            return EXIT_USAGE
        for r in pending:
            try:
                answer = input(safe_text(f"{r['name']} ({r['url']}): {QUESTION} [y/N] "))
            except (EOFError, KeyboardInterrupt):
                say("\nremote MCP stays off: nothing was written", err=True)
                return EXIT_USAGE
            if answer.strip().lower() in ("y", "yes"):
                confirmed.append(r)
    acknowledge_remote(home, [r["key"] for r in confirmed], enable=True)
    print("remote MCP is on")
    for r in pending:
        if r not in confirmed:
            say(safe_text(f"{r['name']}: stays off (not confirmed); next: kxen remote on to confirm it"))
    return EXIT_OK


def approvals(args: argparse.Namespace) -> int:
    from kxen_core.runtime.workspace import Runtime

    rt = Runtime(home=args.home, workspace=args.workspace, approve=args.approve)
    config = rt.load()  # nothing starts
    use_config(config)
    rows = []
    for server, launch, error in rt.pending_launches():
        unread = server.scope == "project" and not config.trusted  # only its name was read
        rows.append(
            {
                "server": server.name,
                "kind": "workspace_trust" if unread else "stdio_launch",
                "scope": server.scope,
                "held": launch.held if launch else None,
                "transport": None if unread else server.kind,
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
        print_json({"approvals": rows, "problems": problem_objects(problems, config.files)})
    else:
        print_problems(problems)
        if not rows and not problems:
            say("no project servers to approve in this workspace")
        for r in rows:
            if r["kind"] == "workspace_trust":
                say(safe_text(f"{r['server']}: waits for the workspace to be trusted (kxen trust {config.workspace})"))
                continue
            state = "approved" if r["approved"] else "needs approval"
            if not r["trusted"]:
                state += " (workspace not trusted: kxen trust)"
            say(f"{safe_text(r['server'])}: {state}")
            if r["held"]:
                say(f"  held: {safe_text(r['held'])}")
            if r["error"]:
                say(f"  error: {safe_text(r['error'])}")
            else:
                say(f"  fingerprint: {safe_text(r['fingerprint'])}")
                say("  launch: " + json_text(_files_by_name(r["launch"])).replace("\n", "\n  "))
    return EXIT_OK


def plan(args: argparse.Namespace) -> int:
    from kxen_core.runtime.workspace import Runtime

    rt = Runtime(home=args.home, workspace=args.workspace, approve=args.approve)
    config = rt.load()  # nothing starts, nothing is contacted
    use_config(config)
    rows = rt.plan()
    problems = list(config.project_problems)
    if args.json:
        print_json({"servers": rows, "problems": problem_objects(problems, config.files), "trusted": config.trusted})
        return EXIT_OK
    print_problems(problems)
    table(
        "what would start",
        ["name", "scope", "transport", "starts", "why not / next step"],
        [
            [
                r["name"],
                r["scope"] + (" (user entry used)" if r["runs"] == "user" and r["scope"] == "project" else ""),
                r["transport"],
                "yes" if r["start"] else r["state"],
                r["reason"] or "",
            ]
            for r in rows
        ],
    )
    for r in rows:
        if r["launch"] is not None:
            say(safe_text(f"{r['name']}: launch" + (f" (fingerprint {r['fingerprint']})" if r["fingerprint"] else "")))
            say("  " + json_text(_files_by_name(r["launch"])).replace("\n", "\n  "))
        elif r["url"] is not None:
            headers = f"; headers set: {', '.join(r['headers'])}" if r["headers"] else ""
            say(safe_text(f"{r['name']}: {r['url']}{headers}"))
    return EXIT_OK


def _files_by_name(launch: Any) -> Any:
    """A launch for the text output: the files it runs by name; their identities (content digest,
    or size, mtime, ctime and inode) are for ``--json``."""
    if isinstance(launch, dict) and isinstance(launch.get("files"), dict):
        return {**launch, "files": list(launch["files"])}
    return launch


def plugins(args: argparse.Namespace) -> int:
    from kxen_core.plugins.manager import make_plugin_manager

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
        print_json({"plugins": plugins, "failures": failures, "skipped": skipped})
    else:
        table(
            "plugins",
            ["name", "dist", "version", "source", "transports", "hooks"],
            [
                [p["name"], p["dist"], p["version"], p["source"], ", ".join(p["transports"]), ", ".join(p["hooks"])]
                for p in plugins
            ],
        )
        for f in failures:
            say(safe_text(f"failed to load {f['dist']}[{f['entryPoint']}]: {f['error']}"), err=True)
    return EXIT_FAILED if failures else EXIT_OK


__all__ = ["approvals", "config_check", "plan", "plugins", "remote", "trust"]

"""``kxen mcp import FILE``: another host's servers, checked by kxen's rules, shown, then written.

The plan is made with the loader's own check of the file as it would be written
(:func:`kxen_core.config.edit.check_document`), so an entry shown as importable is one kxen loads;
each refused entry says why. Writing needs ``--yes`` (or a "y" on a terminal), and goes through
:func:`kxen_core.config.edit.update_servers` (locked, checked again, atomic). Nothing starts.
"""

from __future__ import annotations

import argparse
import copy
import sys
import types
from pathlib import Path
from typing import Any

from kxen_core.cli.entry_view import describe
from kxen_core.cli.output import print_json, say, use_config
from kxen_core.config.edit import check_document, read_document, servers_file, update_servers
from kxen_core.config.expand import unset_warnings
from kxen_core.config.imports import Imported, convert, detect, read_foreign
from kxen_core.errors import ConfigError
from kxen_core.safe_text import safe_text

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def plan(
    imported: list[Imported], target: Path, scope: str, home: Path, pm: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One row per imported entry (``add``, ``unchanged`` or ``refused``) and the entries to write."""
    current = read_document(target, scope)  # ConfigError when the target cannot be edited
    existing = current["mcpServers"]
    candidate = copy.deepcopy(current)
    rows: list[dict[str, Any]] = []
    for item in imported:
        row: dict[str, Any] = {
            "name": item.name,
            "status": "refused",
            "entry": None,
            "reasons": list(item.reasons),
            "notes": list(item.notes),
            "warnings": [],
        }
        rows.append(row)
        if item.entry is None:
            continue
        if item.name in existing:
            if existing[item.name] == item.entry:
                row["status"] = "unchanged"
            else:
                row["reasons"].append(f"{target} already has a server of this name (kxen mcp remove {item.name} first)")
            continue
        candidate["mcpServers"][item.name] = item.entry
        row["status"] = "add"
    servers, problems = check_document(candidate, target, scope, home=home, pm=pm)
    for row in rows:
        if row["status"] != "add":
            continue
        prefix = f"{target}: mcpServers.{row['name']}"
        mine = [p for p in problems if p.startswith((prefix + ".", prefix + ":"))]
        if mine:
            row["status"] = "refused"
            row["reasons"] += [p.removeprefix(f"{target}: ") for p in mine]
            problems = [p for p in problems if p not in mine]
        else:
            row["entry"] = describe(servers[row["name"]])
            row["warnings"] = unset_warnings({row["name"]: servers[row["name"]]})
    if problems:  # the target itself has problems: nothing can be written to it
        raise ConfigError(problems)
    chosen = {r["name"]: candidate["mcpServers"][r["name"]] for r in rows if r["status"] == "add"}
    # what is shown must not carry the imported secrets: scrub them like a loaded config's
    use_config(types.SimpleNamespace(servers={n: servers[n] for n in chosen}, user_servers={}))
    return rows, chosen


def _locate(args: argparse.Namespace, workspace: Path) -> Path | int:
    """``FILE``, or with ``--from TOOL`` alone the file at that tool's usual place."""
    from kxen_core.config.import_places import find_file

    if args.file is not None:
        return Path(args.file)
    if args.source_format == "auto":
        say("kxen: error: give the FILE to import, or --from TOOL to import from its usual place", err=True)
        return EXIT_USAGE
    found, places = find_file(args.source_format, workspace)
    if found is None:
        looked = ", ".join(str(p) for p in places)
        raise ConfigError(
            [f"{places[0]}: (file): cannot be imported: no {args.source_format} file found (looked at {looked})"]
        )
    return found


def run_import(args: argparse.Namespace, home: Path, workspace: Path, pm: Any) -> int:
    located = _locate(args, workspace)
    if isinstance(located, int):
        return located
    args.file = located
    try:
        data = read_foreign(args.file)
    except ValueError as exc:
        raise ConfigError([f"{args.file}: (file): cannot be imported: {exc}"]) from None
    fmt = detect(args.file, data) if args.source_format == "auto" else args.source_format
    try:
        imported, notes = convert(data, fmt, workspace)
    except ValueError as exc:
        raise ConfigError([f"{args.file}: (top level): cannot be imported: {exc}"]) from None
    target = servers_file(home, workspace, args.scope)
    rows, chosen = plan(imported, target, args.scope, home, pm)
    refused = any(r["status"] == "refused" for r in rows)
    if not args.json:
        _show(args, fmt, target, rows, notes)
    written = False
    if chosen and (args.yes or (not args.json and _confirm(len(chosen), target))):

        def mutate(servers: dict[str, Any]) -> None:
            taken = sorted(set(chosen) & set(servers))
            if taken:  # written by someone else since the plan was made
                raise ConfigError(
                    [f"{target}: mcpServers.{name}: added meanwhile; run the import again" for name in taken]
                )
            servers.update(chosen)

        update_servers(home, workspace, args.scope, mutate, pm=pm)
        written = True
    if args.json:
        print_json(
            {"file": str(args.file), "format": fmt, "target": str(target), "scope": args.scope,
             "servers": rows, "notes": notes, "written": written}
        )  # fmt: skip
    elif written:
        say(safe_text(f"wrote {len(chosen)} server(s) to {target} ({args.scope} config)"))
    elif chosen:
        say("nothing written: run again with --yes to write")
    else:
        say("nothing to write")
    return EXIT_FAILED if refused else EXIT_OK


def _show(args: argparse.Namespace, fmt: str, target: Path, rows: list[dict[str, Any]], notes: list[str]) -> None:
    say(safe_text(f"{args.file} (read as {fmt}) -> {target} ({args.scope} config):"))
    for note in notes:
        say(f"  note: {safe_text(note)}")
    marks = {"add": "+", "unchanged": "=", "refused": "!"}
    for row in rows:
        head = f"  {marks[row['status']]} {row['name']}: "
        if row["status"] == "add":
            entry = row["entry"]
            what = entry["url"] or " ".join([entry["command"] or "", *entry["args"]])
            head += f"{entry['transport']}: {what}"
        elif row["status"] == "unchanged":
            head += "already there, unchanged"
        else:
            head += "refused"
        say(safe_text(head))
        for reason in row["reasons"]:
            say(f"      why: {safe_text(reason)}")
        for note in row["notes"]:
            say(f"      note: {safe_text(note)}")
        for warning in row["warnings"]:
            say(f"      warning: {safe_text(warning)}")


def _confirm(count: int, target: Path) -> bool:
    """A "y" typed on a terminal; never asked when either end is not one."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return False
    try:
        answer = input(safe_text(f"write {count} server(s) to {target}? [y/N] "))
    except (EOFError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")


__all__ = ["plan", "run_import"]

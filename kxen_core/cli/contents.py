"""``kxen mcp resources | templates | read | prompts | get-prompt`` and what ``kxen mcp call`` prints.

Thin: each calls a public Runtime API and prints a table (text from servers escaped) or ``--json``.
``read``, ``get-prompt`` and ``call`` print exactly what the agent gets (``Runtime.agent_call``'s
view: ``{"content": [{"type": "text", "text": ...}], "isError": ...}``), bounded, binary contents as
descriptors.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kxen_core.agent.output import AgentOutput, error_output, scrubbed
from kxen_core.cli.output import print_json, say, table
from kxen_core.cli.status import say_indented
from kxen_core.errors import InvalidArguments, KxenError
from kxen_core.safe_text import safe_text

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DESCRIPTION_CHARS = 80


def add_commands(mcp: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """The parsers of these commands under ``kxen mcp``; ``common`` adds ``--json`` and ``--wait``."""
    resources = mcp.add_parser("resources", help="list the resources of ready servers")
    resources.add_argument("server", nargs="?", help="only this server")
    resources.add_argument("--cursor", help="start at this nextCursor of an earlier page")
    resources.add_argument("--limit", type=_limit, help="at most this many (default: everything kxen holds)")
    templates = mcp.add_parser("templates", help="list the resource templates of ready servers")
    templates.add_argument("server", nargs="?", help="only this server")
    read = mcp.add_parser("read", help="read one resource, as the agent gets it")
    read.add_argument("server")
    read.add_argument("uri")
    read.add_argument(
        "--output", type=Path, metavar="FILE", help="save the resource's bytes (a blob decoded, text as UTF-8) to FILE"
    )
    prompts = mcp.add_parser("prompts", help="list the prompts of ready servers with their arguments")
    prompts.add_argument("server", nargs="?", help="only this server")
    get = mcp.add_parser("get-prompt", help="get one prompt, checked first, as the agent gets it")
    get.add_argument("server")
    get.add_argument("name")
    get.add_argument("--args", default="{}", help="the prompt arguments as a JSON object of strings")
    for sp in (resources, templates, read, prompts, get):
        common(sp)


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more: {text!r}")
    return value


def _short(text: Any) -> str:
    first = (text or "").strip().split("\n")[0] if isinstance(text, str) else ""
    return first[:DESCRIPTION_CHARS] + ("…" if len(first) > DESCRIPTION_CHARS else "")


def _failed_servers(rt: Any) -> int:
    failed = [s for s in rt.status() if s["state"] == "failed"]
    for s in failed:
        say(safe_text(f"kxen: server {s['name']!r} failed ({s['phase']}): {s['error']}"), err=True)
    return EXIT_FAILED if failed else EXIT_OK


def resources(rt: Any, args: argparse.Namespace) -> int:
    try:
        page = rt.resources(args.server, cursor=args.cursor, limit=args.limit)
    except InvalidArguments as exc:
        say(f"kxen: error: {safe_text(exc)}", err=True)
        return EXIT_USAGE
    if args.json:
        print_json(page)
    else:
        rows = [
            [r["server"], r["uri"], r.get("name"), r.get("mimeType"), _short(r.get("description"))]
            for r in page["resources"]
        ]
        table("resources", ["server", "uri", "name", "mimeType", "description"], rows)
        if page["nextCursor"]:
            say(safe_text(f"more: --cursor {page['nextCursor']}"))
    return _failed_servers(rt)


def templates(rt: Any, args: argparse.Namespace) -> int:
    items = rt.resource_templates(args.server)
    if args.json:
        print_json({"resourceTemplates": items})
    else:
        rows = [
            [t["server"], t["uriTemplate"], t.get("name"), t.get("mimeType"), _short(t.get("description"))]
            for t in items
        ]
        table("resource templates", ["server", "uriTemplate", "name", "mimeType", "description"], rows)
    return _failed_servers(rt)


def prompts(rt: Any, args: argparse.Namespace) -> int:
    items = [
        {
            "server": p["server"],
            "name": p["name"],
            "description": p.get("description"),
            "arguments": p.get("arguments") or [],
            **{k: v for k, v in p.items() if k not in ("server", "name", "description", "arguments")},
        }
        for p in rt.prompts(args.server)
    ]
    if args.json:
        print_json({"prompts": items})
    else:
        rows = [
            [
                p["server"],
                p["name"],
                ", ".join(f"{a.get('name')}{'' if a.get('required') else '?'}" for a in p["arguments"]),
                _short(p["description"]),
            ]
            for p in items
        ]
        table("prompts (arg? = optional)", ["server", "name", "arguments", "description"], rows)
    return _failed_servers(rt)


async def agent_view(rt: Any, args: argparse.Namespace, run: Callable[[], Awaitable[AgentOutput]]) -> int:
    """Print what the agent gets from ``run()``: the agent's tool result with ``--json``, else its
    text (a kxen error on stderr). Exit 1 when it is an error."""
    error: KxenError | None = None
    try:
        out = await run()
    except KxenError as exc:
        error, out = exc, error_output(exc, limit=rt.output_limit)
    out = scrubbed(out, rt.secrets)  # what the agent would get: nothing kxen holds as secret
    if args.json:
        print_json(out.as_result())
    elif error is not None:
        say_indented(f"kxen: error: {error}", "", err=True)  # a server's stderr in it: one line each
    else:
        say(safe_text(out.text, multiline=True))
    return EXIT_FAILED if out.is_error else EXIT_OK


async def read(rt: Any, args: argparse.Namespace) -> int:
    if getattr(args, "output", None) is not None:
        return await _save(rt, args)
    return await agent_view(rt, args, lambda: rt.read_resource(args.server, args.uri))


async def _save(rt: Any, args: argparse.Namespace) -> int:
    """``read --output FILE``: the one content of the resource, its bytes as the server sent them
    (a blob decoded from base64, text as UTF-8), written to FILE (replaced atomically)."""
    try:
        contents = await rt.fetch_resource(args.server, args.uri)
    except KxenError as exc:
        say(f"kxen: error: {safe_text(exc)}", err=True)
        return EXIT_FAILED
    if len(contents) != 1:
        say(safe_text(f"kxen: error: {args.uri} has {len(contents)} contents; --output saves exactly one"), err=True)
        return EXIT_FAILED
    [content] = contents
    data = content.data if content.data is not None else (content.text or "").encode("utf-8")
    target = args.output
    if not target.name or target.is_dir():
        say(safe_text(f"kxen: error: --output {target}: must name a file, not a directory"), err=True)
        return EXIT_USAGE
    tmp = target.with_name(f".{target.name}.kxen-{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except OSError as exc:
        say(safe_text(f"kxen: error: --output {target}: {exc.strerror or exc}"), err=True)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return EXIT_FAILED
    shown = {"ok": True, "file": str(target), "uri": content.uri, "mimeType": content.mime_type, "bytes": len(data)}
    if args.json:
        print_json(shown)
    else:
        say(safe_text(f"saved {len(data)} bytes of {content.uri} ({content.mime_type or 'no MIME type'}) to {target}"))
    return EXIT_OK


async def get_prompt(rt: Any, args: argparse.Namespace, arguments: dict[str, Any]) -> int:
    return await agent_view(rt, args, lambda: rt.get_prompt(args.server, args.name, arguments))


#: a terminal gets at most one progress line per this many seconds (and the last one)
PROGRESS_EVERY = 0.2


def _on_terminal() -> bool:
    return sys.stderr.isatty()


def _progress_printer() -> Callable[[Any], None]:
    """A progress callback that prints ``progress N/TOTAL: message`` lines on stderr, throttled."""
    last = [float("-inf")]

    def show(update: Any) -> None:
        if update.total is None and (update.message or "").startswith("task "):
            # a task's status line (runtime.tasks): once per change, at most one per poll
            say(safe_text(update.message), err=True)
            return
        now = time.monotonic()
        done = update.total is not None and update.progress >= update.total
        if now - last[0] < PROGRESS_EVERY and not done:
            return
        last[0] = now
        of = f"/{update.total:g}" if update.total is not None else ""
        say(
            safe_text(f"progress {update.progress:g}{of}" + (f": {update.message}" if update.message else "")), err=True
        )

    return show


async def call(rt: Any, args: argparse.Namespace, arguments: dict[str, Any]) -> int:
    # on a terminal (not --json) the call asks for progress and shows it on stderr
    progress = None if args.json or not _on_terminal() else _progress_printer()

    async def run() -> AgentOutput:
        # the host API raises kxen errors; the agent's view of a result is rendered from it
        from kxen_core.agent.output import render_tool_result

        raw = await rt.call_tool(args.tool, arguments, server=args.server, timeout=args.timeout, on_progress=progress)
        return render_tool_result(raw, server=args.server, tool=args.tool, limit=rt.output_limit)

    return await agent_view(rt, args, run)


__all__ = ["add_commands", "agent_view", "call", "get_prompt", "prompts", "read", "resources", "templates"]

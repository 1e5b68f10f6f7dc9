"""Entry point ``tty`` of the ``kxen`` group: a terminal approval channel.

This module is also the reference for third-party approval channels: one hook, return ``None`` when
the channel cannot reach a human now, never block the event loop.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any, TextIO

import anyio

from kxen_core import hookimpl
from kxen_core.policy import ApprovalDecision, ApprovalRequest

_lock = threading.Lock()


#: the longest answer line read; the rest of a longer line is drained so it cannot answer the next question
MAX_ANSWER_CHARS = 256
_MAX_DRAIN_READS = 1024


def _safe(text: str) -> str:
    """Show control characters (terminal escapes, carriage returns, newlines) as escapes: a tool
    name or an argument from a server must not be able to redraw or fake lines of the prompt."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


#: the most characters a value of the request takes on the terminal (the rest is cut, and said so)
MAX_VALUE_CHARS = 2000
#: details shown after the decision and the server, in this order; anything else after them
_WHERE = ("url", "why")
_LAUNCH = ("command", "args", "cwd", "env", "target", "held", "kind", "options")


def _value(value: Any) -> str:
    """A detail's value on one or more indented lines: escaped and at most :data:`MAX_VALUE_CHARS`."""
    if isinstance(value, str):
        text = _safe(value)
    else:
        text = json.dumps(value, ensure_ascii=True, default=str)
        if len(text) > 100:  # a long value: one key or item a line
            text = json.dumps(value, indent=2, ensure_ascii=True, default=str)
    if len(text) > MAX_VALUE_CHARS:
        text = text[:MAX_VALUE_CHARS] + f" ... [cut: {len(text)} characters]"
    return text.replace("\n", "\n    ")


def _launch(lines: list[str], launch: dict[str, Any], indent: str) -> None:
    """The launch behind the decision: command line, cwd, env; the files it runs by name only (their
    identities -- digest, size, mtime, inode -- are in ``kxen mcp approvals --json``)."""
    for key in (*_LAUNCH, *sorted(k for k in launch if k not in _LAUNCH and k != "files")):
        if key in launch and launch[key] not in (None, {}, []):
            lines.append(f"{indent}{_safe(str(key))}: {_value(launch[key])}")
    files = launch.get("files")
    if isinstance(files, dict) and files:
        lines.append(f"{indent}files: " + ", ".join(_safe(str(name)) for name in files))


def render(request: ApprovalRequest) -> str:
    """The request as the terminal shows it, the decision first: for a tool call the tool and its
    arguments, then the server and its scope, then why it asks, then the launch behind it."""
    details = dict(request.details)
    lines = [f"kxen: approval needed -- {_safe(request.summary)}"]
    if request.kind == "tool_call":
        lines.append(f"  tool: {_safe(str(details.pop('tool', '')))}")
        lines.append(f"  arguments: {_value(details.pop('arguments', {}))}")
    about = [f"{_safe(str(details.pop('scope')))} scope" if "scope" in details else ""]
    about += [_safe(str(details.pop(k))) for k in ("transport", "source") if k in details]
    shown = ", ".join(a for a in about if a and a != "None")
    lines.append(f"  server: {_safe(request.server)}" + (f" ({shown})" if shown else ""))
    lines.append(f"  kind: {_safe(request.kind)}")
    for key in _WHERE:
        if key in details:
            lines.append(f"  {key}: {_value(details.pop(key))}")
    launch = details.pop("launch", None)
    if request.kind == "stdio_launch":
        launch, details = details, {}
    for key, value in details.items():
        lines.append(f"  {_safe(str(key))}: {_value(value)}")
    if isinstance(launch, dict):
        lines.append("  launch:")
        _launch(lines, launch, "    ")
    if request.fingerprint:
        lines.append(f"  fingerprint: {request.fingerprint}")
    return "\n".join(lines)


def _read_answer(stream_in: TextIO) -> str:
    line = stream_in.readline(MAX_ANSWER_CHARS)
    rest = line
    for _ in range(_MAX_DRAIN_READS):  # drain the rest of an over-long line, bounded
        if not rest or rest.endswith("\n"):
            break
        rest = stream_in.readline(MAX_ANSWER_CHARS)
    return line.strip().lower()


#: the answers offered for each way a yes can be remembered (kxen_core.policy.REMEMBER)
CHOICES = {
    "once": ("o", "once", "allow this call once"),
    "call": ("y", "yes", "allow this exact request until kxen exits"),
    "tool": ("p", "process", "allow this tool (any arguments) until kxen exits"),
    "always": ("a", "always", "always allow this tool (writes allow to its toolPolicies in your mcp.json)"),
}


def question(request: ApprovalRequest) -> str:
    offered = [c for c in ("once", "call", "tool", "always") if c in request.remember_choices]
    if offered == ["call"]:
        return "Approve? [y/N] "
    lines = [f"  [{CHOICES[c][0]}] {CHOICES[c][2]}" for c in offered] + ["  [N] no"]
    return "\n".join(lines) + "\nApprove? [" + "/".join(CHOICES[c][0] for c in offered) + "/N] "


def ask_blocking(request: ApprovalRequest, stream_in: TextIO, stream_out: TextIO) -> ApprovalDecision:
    with _lock:
        stream_out.write(render(request) + "\n" + question(request))
        stream_out.flush()
        answer = _read_answer(stream_in)
    for remember, (key, word, _) in CHOICES.items():
        if remember in request.remember_choices and answer in (key, word):
            return ApprovalDecision(approved=True, channel="tty", remember=remember)
    return ApprovalDecision(approved=False, reason="declined on the terminal", channel="tty")


def _interactive() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty()
    except (ValueError, OSError):
        return False


@hookimpl
async def kxen_approval_prompt(request: ApprovalRequest) -> ApprovalDecision | None:
    if not _interactive():
        return None

    def ask() -> Any:
        return ask_blocking(request, sys.stdin, sys.stderr)

    return await anyio.to_thread.run_sync(ask, abandon_on_cancel=True)

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


def render(request: ApprovalRequest) -> str:
    lines = [
        f"kxen: approval needed -- {_safe(request.summary)}",
        f"  kind:   {request.kind}",
        f"  server: {_safe(request.server)}",
    ]
    for key, value in request.details.items():
        text = json.dumps(value, indent=2, ensure_ascii=True) if not isinstance(value, str) else _safe(value)
        lines.append(f"  {_safe(str(key))}: " + text.replace("\n", "\n    "))
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

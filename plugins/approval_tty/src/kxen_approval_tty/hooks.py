"""Entry point ``tty`` of the ``kxen`` group: a terminal approval channel.

This module is also the reference for third-party approval channels: one hook, return ``None`` when
the channel cannot reach a human now, never block the event loop.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any, Callable, TextIO

import anyio

from kxen_core.plugins import hookimpl
from kxen_core.policy import ApprovalDecision, ApprovalRequest

_lock = threading.Lock()


def render(request: ApprovalRequest) -> str:
    lines = [f"kxen: approval needed -- {request.summary}", f"  kind:   {request.kind}", f"  server: {request.server}"]
    for key, value in request.details.items():
        text = json.dumps(value, indent=2, ensure_ascii=False) if not isinstance(value, str) else value
        lines.append(f"  {key}: " + text.replace("\n", "\n    "))
    if request.fingerprint:
        lines.append(f"  fingerprint: {request.fingerprint}")
    return "\n".join(lines)


def ask_blocking(request: ApprovalRequest, stream_in: TextIO, stream_out: TextIO) -> ApprovalDecision:
    with _lock:
        stream_out.write(render(request) + "\nApprove? [y/N] ")
        stream_out.flush()
        answer = stream_in.readline(64).strip().lower()
    approved = answer in ("y", "yes")
    return ApprovalDecision(approved=approved, reason="" if approved else "declined on the terminal", channel="tty")


def _interactive() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty()
    except (ValueError, OSError):
        return False


@hookimpl
async def kxen_approval_prompt(request: ApprovalRequest) -> ApprovalDecision | None:
    if not _interactive():
        return None
    ask: Callable[[], Any] = lambda: ask_blocking(request, sys.stdin, sys.stderr)
    return await anyio.to_thread.run_sync(ask, abandon_on_cancel=True)

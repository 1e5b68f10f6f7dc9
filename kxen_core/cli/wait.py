"""Waiting for servers to settle, visibly: nobody stares at a silent terminal.

On a terminal, a spinner on stderr names each server still loading and what it is doing (it stops
while an approval channel is asked, so a terminal prompt is never drawn over); elsewhere
(a pipe, a log), a line on stderr names the servers still loading after :data:`FIRST_NOTICE`
seconds and then every :data:`NOTICE_EVERY` seconds. stdout stays what the command prints.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import anyio

from kxen_core.cli.output import say
from kxen_core.safe_text import safe_text

#: seconds before the first "still waiting" line (no spinner), and between the next ones
FIRST_NOTICE = 3.0
NOTICE_EVERY = 10.0
#: how often the spinner's text is brought up to date
TICK = 0.1


def loading(rt: Any) -> list[str]:
    """``name (state)`` of every server that has not settled yet: those :meth:`Runtime.wait_ready`
    waits for (a server whose launch a channel is being asked about is ``awaiting_approval`` and
    not settled until the answer)."""
    return [f"{s.name} ({s.state.value})" for s in rt.servers.values() if not s.settled.is_set()]


async def wait_visibly(rt: Any, timeout: float | None, *, tty: bool | None = None) -> bool:
    """:meth:`Runtime.wait_ready`, showing who is still loading; False on timeout."""
    tty = sys.stderr.isatty() if tty is None else tty
    start = time.monotonic()
    finished = anyio.Event()
    result = False

    async def wait() -> None:
        nonlocal result
        try:
            result = await rt.wait_ready(timeout)
        finally:
            finished.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        await (_spinner if tty else _notices)(rt, start, finished)
    return result


async def _spinner(rt: Any, start: float, finished: anyio.Event) -> None:
    from rich.console import Console

    console = Console(stderr=True, markup=False, emoji=False, highlight=False)
    status = console.status("")
    approvals = rt.approvals

    def pause(prompting: bool) -> None:
        # an approval channel may prompt on this terminal: the spinner must not draw over it
        if prompting:
            status.stop()
        elif not approvals.prompting:
            status.start()

    approvals.prompt_listeners.append(pause)
    try:
        if not approvals.prompting:  # a server may have asked before the wait began
            status.start()
        while not finished.is_set():
            if not approvals.prompting:
                names = loading(rt)
                took = time.monotonic() - start
                status.update(safe_text(f"starting {len(names)} server(s) ({took:.0f} s): {', '.join(names)}"))
            with anyio.move_on_after(TICK):
                await finished.wait()
    finally:
        approvals.prompt_listeners.remove(pause)
        status.stop()


async def _notices(rt: Any, start: float, finished: anyio.Event) -> None:
    wait = FIRST_NOTICE
    while not finished.is_set():
        with anyio.move_on_after(wait):
            await finished.wait()
            return
        names = loading(rt)
        if names:
            say(
                safe_text(f"kxen: still waiting after {time.monotonic() - start:.0f} s for: {', '.join(names)}"),
                err=True,
            )
        wait = NOTICE_EVERY


__all__ = ["loading", "wait_visibly"]

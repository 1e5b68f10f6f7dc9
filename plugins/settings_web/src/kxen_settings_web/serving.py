"""Serving the page: a loopback socket, uvicorn on the running event loop, the URL announced.

:func:`serve` holds the runtime's approvals (the page answers them), enters the runtime and serves
:func:`kxen_settings_web.settings_app` on ``127.0.0.1`` until it is cancelled; then it stops
taking requests, ends the live streams, closes every connection within
:data:`GRACEFUL_SECONDS` and leaves the runtime (every server closed). uvicorn's own signal
handlers are not installed: the caller owns the signals (``kxen settings`` runs under the core's
signal handling, so Ctrl-C closes every server as ``kxen mcp`` does).
"""

from __future__ import annotations

import contextlib
import errno
import socket
import sys
from collections.abc import Callable, Generator
from typing import Any

import anyio
import uvicorn

from kxen_settings_web.app import SettingsPage

#: seconds the open connections get to finish when the page stops
GRACEFUL_SECONDS = 2.0
#: how long an approval waits on the page before it is denied (fail closed)
APPROVAL_SECONDS = 600.0


class PortInUse(Exception):
    """The port asked for is taken (another ``kxen settings``, or any other program)."""


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:  # the host's signal handling stays
        yield


def loopback_socket(port: int = 0) -> socket.socket:
    """A listening TCP socket on 127.0.0.1 (``port`` 0: a free one). ``PortInUse`` when taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(f"port {port} on 127.0.0.1 is in use (leave --port out for a free one)") from None
        raise
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve(
    runtime: Any,
    *,
    port: int = 0,
    open_browser: bool = True,
    announce: Callable[[str], None] | None = None,
    approval_seconds: float = APPROVAL_SECONDS,
) -> None:
    """Serve the Settings page of ``runtime`` (a :class:`kxen_core.Runtime`, not entered) until cancelled.

    ``announce(url)`` is told the page's URL, with its one-time secret (default: printed to stdout);
    ``open_browser`` opens it. The runtime is entered here, after its approvals are held, so a
    project server's launch waits on the page from the first start."""
    sock = loopback_socket(port)
    try:
        page = SettingsPage(runtime, port=sock.getsockname()[1])
        async with runtime.hold_approvals(approval_seconds), runtime:
            await _serve(page, sock, announce, open_browser)
    finally:
        sock.close()


async def _serve(page: SettingsPage, sock: socket.socket, announce: Callable[[str], None] | None, browse: bool) -> None:
    config = uvicorn.Config(
        page.app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_keep_alive=5,
        timeout_graceful_shutdown=int(GRACEFUL_SECONDS),
        limit_concurrency=64,
        h11_max_incomplete_event_size=16 * 1024,
    )
    server = _Server(config)
    stopped = anyio.Event()

    async def run() -> None:
        with anyio.CancelScope(shield=True):  # stopped by should_exit, below, so it shuts down cleanly
            try:
                await server.serve(sockets=[sock])
            finally:
                stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            with anyio.fail_after(10):
                while not server.started and not stopped.is_set():
                    await anyio.sleep(0.02)
            if server.started:
                url = page.url
                (announce or _print)(url)
                if browse:
                    await anyio.to_thread.run_sync(_open, url, abandon_on_cancel=True)
            await stopped.wait()
        finally:
            page.close()  # the live streams end, so the connections can close
            server.should_exit = True


def _print(url: str) -> None:
    print(f"kxen settings: {url}", flush=True)
    print("  (the link holds this run's secret: open it, do not share it; Ctrl-C stops the page and every server)")
    sys.stdout.flush()


def _open(url: str) -> None:
    import os
    import webbrowser

    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return  # no screen: a text browser would take the terminal; the printed URL is the way in
    try:
        webbrowser.open(url, new=2)
    except Exception:  # no browser here: the printed URL is the way in
        pass


__all__ = ["APPROVAL_SECONDS", "GRACEFUL_SECONDS", "PortInUse", "loopback_socket", "serve"]

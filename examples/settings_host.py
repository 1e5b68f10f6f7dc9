"""A host that serves kxen's Settings page over its own runtime, beside its own agent.

    uv run python examples/settings_host.py --home demo/home

The host owns the runtime and the web server; the page is an ASGI app over that runtime
(:func:`kxen_settings_web.settings_app`). Approvals are held on the page while it runs: an agent
call to an ``ask`` tool waits there until a person answers it in the browser. The page checks the
Host header against the address it is served on, so serve it on ``127.0.0.1`` and the same port.
Ctrl-C stops the page and closes every server.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Callable
from pathlib import Path

import anyio
import uvicorn
from kxen_settings_web import settings_app

from kxen_core import Runtime


async def host(home: Path | None, workspace: Path | None, port: int, announce: Callable[[str], None]) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", port))  # loopback only: the page is one person's
    page = settings_app(runtime := Runtime(home=home, workspace=workspace), port=sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(page, log_level="warning", lifespan="off", timeout_graceful_shutdown=2))
    async with runtime.hold_approvals(bound=600), runtime:  # the page answers this runtime's approvals
        async with anyio.create_task_group() as tg:

            async def tell() -> None:
                while not server.started:
                    await anyio.sleep(0.05)
                announce(page.url)

            tg.start_soon(tell)
            # ... the host's own agent runs beside it, calling runtime.agent_call(...) ...
            await server.serve([sock])  # until Ctrl-C: uvicorn closes the connections within 2 s
            tg.cancel_scope.cancel()
    # leaving the runtime closed every server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path)
    parser.add_argument("--workspace", type=Path)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    try:
        anyio.run(host, args.home, args.workspace, args.port, lambda url: print(f"Settings: {url}", flush=True))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

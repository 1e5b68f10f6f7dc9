"""Helpers shared by the trust, approval, project-config and policy tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import attrs

from kxen_core import Runtime, hookimpl
from kxen_core.errors import ConnectError

#: the stdlib demo server; ``--log FILE`` makes it record every message it receives
DEMO = Path(__file__).resolve().parents[1] / "demo" / "server.py"
WAIT = 30


ROOT = Path(__file__).resolve().parents[1]
#: seconds a documented program or an example may take
PROGRAM_SECONDS = 60


def run_program(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A program run as a person would, from the repository root (an example, or ``-c`` with a
    documented one), bounded in time; ``env`` adds to the test's environment."""
    import os

    return subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=PROGRAM_SECONDS,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def demo_entry(log: Path | None = None, **extra: Any) -> dict[str, Any]:
    args = [str(DEMO)] + (["--log", str(log)] if log is not None else [])
    return {"command": sys.executable, "args": args, **extra}


def write_project(ws: Path, servers: dict[str, Any]) -> Path:
    (ws / ".kxen").mkdir(exist_ok=True)
    path = ws / ".kxen" / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def state(rt: Runtime, name: str) -> dict[str, Any]:
    return next(s for s in rt.status() if s["name"] == name)


async def settle(rt: Runtime) -> None:
    with anyio.fail_after(WAIT):
        assert await rt.wait_ready()


@attrs.frozen(kw_only=True)
class ContainerOptions:
    """Options of the spy's ``container`` kind: a plugin's own local kind, for tests."""

    image: str = ""


class Spy:
    """A transport plugin that registers the built-in kinds (and ``container``) with openers that
    record the server and context they were handed, and open nothing (a ``ConnectError``)."""

    __name__ = "transport-spy"

    def __init__(self, kinds: tuple[str, ...] = ("stdio", "http", "sse", "container")) -> None:
        self.kinds = kinds
        self.opened: list[Any] = []
        self.contexts: list[Any] = []

    @hookimpl
    def kxen_register_transports(self, register: Any) -> None:
        for kind in self.kinds:
            register(kind, self._open, options=ContainerOptions if kind == "container" else None)

    def _open(self, server: Any, context: Any) -> Any:
        # copies: what reached the transport, not a view of something that may change later
        self.opened.append(attrs.evolve(server, env=dict(server.env), headers=dict(server.headers)))
        self.contexts.append(context)
        raise ConnectError("the spy opens nothing", server=server.name)

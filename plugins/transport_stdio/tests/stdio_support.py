"""Shared helpers for the stdio transport tests (plain functions; fixtures live in conftest.py).

A settled Runtime over some servers: ``kxen_testing.running(kxen_home, workspace, servers=..., allow=STDIO)``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from kxen_core import Launch, ServerConfig, TransportContext
from kxen_core.launch.resolve import resolve_launch
from kxen_core.runtime.workspace import Runtime

HERE = Path(__file__).resolve().parent
HELPER = HERE / "helper_server.py"
SDK_SERVER = HERE.parents[2] / "tests" / "peers" / "sdk_server.py"
REPO = HERE.parents[2]
DEMO = REPO / "demo" / "server.py"
#: marks every helper process this pytest process starts (several runs may share the machine)
OWNER = f"--owner={os.getpid()}"
HELPER_ARGV = [str(HELPER), OWNER]
EVERYTHING = REPO / "tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
#: what ``kxen_testing.running(..., allow=STDIO)`` loads: only this transport (and the core defaults)
STDIO = ("stdio",)


def helper(*args: str, **extra: Any) -> dict[str, Any]:
    """An mcp.json entry running helper_server.py with this interpreter."""
    entry: dict[str, Any] = {"command": sys.executable, "args": [*HELPER_ARGV, *args], "defaultToolPolicy": "allow"}
    entry.update(extra)
    return entry


def context(server: ServerConfig, workspace: Path, **extra: Any) -> TransportContext:
    """The context a Runtime hands the stdio opener: the launch resolved (once) by the core."""
    launch: Launch = resolve_launch(server, workspace)
    return TransportContext(workspace=workspace, launch=launch, **extra)


def owned_helpers() -> list[int]:
    """Live helper_server.py processes started by this pytest process."""
    mark = OWNER.encode() + b"\0"
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if mark in cmdline and alive(int(entry)):
                found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """Is ``pid`` a live (non-zombie) process?"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


async def wait_gone(pids: list[int], seconds: float = 2.0) -> list[int]:
    """Poll until none of ``pids`` is alive or ``seconds`` pass; return the survivors."""
    deadline = time.monotonic() + seconds
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        await anyio.sleep(0.01)


async def wait_state(st: Any, state: str) -> None:
    """Poll a ServerState until it reaches ``state`` (bound it with the caller's fail_after)."""
    while st.state != state:
        await anyio.sleep(0.01)


def server_pid(rt: Runtime, name: str) -> int:
    st = rt.servers[name]
    assert st.session is not None, st.snapshot()
    return st.session._stream.describe()["pid"]


class Timer:
    def __enter__(self) -> Timer:
        self.start = time.monotonic()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds = time.monotonic() - self.start

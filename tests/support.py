"""Helpers shared by the trust, approval, project-config and policy tests."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio

from kxen_core import Runtime

#: the stdlib demo server; ``--log FILE`` makes it record every message it receives
DEMO = Path(__file__).resolve().parents[1] / "demo" / "server.py"
WAIT = 30


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

"""The kxen CLI end to end, as a subprocess, against the demo server over stdio."""

from __future__ import annotations

import json
import shutil

import anyio
import pytest
from stdio_support import REPO

pytestmark = pytest.mark.anyio


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    return uv


async def _kxen(*args: str) -> tuple[int, dict]:
    with anyio.fail_after(120):
        proc = await anyio.run_process([_uv(), "run", "kxen", "--home", "demo/home", *args], cwd=REPO, check=False)
    try:
        return proc.returncode, json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"not JSON (rc {proc.returncode}): {proc.stdout!r} stderr: {proc.stderr[-2000:]!r}")


async def test_cli_status_shows_the_demo_ready():
    rc, out = await _kxen("mcp", "status", "--json")
    demo = {s["name"]: s for s in out["servers"]}["demo"]
    assert (demo["state"], demo["transport"], demo["tools"]) == ("ready", "stdio", 4), demo
    assert rc == 0


async def test_cli_call_add_prints_what_the_agent_gets():
    rc, out = await _kxen("mcp", "call", "demo", "add", "--args", '{"a":2,"b":3}', "--json")
    assert out["isError"] is False and [b["type"] for b in out["content"]] == ["text"], out
    assert json.loads(out["content"][0]["text"]) == {"sum": 5}, out  # the demo's text carries the result
    assert rc == 0

"""Real peers as subprocesses on 127.0.0.1: the Python SDK server (transport_http/tests/peer_server.py) and server-everything."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

HERE = Path(__file__).resolve().parents[2] / "transport_http" / "tests"  # peer_server.py lives there
START_SECONDS = 30.0
STOP_SECONDS = 5.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_listening(proc: subprocess.Popen, port: int, log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"peer exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"peer did not listen on 127.0.0.1:{port} within {START_SECONDS} s: {log.read_text()[-2000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_SECONDS)


@pytest.fixture
def start_peer(tmp_path: Path) -> Iterator[Callable[[list[str], dict[str, str] | None], int]]:
    """``start_peer(argv_with_{port}, extra_env) -> port``; every peer is stopped after the test."""
    procs: list[subprocess.Popen] = []

    def start(argv: list[str], env: dict[str, str] | None = None) -> int:
        port = free_port()
        log = tmp_path / f"peer-{port}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [a.replace("{port}", str(port)) for a in argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {}), "PORT": str(port)},
                cwd=tmp_path,
            )
        procs.append(proc)
        _wait_listening(proc, port, log)
        return port

    yield start
    for proc in procs:
        _stop(proc)


@pytest.fixture
def sdk_sse_peer(start_peer) -> Callable[[], str]:
    """``sdk_sse_peer() -> url`` of the SSE endpoint of a peer_server.py in ``sse`` mode."""

    def start() -> str:
        port = start_peer([sys.executable, str(HERE / "peer_server.py"), "sse", "{port}"])
        return f"http://127.0.0.1:{port}/sse"

    return start


@pytest.fixture
def everything_peer(start_peer, everything_js: str) -> Callable[[str], int]:
    """``everything_peer("streamableHttp" | "sse") -> port``; it binds every interface, we use 127.0.0.1."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")

    def start(mode: str) -> int:
        return start_peer([node, everything_js, mode])

    return start

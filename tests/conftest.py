"""Core test configuration. Async tests run on anyio's pytest plugin; the asyncio backend
(``anyio_backend``), ``kxen_home`` and ``fakes`` come from kxen_testing.pytest_plugin (root conftest)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from remote_support import Peers


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace directory (canonical path); some test modules define their own."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path.resolve()


@pytest.fixture
def peers(sdk_peer: Callable[..., str], request: pytest.FixtureRequest) -> Peers:
    """Real peers for the remote tests: ``peers.sdk(mode)``, ``peers.everything(mode)`` -> (url, kind)."""
    return Peers(sdk_peer, request)


@pytest.fixture
def kx(kxen_home, ws, capsys, monkeypatch):
    """Run ``kxen --home H --workspace W ...`` in-process; return (exit code, stdout, stderr).

    Only the in-memory transport is loaded unless a test sets ``KXEN_LOAD_PLUGINS`` itself, so other
    installed plugins cannot change a result. ``ws`` is whichever workspace fixture the module uses.
    """
    from kxen_core.cli import command as cli

    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory")
    monkeypatch.delenv("KXEN_DISABLE_PLUGINS", raising=False)

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = cli.main(["--home", str(kxen_home.path), "--workspace", str(ws), *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run

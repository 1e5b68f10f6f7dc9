"""pytest fixtures for kxen (opt-in: ``pytest_plugins = ["kxen_testing.pytest_plugin"]`` in a
conftest.py at the root of your tests).

* ``anyio_backend`` -- ``"asyncio"``: tests marked ``pytest.mark.anyio`` (anyio's pytest plugin)
  run on asyncio. Override it in a conftest.py to run on other backends as well.
* ``kxen_home`` -- an empty ``KXEN_HOME`` with ``write_servers(dict)`` and ``write_settings(text)``;
  ``.path`` is the directory.
* ``fakes`` -- ``fakes.add(name, FakeServer(...))`` or ``fakes.add(name, tools=...)`` registers a fake
  server for the ``memory`` transport (see :func:`kxen_testing.mem`); all are cleared after the test.

The plain helpers that go with them (``mem``, ``running``, ``Channel``) are in
:mod:`kxen_testing.helpers` and exported from :mod:`kxen_testing`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .fake import FakeServer
from .memory import clear_fakes, register_fake


class Home:
    def __init__(self, path: Path) -> None:
        self.path = path

    def write_servers(self, servers: dict[str, Any]) -> Path:
        target = self.path / "mcp.json"
        target.write_text(json.dumps({"mcpServers": servers}))
        return target

    def write_settings(self, text: str) -> Path:
        target = self.path / "config.toml"
        target.write_text(text)
        return target


class Fakes:
    def add(self, name: str, server: FakeServer | None = None, **kwargs: Any) -> FakeServer:
        return register_fake(name, server if server is not None else FakeServer(**kwargs))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def kxen_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    home = tmp_path / "kxen-home"
    home.mkdir()
    monkeypatch.setenv("KXEN_HOME", str(home))
    return Home(home)


@pytest.fixture
def fakes():
    clear_fakes()
    yield Fakes()
    clear_fakes()

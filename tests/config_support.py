"""Helpers shared by the config-loading tests (test_config.py, test_config_properties.py)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from kxen_core.config import ServerConfig, load_config
from kxen_core.errors import ConfigError

#: every key a server entry may have
SERVER_FIELDS = {
    "command", "args", "env", "cwd", "url", "transport", "headers", "oauth", "options",
    "toolPolicies", "defaultToolPolicy", "enabled", "timeouts",
}  # fmt: skip


def shown(text: str) -> str:
    """How a problem line shows a key: characters that are not printable appear escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def write_json(home: Path, data: Any) -> Path:
    path = home / "mcp.json"
    path.write_text(json.dumps(data))
    return path


def problems_of(home: Path, workspace: Path, *, one_line: bool = True) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(home, workspace)
    assert info.value.problems, "a ConfigError must list at least one problem"
    if one_line:  # every problem is a single line
        for p in info.value.problems:
            assert "\n" not in p, p
    return info.value.problems


def load_entry(entry: Any, name: str = "srv") -> tuple[Path, ServerConfig | list[str]]:
    """Write one server entry to a fresh home; return (file, ServerConfig) or (file, problems)."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        ws = Path(tmp) / "ws"
        ws.mkdir()
        path = write_json(home, {"mcpServers": {name: entry}})
        try:
            return path, load_config(home, ws).servers[name]
        except ConfigError as exc:
            return path, exc.problems

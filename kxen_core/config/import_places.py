"""Where other MCP hosts keep their server definitions: ``kxen mcp import --from TOOL`` without a
file looks in these places, the workspace's file first, then the user's.

==================  ============================================================================
``claude-desktop``  ``claude_desktop_config.json`` in Claude's settings folder: ``~/Library/Application
                    Support/Claude`` (macOS), ``%APPDATA%\\Claude`` (Windows), ``$XDG_CONFIG_HOME/Claude``
                    or ``~/.config/Claude`` (Linux)
``claude-code``     ``<workspace>/.mcp.json``, then ``~/.claude.json`` (its user servers)
``cursor``          ``<workspace>/.cursor/mcp.json``, then ``~/.cursor/mcp.json``
``vscode``          ``<workspace>/.vscode/mcp.json``, then the user's ``mcp.json`` and ``settings.json``
                    in VS Code's ``User`` folder (``~/Library/Application Support/Code/User``,
                    ``%APPDATA%\\Code\\User``, ``~/.config/Code/User``)
``gemini``          ``<workspace>/.gemini/settings.json``, then ``~/.gemini/settings.json``
==================  ============================================================================
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path


def _app_dir(name: str, home: Path, environ: Mapping[str, str], platform: str) -> Path:
    """An application's settings folder on this platform."""
    if platform == "darwin":
        return home / "Library" / "Application Support" / name
    if platform.startswith("win"):
        return Path(environ.get("APPDATA") or home / "AppData" / "Roaming") / name
    return Path(environ.get("XDG_CONFIG_HOME") or home / ".config") / name


def usual_places(
    fmt: str,
    workspace: Path,
    *,
    home: Path | None = None,
    environ: Mapping[str, str] | None = None,
    platform: str = sys.platform,
) -> list[Path]:
    """The files ``fmt``'s tool reads its servers from, in the order kxen looks."""
    env = os.environ if environ is None else environ
    home = Path(home) if home is not None else Path.home()
    ws = Path(workspace)
    if fmt == "claude-desktop":
        return [_app_dir("Claude", home, env, platform) / "claude_desktop_config.json"]
    if fmt == "claude-code":
        return [ws / ".mcp.json", home / ".claude.json"]
    if fmt == "cursor":
        return [ws / ".cursor" / "mcp.json", home / ".cursor" / "mcp.json"]
    if fmt == "vscode":
        user = _app_dir("Code", home, env, platform) / "User"
        return [ws / ".vscode" / "mcp.json", user / "mcp.json", user / "settings.json"]
    if fmt == "gemini":
        return [ws / ".gemini" / "settings.json", home / ".gemini" / "settings.json"]
    raise ValueError(f"unknown format {fmt!r}")


def find_file(fmt: str, workspace: Path, **kwargs: object) -> tuple[Path | None, list[Path]]:
    """The first of :func:`usual_places` that exists (None when none does), and the places looked at."""
    places = usual_places(fmt, workspace, **kwargs)  # type: ignore[arg-type]
    for place in places:
        if place.is_file():
            return place, places
    return None, places


__all__ = ["find_file", "usual_places"]

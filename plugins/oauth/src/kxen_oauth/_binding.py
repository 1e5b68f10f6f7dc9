"""What a stored token is bound to: (config scope, server name, canonical resource URL, home).

The home is the kxen home the entry's config came from, as a resolved path: a user entry's is the
directory of its ``mcp.json`` (the file the loader read it from), a project entry's the home of the
runtime that loaded it. So a demo or test home (``kxen --home /tmp/demo``) never reads, refreshes
or signs out the sign-ins of another home, even with the same server name and URL, and both share
one data directory (``KXEN_DATA_DIR``). ``""`` is the home of an entry that names none (one built
by hand, with no runtime): a binding of its own, never another home's.
"""

from __future__ import annotations

import os
from pathlib import Path

from kxen_core import ServerConfig

from ._urls import UrlRefused, canonical_resource

#: (config scope, server name, canonical URL, home)
Key = tuple[str, str, str, str]


def home_of(server: ServerConfig, home: Path | str | None) -> str:
    """The home ``server``'s tokens are bound to: its user config file's directory, else the
    runtime's ``home``, else ``""``; resolved, so two spellings of one directory are one home."""
    if server.scope == "user" and server.source:
        return os.path.realpath(os.path.dirname(server.source))
    if home is not None and str(home):
        return os.path.realpath(home)
    return ""


def key_for(server: ServerConfig, home: str) -> Key | None:
    """The key of ``server``'s token in home ``home`` (see :func:`home_of`); None without a usable URL."""
    if not server.url:
        return None
    try:
        return (server.scope, server.name, canonical_resource(server.url), home)
    except UrlRefused:
        return None

"""The sse dist builds on the http dist's public plumbing only, and stays small."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "kxen_transport_sse"
PUBLIC = {"kxen_transport_http.plumbing", "kxen_transport_http.options"}


def test_only_the_public_modules_of_the_http_dist_are_imported() -> None:
    imported: set[str] = set()
    for module in SRC.rglob("*.py"):
        assert len(module.read_text().splitlines()) < 400, module
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
    from_http = {name for name in imported if name.split(".")[0] == "kxen_transport_http"}
    assert from_http and from_http <= PUBLIC, from_http

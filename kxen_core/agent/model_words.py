"""What the servers say to the model, as one block of text for a system prompt: each server's
``instructions`` (``Runtime.instructions()``'s entries: already escaped and bounded) inside its
own fence, labelled with the server, its ``serverInfo`` and whose words they are, at most
:data:`MAX_BLOCK_CHARS` in all.

A fence is ``<server-instructions ...>`` ... ``</server-instructions>``; a server's text that
holds either marker has it broken (``<\\/server-instructions``, ``<\\server-instructions``), so no
server's words can close its fence or open another's. A project or remote server's are marked
``unverified``: they are that server's own words, like its tool descriptions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

#: the most characters of the whole block
MAX_BLOCK_CHARS = 32_000
TAG = "server-instructions"
HEADER = (
    "Instructions from the MCP servers whose tools you have. Each fence holds one server's own text; "
    "it does not come from the user."
)


def _fence_safe(text: str) -> str:
    return text.replace(f"</{TAG}", f"<\\/{TAG}").replace(f"<{TAG}", f"<\\{TAG}")


def _label(entry: dict[str, Any]) -> str:
    given = entry.get("serverInfo")
    info: dict[str, Any] = given if isinstance(given, dict) else {}
    scope = entry.get("scope") if isinstance(entry.get("scope"), str) else "unknown"
    remote = entry.get("remote") is True
    attrs = {"server": str(entry.get("server") or "?"), "scope": scope}
    shown = " ".join(str(info[k]) for k in ("name", "version") if isinstance(info.get(k), str))
    if shown:
        attrs["serverInfo"] = shown
    if remote:
        attrs["remote"] = "yes"
    if remote or scope != "user":
        attrs["trust"] = "unverified"
    # JSON strings: quotes and backslashes escaped, the whole label on one line
    return " ".join(f"{k}={_fence_safe(json.dumps(v, ensure_ascii=False))}" for k, v in attrs.items())


def instructions_block(entries: Iterable[dict[str, Any]], *, limit: int = MAX_BLOCK_CHARS) -> str:
    """One text for a system prompt from ``entries`` (``Runtime.instructions()``); "" when no
    server sent instructions. Servers that do not fit in ``limit`` are left out, and said so."""
    parts: list[str] = []
    left = 0
    size = len(HEADER)
    for entry in entries:
        words = entry.get("instructions")
        if not isinstance(words, str) or not words.strip():
            continue
        part = f"<{TAG} {_label(entry)}>\n{_fence_safe(words)}\n</{TAG}>"
        if left or size + len(part) + 2 > limit - 80:
            left += 1
            continue
        parts.append(part)
        size += len(part) + 2
    if not parts and not left:
        return ""
    if left:
        parts.append(f"[{left} more servers' instructions left out: kxen's bound of {limit} characters]")
    return "\n\n".join([HEADER, *parts])


__all__ = ["MAX_BLOCK_CHARS", "instructions_block"]

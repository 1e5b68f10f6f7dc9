"""What the model sees: qualified tool names and bounded output."""

from __future__ import annotations

import json
from typing import Any

from .tool_names import SEPARATOR, model_name

#: the most characters of tool output handed to a model
OUTPUT_CAP_CHARS = 50_000


def qualified_name(server: str, tool: str) -> str:
    """The model-facing name of ``tool`` of ``server``: ``<server>__<tool>`` when that is provider-safe,
    else a stable shortened form (:func:`kxen_core.tool_names.model_name`)."""
    return model_name(server, tool)


def split_qualified(name: str) -> tuple[str, str]:
    """``server__tool`` -> (server, tool): the inverse of :func:`qualified_name` for every plain name.

    Server names never contain ``__`` and never end with ``_`` (:func:`~kxen_core.config.check_server_key`),
    so no ``__`` can start inside the server name: the first one is the separator. A shortened name
    gives its server and its shortened tool part: resolve it through the server's name map
    (``Runtime.call_tool`` does).
    """
    server, sep, tool = name.partition(SEPARATOR)
    if not sep or not server or not tool:
        raise ValueError(f"not a qualified tool name (expected <server>__<tool>): {name[:100]!r}")
    return server, tool


def result_text(result: dict[str, Any], cap: int = OUTPUT_CAP_CHARS) -> str:
    """Flatten a ``tools/call`` result to text for a model, capped at ``cap`` characters."""
    parts: list[str] = []
    size = 0
    for block in result.get("content") or ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            text = block["text"]
        elif kind in ("image", "audio"):
            text = f"[{kind} {block.get('mimeType', '?')}, {len(str(block.get('data', '')))} base64 chars]"
        elif kind == "resource_link":
            text = f"[resource {block.get('uri', '?')}]"
        elif kind == "resource":
            res = block.get("resource") or {}
            text = res.get("text") if isinstance(res.get("text"), str) else f"[resource {res.get('uri', '?')}]"
        else:
            text = json.dumps(block)[:1000]
        parts.append(text)
        size += len(text)
        if size > cap:
            break
    if not parts and "structuredContent" in result:
        parts.append(json.dumps(result["structuredContent"]))
    text = "\n".join(parts)
    if len(text) > cap:
        text = text[:cap] + f"\n[output truncated at {cap} characters]"
    return text

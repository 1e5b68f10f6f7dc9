"""Resources and prompts of a kxen runtime in LangChain's shapes: ``Blob`` s and chat messages."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.documents.base import Blob
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

if TYPE_CHECKING:
    from kxen_core import Runtime


async def load_resource(runtime: Runtime, server: str, uri: str) -> list[Blob]:
    """Read ``uri`` of ``server`` (after kxen's policy votes on ``resources/read``) as one ``Blob``
    per content: its text, or its bytes decoded from base64, with its ``mimetype``; ``metadata``
    holds the ``server`` and the content's ``uri``. This is the host's view of a resource (the bytes
    themselves, as ``Runtime.fetch_resource`` gives them); the model reads resources through kxen's
    own ``kxen_read_resource`` tool, bounded. Raises what ``fetch_resource`` raises (``PolicyDenied``,
    ``ServerNotReady``, ...)."""
    contents = await runtime.fetch_resource(server, uri)
    return [
        Blob.from_data(
            content.text if content.text is not None else (content.data or b""),
            mime_type=content.mime_type,
            metadata={"server": server, "uri": content.uri},
        )
        for content in contents
    ]


async def load_prompt(
    runtime: Runtime, server: str, name: str, arguments: Mapping[str, Any] | None = None
) -> list[BaseMessage]:
    """Get prompt ``name`` of ``server`` (checked before it is sent, as ``Runtime.get_prompt``
    checks it) as chat messages for the model: an ``assistant`` message as an ``AIMessage``, any other
    as a ``HumanMessage``, each content as the agent gets it -- text as it is, an embedded text
    resource after a ``[resource URI]`` line, binary contents as kxen's descriptors (never the
    bytes), secrets scrubbed.

    The whole prompt is held to the output bound (``[mcp] max_output_chars``) like every output the
    agent gets: a longer one raises ``ValueError`` naming its length and the bound, rather than
    handing the model half a conversation."""
    out = await runtime.get_prompt(server, name, arguments)
    if out.truncated or out.is_error:
        why = (
            f"is {out.original_chars} characters as the agent gets it, over the output bound of "
            f"{runtime.output_limit} ([mcp] max_output_chars)"
            if out.truncated
            else f"could not be read: {out.text[:300]}"
        )
        raise ValueError(f"prompt {name[:80]!r} of server {server[:40]!r} {why}")
    try:
        shown = json.loads(out.text)
    except ValueError:  # scrubbing a secret out of the JSON text broke its syntax
        raise ValueError(
            f"prompt {name[:80]!r} of server {server[:40]!r}: its text is not JSON once secrets are scrubbed"
        ) from None
    messages: list[BaseMessage] = []
    for message in shown.get("messages") or ():
        if not isinstance(message, dict):
            continue
        text = _text(message.get("content"))
        messages.append(AIMessage(content=text) if message.get("role") == "assistant" else HumanMessage(content=text))
    return messages


def _text(content: Any) -> str:
    """One prompt message's content as text, in the forms kxen shows the agent."""
    if not isinstance(content, dict):
        return "[a content that is not an object is not shown]"
    kind = content.get("type")
    if "binary" in content:  # kxen put a descriptor where the bytes were
        return f"[binary content not shown: {json.dumps(content['binary'], ensure_ascii=False)}]"
    if kind == "text" and isinstance(content.get("text"), str):
        return content["text"]
    resource = content.get("resource")
    if kind == "resource" and isinstance(resource, dict) and isinstance(resource.get("text"), str):
        return f"[resource {resource.get('uri') or '?'}]\n{resource['text']}"
    if kind == "resource_link":
        fields = ("uri", "name", "title", "description", "mimeType", "size")
        link = {k: content[k] for k in fields if k in content}
        return f"[resource link: {json.dumps(link, ensure_ascii=False)}]"
    shown = repr(kind[:40]) if isinstance(kind, str) else "without a type"
    return f"[a content {shown} is not shown]"


__all__ = ["load_prompt", "load_resource"]

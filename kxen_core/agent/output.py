"""What reaches the agent: every output rendered as text of at most N characters, binary never inlined.

One output bound holds for everything the agent gets -- a tool result (all its content blocks and
its ``structuredContent`` together), a resource read, a prompt result, a listing, an error text:
at most ``limit`` characters (the user setting ``[mcp] max_output_chars``, default
:data:`DEFAULT_OUTPUT_CHARS`). A longer output is cut and ends with a marker that says so and how
long the whole would have been.

The output is built with a running budget (:class:`Budget`): each piece is measured, and only what
still fits is kept (a slice, never the whole piece), so a 20 MiB result costs one pass over it and
about ``limit`` characters of memory, never a second copy of the result. JSON is written the same
way, in bounded chunks (:func:`json_pieces`); both live in :mod:`kxen_core.agent.budget`.

Binary contents -- image and audio blocks, embedded resources with a ``blob``, blob resource
contents, whatever their MIME type -- are never expanded: the agent gets a descriptor (server, tool
or URI, content index, MIME type, size in bytes from the base64 length) and the host gets the
bytes from :meth:`AgentOutput.binary_data` (or ``Runtime.fetch_resource``).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import attrs

from kxen_core.agent.budget import _SURROGATE, CUT_MARKER, Budget, base64_size, json_pieces
from kxen_core.errors import AuthRequired
from kxen_core.safe_text import Secrets

#: the most characters of one output handed to the agent, unless the user set another bound
DEFAULT_OUTPUT_CHARS = 50_000
#: at most this many binary descriptors are kept per output (the text shows every one it has room for)
MAX_BINARY_REFS = 10_000
#: MIME types longer than this are shortened in descriptors
MAX_MIME_CHARS = 200


@attrs.frozen(kw_only=True)
class BinaryRef:
    """A binary content the agent was not shown: where it is and what it is.

    ``path`` leads from the raw result to the object that holds the base64 ``field`` (``data`` for
    image and audio blocks, ``blob`` for resources).
    """

    server: str
    kind: str  # "image", "audio" or "blob"
    mime_type: str | None
    size: int | None  # bytes, from the base64 length
    path: tuple[str | int, ...]
    field: str
    uri: str | None = None
    tool: str | None = None

    def describe(self) -> dict[str, Any]:
        """The descriptor the agent sees."""
        out: dict[str, Any] = {"server": self.server}
        if self.tool is not None:
            out["tool"] = self.tool
        if self.uri is not None:
            out["uri"] = self.uri
        index = [p for p in self.path if isinstance(p, int)]
        if index:
            out["message" if self.path[0] == "messages" else "content"] = index[0]
        out.update(type=self.kind, mimeType=self.mime_type, bytes=self.size)
        return out


@attrs.define(kw_only=True)  # not frozen: made once per call, and a frozen init costs twice as much
class AgentOutput:
    """One output as the agent gets it: ``text`` (at most the bound) and ``is_error``; a value, not
    to be changed.

    ``binary`` lists the binary contents it describes instead of showing; ``raw`` is what the server
    sent (for the host: :meth:`binary_data` decodes a binary content from it).
    """

    text: str
    is_error: bool = False
    truncated: bool = False
    original_chars: int = 0
    binary: tuple[BinaryRef, ...] = ()
    raw: Any = attrs.field(default=None, repr=False, eq=False)

    def as_result(self) -> dict[str, Any]:
        """The agent's view as an MCP tool result: one text block and ``isError``."""
        return {"content": [{"type": "text", "text": self.text}], "isError": self.is_error}

    def binary_data(self, ref: BinaryRef | int) -> bytes:
        """The bytes of a binary content of this output (a :class:`BinaryRef` or its index in ``binary``).

        Raises ``ValueError`` when the server's base64 text is not valid."""
        if isinstance(ref, int):
            ref = self.binary[ref]
        node: Any = self.raw
        for step in ref.path:
            node = node[step]
        try:
            return base64.b64decode(node[ref.field], validate=True)
        except (binascii.Error, TypeError) as exc:
            raise ValueError(f"{ref.kind} content of server {ref.server!r} is not valid base64: {exc}") from None


def _build(budget: Budget, *, is_error: bool, refs: list[BinaryRef], raw: Any) -> AgentOutput:
    text, cut = budget.finish()
    return AgentOutput(
        text=text, is_error=is_error, truncated=cut, original_chars=budget.total, binary=tuple(refs), raw=raw
    )


def _mime(value: Any) -> str | None:
    return value[:MAX_MIME_CHARS] if isinstance(value, str) else None


def _describe(budget: Budget, refs: list[BinaryRef], ref: BinaryRef) -> None:
    if len(refs) < MAX_BINARY_REFS:
        refs.append(ref)
    budget.add("[binary content not shown: ")
    budget.add_json(ref.describe())
    budget.add("]")


def render_tool_result(result: Any, *, server: str, tool: str, limit: int = DEFAULT_OUTPUT_CHARS) -> AgentOutput:
    """A ``tools/call`` result as the agent gets it.

    Content blocks in order, one per line: text as it is; an embedded resource as a ``[resource
    URI]`` line and its text; a resource link as a line of JSON; image, audio and embedded blobs as
    descriptors; other block types named, not shown. ``structuredContent`` follows as JSON when no
    text block carries the result (a server that sends both puts the same data in the text)."""
    content = result.get("content") if type(result) is dict else None
    if type(content) is list and len(content) == 1:  # the common case, one short text: as it is
        block = content[0]
        text = block.get("text") if type(block) is dict and block.get("type") == "text" else None
        # an ASCII text holds no lone surrogate: str.isascii() is one flag read, the search a scan
        if type(text) is str and len(text) <= limit and (text.isascii() or not _SURROGATE.search(text)):
            return AgentOutput(text=text, is_error=result.get("isError") is True, original_chars=len(text), raw=result)
    budget = Budget(limit)
    refs: list[BinaryRef] = []
    if not isinstance(result, dict):
        budget.add("[the server's result is not an object]")
        return _build(budget, is_error=True, refs=refs, raw=result)
    blocks = content if isinstance(content, list) else []
    has_text = False
    for i, block in enumerate(blocks):
        if i:
            budget.add("\n")
        has_text = _block(budget, refs, block, ("content", i), server=server, tool=tool) or has_text
    structured = result.get("structuredContent")
    if not has_text and structured is not None:
        if blocks:
            budget.add("\n")
        budget.add_json(structured)
    return _build(budget, is_error=result.get("isError") is True, refs=refs, raw=result)


def _block(
    budget: Budget, refs: list[BinaryRef], block: Any, path: tuple[str | int, ...], *, server: str, tool: str
) -> bool:
    """Render one content block; True when it was text (or a text resource)."""
    index = path[-1]
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text" and isinstance(block.get("text"), str):
        budget.add(block["text"])
        return True
    if kind in ("image", "audio"):
        ref = BinaryRef(
            server=server,
            tool=tool,
            kind=str(kind),
            mime_type=_mime(block.get("mimeType")),
            size=base64_size(block.get("data")),
            path=path,
            field="data",
        )
        _describe(budget, refs, ref)
        return False
    if kind == "resource" and isinstance(block.get("resource"), dict):
        res = block["resource"]
        uri = res.get("uri") if isinstance(res.get("uri"), str) else None
        if isinstance(res.get("text"), str):
            budget.add("[resource ")
            budget.add(uri or "?")
            budget.add("]\n")
            budget.add(res["text"])
            return True
        ref = BinaryRef(
            server=server,
            tool=tool,
            uri=uri,
            kind="blob",
            mime_type=_mime(res.get("mimeType")),
            size=base64_size(res.get("blob")),
            path=(*path, "resource"),
            field="blob",
        )
        _describe(budget, refs, ref)
        return False
    if kind == "resource_link" and isinstance(block, dict):
        budget.add("[resource link: ")
        budget.add_json(
            {k: block[k] for k in ("uri", "name", "title", "description", "mimeType", "size") if k in block}
        )
        budget.add("]")
        return False
    shown = repr(kind[:40]) if isinstance(kind, str) else "without a type"
    budget.add(f"[content {index}: a block {shown} is not shown]")
    return False


def render_read(result: Any, *, server: str, uri: str, limit: int = DEFAULT_OUTPUT_CHARS) -> AgentOutput:
    """A ``resources/read`` result as the agent gets it.

    One text content comes back as its text. Several contents each start with a ``[resource URI
    (MIME type)]`` line. Blob contents (any MIME type) are descriptors."""
    budget = Budget(limit)
    refs: list[BinaryRef] = []
    contents = result.get("contents") if isinstance(result, dict) else None
    if not isinstance(contents, list):
        budget.add("[the server's read result has no contents list]")
        return _build(budget, is_error=True, refs=refs, raw=result)
    alone = len(contents) == 1
    for i, item in enumerate(contents):
        if i:
            budget.add("\n")
        if not isinstance(item, dict):
            budget.add(f"[content {i}: not an object]")
            continue
        given = item.get("uri")
        item_uri: str = given if isinstance(given, str) else uri
        if isinstance(item.get("text"), str):
            if not alone:
                budget.add("[resource ")
                budget.add(item_uri)
                mime = _mime(item.get("mimeType"))
                budget.add(f" ({mime})]\n" if mime else "]\n")
            budget.add(item["text"])
            continue
        ref = BinaryRef(
            server=server,
            uri=item_uri,
            kind="blob",
            mime_type=_mime(item.get("mimeType")),
            size=base64_size(item.get("blob")),
            path=("contents", i),
            field="blob",
        )
        _describe(budget, refs, ref)
    return _build(budget, is_error=False, refs=refs, raw=result)


def render_prompt(result: Any, *, server: str, name: str, limit: int = DEFAULT_OUTPUT_CHARS) -> AgentOutput:
    """A ``prompts/get`` result as the agent gets it: JSON ``{"description", "messages"}`` with
    every image, audio or blob content replaced by its descriptor (``{"type", "binary": {...}}``)."""
    budget = Budget(limit)
    refs: list[BinaryRef] = []
    if not isinstance(result, dict):
        budget.add("[the server's prompt result is not an object]")
        return _build(budget, is_error=True, refs=refs, raw=result)
    messages = result.get("messages")
    shown: list[Any] = []
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, dict):
            content = _prompt_content(content, refs, ("messages", i, "content"), server=server, name=name)
            message = {**message, "content": content}
        shown.append(message)
    out: dict[str, Any] = {}
    if "description" in result:
        out["description"] = result["description"]
    out["messages"] = shown
    budget.add_json(out)
    return _build(budget, is_error=False, refs=refs, raw=result)


def _prompt_content(
    content: dict[str, Any], refs: list[BinaryRef], path: tuple[str | int, ...], *, server: str, name: str
) -> Any:
    kind = content.get("type")
    if kind in ("image", "audio"):
        ref = BinaryRef(
            server=server,
            tool=None,
            kind=str(kind),
            mime_type=_mime(content.get("mimeType")),
            size=base64_size(content.get("data")),
            path=path,
            field="data",
        )
    elif kind == "resource" and isinstance(content.get("resource"), dict) and "blob" in content["resource"]:
        res = content["resource"]
        ref = BinaryRef(
            server=server,
            uri=res.get("uri") if isinstance(res.get("uri"), str) else None,
            kind="blob",
            mime_type=_mime(res.get("mimeType")),
            size=base64_size(res.get("blob")),
            path=(*path, "resource"),
            field="blob",
        )
    else:
        return content
    if len(refs) < MAX_BINARY_REFS:
        refs.append(ref)
    return {"type": kind, "binary": {**ref.describe(), "prompt": name, "shown": False}}


def render_json(value: Any, *, limit: int = DEFAULT_OUTPUT_CHARS, is_error: bool = False) -> AgentOutput:
    """Any JSON value (a listing kxen built) as the agent gets it."""
    budget = Budget(limit)
    budget.add_json(value)
    return _build(budget, is_error=is_error, refs=[], raw=value)


def render_error(message: str, *, limit: int = DEFAULT_OUTPUT_CHARS) -> AgentOutput:
    """An error text as the agent gets it (``is_error``)."""
    budget = Budget(limit)
    budget.add(message)
    return _build(budget, is_error=True, refs=[], raw=None)


def error_output(exc: BaseException, *, limit: int = DEFAULT_OUTPUT_CHARS) -> AgentOutput:
    """A kxen error as the agent gets it: ``Type: message``, within the bound -- the error's short
    ``for_agent`` reason where it has one (a denial: no host path, fingerprint or command line for
    the model; the person's next step stays in the message, for the CLI and the host); an
    ``AuthRequired`` also names what a person does about it (``next: kxen mcp login NAME``), which
    the agent can relay."""
    text = f"{type(exc).__name__}: {getattr(exc, 'for_agent', None) or exc}"
    if isinstance(exc, AuthRequired) and exc.next_step:
        text += f" (next: {exc.next_step})"
    return render_error(text, limit=limit)


def scrubbed(out: AgentOutput, secrets: Secrets | None) -> AgentOutput:
    """``out`` with every value of ``secrets`` (what kxen holds as secret: ``Runtime.secrets``)
    replaced by ``***`` in its text; in a cut text, a secret's first characters just before the cut
    too. The text only gets shorter, so the bound holds. ``raw`` (the host's) is left as it came."""
    if not secrets:
        return out
    cut = out.text.rfind(CUT_MARKER) if out.truncated else -1
    text = secrets.cut_text(out.text, cut) if cut >= 0 else secrets.text(out.text)
    return out if text == out.text else attrs.evolve(out, text=text)


__all__ = [
    "DEFAULT_OUTPUT_CHARS",
    "AgentOutput",
    "BinaryRef",
    "Budget",
    "base64_size",
    "error_output",
    "json_pieces",
    "render_error",
    "render_json",
    "render_prompt",
    "render_read",
    "render_tool_result",
    "scrubbed",
]

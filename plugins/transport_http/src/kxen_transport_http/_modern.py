"""The headers of the stateless era (MCP 2026-07-28) on every POST: ``MCP-Protocol-Version`` (equal to
the request's ``_meta`` version), ``Mcp-Method``, ``Mcp-Name`` (the tool or prompt name, the resource
URI) and ``Mcp-Param-<Name>`` for each tool argument whose input-schema property carries
``x-mcp-header``.

The core says what a request is through the message itself: a request whose ``params._meta`` holds
the protocol version is a stateless-era request, and from then on the connection is one (its
notifications get the headers too). The ``x-mcp-header`` annotations are read from the ``tools/list``
answers as they pass through; a tool whose annotations break the rules is dropped from the catalog by
the plugin's ``kxen_catalog_page`` verdict (:func:`invalid_header`), so it is never called.

Values that would not survive as a header (non-ASCII, control characters, leading or trailing
whitespace, or a value that looks like the encoding itself) are sent as ``=?base64?<UTF-8 in
base64>?=``.

What is mirrored is bounded on the client side: each ``Mcp-Name`` / ``Mcp-Param-*`` value, as sent,
at most ``options.maxHeaderValueBytes`` (4096), and the mirrored headers together (``Mcp-Method``,
``Mcp-Name``, ``Mcp-Param-*``, names and values) at most ``options.maxMirroredHeaderBytes`` (8192),
below what common servers and proxies accept (8-16 KiB of headers in all). The 2026-07-28 revision
sets no size limit, lets a client impose its own, and requires every mirrored header whose value
is in the body -- a server must reject a request that leaves one out (SEP-2243: "No
Specification-Level Header Size Limit"). So a request over a bound is not sent without the header,
nor cut: it fails before anything is sent with :class:`HeaderTooLarge`, naming the header, the
argument it mirrors, its size, the bound and the option.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping
from typing import Any

import httpx

from kxen_core import RequestFailed
from kxen_core.errors import HTTPStatusError, InvalidArguments

META_VERSION = "io.modelcontextprotocol/protocolVersion"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"
PARAM_PREFIX = "Mcp-Param-"
VERSION_HEADER = "MCP-Protocol-Version"
X_MCP_HEADER = "x-mcp-header"
#: the params key each named method mirrors into ``Mcp-Name``
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
#: the property types an ``x-mcp-header`` may sit on (a number has no portable text form)
HEADER_TYPES = frozenset({"string", "integer", "boolean"})
#: the most tools whose header maps are kept, the most annotations per tool, the deepest path walked
MAX_TOOLS = 10_000
MAX_PARAMS = 64
MAX_DEPTH = 16
#: the most ``tools/list`` requests watched at once (their answers teach the header maps)
MAX_WATCHED = 64
#: the default bounds of what is mirrored: one value, and every mirrored header together (the
#: ``maxHeaderValueBytes`` and ``maxMirroredHeaderBytes`` options)
HEADER_VALUE_BYTES = 4096
MIRRORED_HEADER_BYTES = 8192

_MIRRORED = frozenset({METHOD_HEADER.lower(), NAME_HEADER.lower()})
_PARAM = PARAM_PREFIX.lower()
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_PLAIN = re.compile(r"^[\x20-\x7E]*$")
_ENCODED = re.compile(r"^=\?base64\?.*\?=$")
#: schema keywords holding sub-schemas that are not reached through ``properties`` alone
_NESTED_ONE = (
    "items",
    "contains",
    "additionalProperties",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
)
_NESTED_MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
_NESTED_MAP = ("patternProperties", "dependentSchemas", "$defs", "definitions")


def encode_value(value: str) -> str:
    """``value`` as a header value: as is when it is plain printable ASCII without edge whitespace,
    else ``=?base64?...?=``."""
    if _PLAIN.match(value) and value == value.strip() and not _ENCODED.match(value):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


class HeaderTooLarge(InvalidArguments):
    """A stateless-era request whose mirrored headers would pass a bound: nothing was sent."""


def headers_refused(failed: RequestFailed, headers: httpx.Headers) -> RequestFailed:
    """A 431 (Request Header Fields Too Large) answer, with what kxen mirrored into the request's
    headers and the options that make kxen refuse such a request itself (the revision asks clients
    to handle 431 gracefully: the request fails alone, with its next step)."""
    error = failed.error
    if not isinstance(error, HTTPStatusError):
        return failed
    mirrored = [(k, v) for k, v in headers.items() if k.lower() in _MIRRORED or k.lower().startswith(_PARAM)]
    if not mirrored:
        return failed
    size = sum(len(k) + len(v) for k, v in mirrored)
    largest = max(len(v) for _, v in mirrored)
    hint = (
        f"{error}: the server or a proxy refused the request's headers; kxen mirrored {size:,} bytes into "
        f"Mcp-Method/Mcp-Name/Mcp-Param-* (the largest value {largest:,} bytes): lower options."
        "maxHeaderValueBytes and options.maxMirroredHeaderBytes to what it accepts, and kxen refuses such "
        "calls itself, before sending them"
    )
    return RequestFailed(failed.id, HTTPStatusError(hint, status=error.status, body=error.body, server=error.server))


def _positions(schema: Any) -> Iterator[tuple[tuple[str, ...] | None, dict[str, Any]]]:
    """Every sub-schema of ``schema`` with its path of ``properties`` keys (None once the walk left
    ``properties``); never follows ``$ref``, bounded in depth and count."""
    stack: list[tuple[tuple[str, ...] | None, Any, int]] = [((), schema, 0)]
    seen = 0
    while stack and seen < 10_000:
        path, node, depth = stack.pop()
        if not isinstance(node, dict) or depth > MAX_DEPTH:
            continue
        seen += 1
        yield path, node
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    stack.append(((*path, name) if path is not None else None, sub, depth + 1))
            elif key in _NESTED_ONE:
                stack.append((None, value, depth + 1))
            elif key in _NESTED_MANY and isinstance(value, list):
                stack.extend((None, sub, depth + 1) for sub in value)
            elif key in _NESTED_MAP and isinstance(value, dict):
                stack.extend((None, sub, depth + 1) for sub in value.values())


def invalid_header(schema: Any) -> str | None:
    """Why a tool's ``inputSchema`` annotations cannot be mirrored into headers, or None: each
    ``x-mcp-header`` must sit on a property reached through ``properties`` alone, name a non-empty
    HTTP token, be on a string, integer or boolean property, and be unique ignoring case."""
    seen: set[str] = set()
    for path, node in _positions(schema):
        if X_MCP_HEADER not in node:
            continue
        header = node[X_MCP_HEADER]
        where = ".".join(path)[:80] if path else "(not a property)"
        if not path:
            return f"{X_MCP_HEADER} outside a plain properties path"
        if not isinstance(header, str) or not header:
            return f"{X_MCP_HEADER} of {where!r} must be a non-empty string"
        if not _TOKEN.match(header):
            return f"{X_MCP_HEADER} of {where!r} is not an HTTP header name token"
        if node.get("type") not in HEADER_TYPES:
            return f"{X_MCP_HEADER} of {where!r} is on a property that is not a string, integer or boolean"
        if header.lower() in seen:
            return f"{X_MCP_HEADER} {header[:40]!r} appears twice (ignoring case)"
        seen.add(header.lower())
        if len(seen) > MAX_PARAMS:
            return f"more than {MAX_PARAMS} {X_MCP_HEADER} annotations"
    return None


def header_map(schema: Any) -> dict[tuple[str, ...], str]:
    """The argument paths a valid schema mirrors, with their header names."""
    return {
        path: node[X_MCP_HEADER]
        for path, node in _positions(schema)
        if path and isinstance(node.get(X_MCP_HEADER), str)
    }


def _rendered(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # past the interpreter's digit limit
            return None
    return None


def _at(arguments: Any, path: tuple[str, ...]) -> Any:
    node = arguments
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


class ModernHeaders:
    """The stateless-era headers of one connection; ``max_value`` and ``max_total`` bound what is
    mirrored (see the module docstring)."""

    def __init__(
        self, *, max_value: int = HEADER_VALUE_BYTES, max_total: int = MIRRORED_HEADER_BYTES, server: str = ""
    ) -> None:
        self.max_value = max_value
        self.max_total = max_total
        self.server = server
        #: the protocol version of the last stateless-era request (None: the handshake era)
        self.version: str | None = None
        self._params: dict[str, dict[tuple[str, ...], str]] = {}
        self._lists: set[Any] = set()

    @property
    def watching(self) -> bool:
        return bool(self._lists)

    def headers_for(self, message: Mapping[str, Any], base: httpx.Headers) -> httpx.Headers:
        """``base`` (never changed: it may be shared) with the era's headers for POSTing ``message``;
        raises :class:`HeaderTooLarge` (and changes nothing) when a mirrored header passes a bound."""
        method = message.get("method")
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(META_VERSION) if isinstance(meta, dict) else None
        if "id" in message:  # a request says which era the connection speaks now
            self.version = version if isinstance(version, str) else None
        if self.version is None or not isinstance(method, str):
            return base
        # (header, value as sent, what it mirrors): checked against the bounds before anything is set
        mirrored: list[tuple[str, str, str]] = [(METHOD_HEADER, encode_value(method), "the method")]
        key = NAMED.get(method)
        name = params.get(key) if key is not None and isinstance(params, dict) else None
        if isinstance(name, str):
            mirrored.append((NAME_HEADER, encode_value(name), f"params.{key}"))
        if method == "tools/call" and isinstance(name, str) and isinstance(params, dict):
            for path, header in self._params.get(name, {}).items():
                value = _rendered(_at(params.get("arguments"), path))
                if value is not None:
                    mirrored.append((PARAM_PREFIX + header, encode_value(value), "argument " + ".".join(path)))
        self._check(method, name, mirrored)
        headers = httpx.Headers(base)
        headers[VERSION_HEADER] = encode_value(version if isinstance(version, str) else self.version)
        for header, value, _ in mirrored:
            headers[header] = value
        return headers

    def _check(self, method: str, name: Any, mirrored: list[tuple[str, str, str]]) -> None:
        what = f"{method} {name[:80]!r}" if isinstance(name, str) else method
        rule = (
            "the 2026-07-28 revision requires the header whenever its value is in the request, so it was "
            "not sent (nothing was): pass a shorter value, or raise the bound if the server and everything "
            "between accept longer headers"
        )
        for header, value, source in mirrored:
            if len(value) > self.max_value:
                raise HeaderTooLarge(
                    f"{what}: {source[:80]} would be a {len(value):,}-byte {header[:80]} header, over kxen's bound "
                    f"of {self.max_value:,} bytes a header (options.maxHeaderValueBytes of server "
                    f"{self.server!r}); {rule}"
                )
        total = sum(len(header) + len(value) for header, value, _ in mirrored)
        if total > self.max_total:
            raise HeaderTooLarge(
                f"{what}: its {len(mirrored)} mirrored headers (Mcp-Method, Mcp-Name, Mcp-Param-*) would be "
                f"{total:,} bytes, over kxen's bound of {self.max_total:,} bytes in all (options."
                f"maxMirroredHeaderBytes of server {self.server!r}); {rule}"
            )

    def watch(self, method: str, rid: Any) -> None:
        """Remember a ``tools/list`` request: its answer names the tools' header annotations."""
        if method == "tools/list" and self.version is not None and len(self._lists) < MAX_WATCHED:
            self._lists.add(rid)

    def note(self, message: Any) -> None:
        """Look at a message from the server: the answer to a watched ``tools/list`` teaches the
        header maps of its tools (a later page adds to them; the first page starts afresh)."""
        if type(message) is not dict or "method" in message:
            return
        rid = message.get("id")
        if rid not in self._lists:
            return
        self._lists.discard(rid)
        result = message.get("result")
        tools = result.get("tools") if isinstance(result, dict) else None
        if not isinstance(tools, list):
            return
        for tool in tools[:MAX_TOOLS]:
            name = tool.get("name") if isinstance(tool, dict) else None
            if not isinstance(name, str):
                continue
            schema = tool.get("inputSchema")
            mapping = header_map(schema) if invalid_header(schema) is None else {}
            if mapping:
                if len(self._params) < MAX_TOOLS or name in self._params:
                    self._params[name] = mapping
            else:
                self._params.pop(name, None)


__all__ = [
    "HEADER_VALUE_BYTES",
    "MIRRORED_HEADER_BYTES",
    "HeaderTooLarge",
    "ModernHeaders",
    "encode_value",
    "header_map",
    "headers_refused",
    "invalid_header",
]

"""What the audit trail writes about a call instead of its values: the arguments' shape, the
result's size, the error's class, the tool's pin and the server's identity
(:mod:`kxen_core.policy.audit`).

The shape is JSON text made on the event loop, before the call returns (the host may change the
arguments afterwards), from key names and types only: no value is ever encoded. Key names are
shape and are kept, cut to :data:`MAX_KEY_CHARS`; a key holding a secret kxen holds or a
credential's shape is written :data:`SECRET_KEY`. Each key's written form is kept (:class:`Keys`),
so a call whose keys were seen before costs a dict lookup per key.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kxen_core.config.models import ServerConfig

#: the shape's bounds: nesting shown, keys and items shown in all, characters of a key shown
MAX_DEPTH = 4
MAX_NODES = 32
MAX_KEY_CHARS = 40
#: what a key holding a secret (or a credential's shape) is written as
SECRET_KEY = "<secret>"
#: what a tool's definition is, for its pin (the fields of a ``tools/list`` item that describe it)
DEFINITION = ("name", "title", "description", "inputSchema", "outputSchema", "annotations", "execution")
#: the most values of a result looked at for its size
MAX_RESULT_NODES = 2000
CACHE_MOST = 4096
#: a key shorter than this holds no secret kxen looks for (argument_guard.MIN_SECRET_CHARS) nor a
#: credential's shape (the shortest is longer)
_SHORT_KEY = 8
#: the written shape of a scalar argument, by its type (a string's is its length)
_SCALARS: dict[type, str] = {int: '"int"', float: '"float"', bool: '"bool"', type(None): '"null"'}


def pin_digest(tool_info: dict[str, Any]) -> str:
    """The SHA-256 of a tool's definition as listed: its :data:`DEFINITION` fields, as canonical
    JSON (:func:`kxen_core.launch.canonical.fingerprint`: key order and spacing do not matter)."""
    from kxen_core.launch.canonical import fingerprint

    return fingerprint({k: tool_info[k] for k in DEFINITION if k in tool_info})


def identity(server: ServerConfig, launch: Any) -> dict[str, Any]:
    """:func:`kxen_core.policy.approvals.server_identity` as the trail writes it: a remote URL that
    took variables or has a query as a digest (with the URL ``shown``, query values hidden)."""
    import hashlib
    from urllib.parse import urlsplit

    from kxen_core.policy.approvals import server_identity
    from kxen_core.safe_text import shown_url

    found = server_identity(server, launch)
    url = found.get("url")
    if url is not None:
        try:
            query = urlsplit(url).query
        except ValueError:
            query = url
        if query or any(e.path == "url" for e in getattr(server, "expanded", ())):
            found["url"] = "sha256:" + hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()
            found["shown"] = shown_url(server)
    return found


class Keys:
    """How each key of the arguments is written (itself cut, or :data:`SECRET_KEY`), kept per
    secrets object: ``(shown, its JSON, whether it differs from the key)``."""

    def __init__(self) -> None:
        self._known: dict[Any, tuple[str, str, bool]] = {}
        self._for: Any = None

    def get(self, key: Any, secrets: Any) -> tuple[str, str, bool]:
        if secrets is not self._for or len(self._known) >= CACHE_MOST:
            self._known, self._for = {}, secrets
        known = self._known.get(key) if type(key) is str else None
        if known is None:
            known = self._known[key] = self._written(key, secrets) if type(key) is str else self._other(key)
        return known

    @staticmethod
    def _other(key: Any) -> tuple[str, str, bool]:
        shown = f"<{type(key).__name__}>"
        return shown, json.dumps(shown), True

    @staticmethod
    def _written(key: str, secrets: Any) -> tuple[str, str, bool]:
        shown = key
        if len(key) >= _SHORT_KEY:
            from kxen_core.policy.argument_guard import found

            if found(key, secrets) is not None:
                shown = SECRET_KEY
            elif len(key) > MAX_KEY_CHARS:
                shown = key[:MAX_KEY_CHARS] + "…"
        return shown, json.dumps(shown), shown != key


def shape(keys: Keys, arguments: Any, secrets: Any) -> tuple[str, bool]:
    """The shape of ``arguments`` as JSON text, and whether it was cut: an object's keys with the
    shape of each value, an array as ``["array:N", <its first item's shape>]``, a string as
    ``"str:N"`` (N characters), ``"int"``, ``"float"``, ``"bool"``, ``"null"``; below
    :data:`MAX_DEPTH` levels, or past :data:`MAX_NODES` keys and items in all, an object is
    ``"object:N"`` (N keys) and an array ``"array:N"``. Never a value: the text is made of the
    keys' JSON and these words."""
    if type(arguments) is dict and len(arguments) <= MAX_NODES:  # most calls: flat, their keys seen before
        parts: list[str] = []
        for key, value in arguments.items():
            _, written, altered = keys.get(key, secrets)
            kind = type(value)
            scalar = f'"str:{len(value)}"' if kind is str else _SCALARS.get(kind)
            if scalar is None or altered:  # nested, or a key cut or masked: the walk below
                break
            parts.append(f"{written}:{scalar}")
        else:
            return "{" + ",".join(parts) + "}", False
    budget = [MAX_NODES]
    cut = [False]

    def walk(value: Any, depth: int) -> str:
        kind = type(value)
        if kind is str:
            return f'"str:{len(value)}"'
        scalar = _SCALARS.get(kind)
        if scalar is not None:
            return scalar
        if isinstance(value, dict):
            if depth >= MAX_DEPTH or budget[0] <= 0:
                cut[0] = cut[0] or bool(value)
                return f'"object:{len(value)}"'
            parts: list[str] = []
            seen: set[str] | None = None
            for key, item in value.items():
                if budget[0] <= 0:
                    cut[0] = True
                    break
                budget[0] -= 1
                shown, written, altered = keys.get(key, secrets)
                if altered:  # cut or masked: two keys may now be written alike
                    seen = seen if seen is not None else {keys.get(k, secrets)[0] for k in value if k != key}
                    if shown in seen:
                        shown = f"{shown}#{len(parts)}"
                        written = json.dumps(shown)
                    seen.add(shown)
                parts.append(f"{written}:{walk(item, depth + 1)}")
            return "{" + ",".join(parts) + "}"
        if isinstance(value, (list, tuple)):
            if not value:
                return '"array:0"'
            if depth >= MAX_DEPTH or budget[0] <= 0:
                cut[0] = True
                return f'"array:{len(value)}"'
            budget[0] -= 1
            return f'["array:{len(value)}",{walk(value[0], depth + 1)}]'
        return json.dumps(kind.__name__)

    return walk(arguments, 0), cut[0]


def result_size(result: Any) -> str:
    """``{"chars":N,"items":K}`` as JSON text: the characters of every string value of a result
    (keys not counted; at most :data:`MAX_RESULT_NODES` values looked at, then ``"cut":true``), and
    the items of its ``content`` (``contents`` of a read, ``messages`` of a prompt)."""
    chars, looked = 0, 0
    stack = [result]
    while stack:
        node = stack.pop()
        looked += 1
        if looked > MAX_RESULT_NODES:
            return f'{{"chars":{chars},"items":{_items(result)},"cut":true}}'
        for value in node.values() if isinstance(node, dict) else node if isinstance(node, list) else (node,):
            if type(value) is str:
                chars += len(value)
            elif isinstance(value, (dict, list)) and value is not node:
                stack.append(value)
    return f'{{"chars":{chars},"items":{_items(result)}}}'


def _items(result: Any) -> str:
    if isinstance(result, dict):
        for field in ("content", "contents", "messages"):
            if isinstance(result.get(field), list):
                return str(len(result[field]))
    return "null"


def error_class(exc: BaseException) -> dict[str, Any]:
    """``{"type": <the exception's class>, "kxen": <its class under KxenError>, "code": N}`` (the
    kxen class for kxen's errors, the code for a JSON-RPC error); never the message."""
    from kxen_core.errors import KxenError

    out: dict[str, Any] = {"type": type(exc).__name__}
    if isinstance(exc, KxenError):
        mro = type(exc).__mro__
        at = mro.index(KxenError)
        out["kxen"] = (mro[at - 1] if at > 0 else KxenError).__name__
        code = getattr(exc, "code", None)
        if type(code) is int:
            out["code"] = code
    return out


__all__ = ["Keys", "SECRET_KEY", "error_class", "identity", "pin_digest", "result_size", "shape"]

"""Resources, resource templates and prompts of ready servers: catalog views, reads and prompt gets.

The host's view (``Runtime.resources``, ``resource_templates``, ``prompts``) lists what kxen holds:
every item as the server sent it, with its ``server``. ``resources`` pages with an opaque kxen
cursor over all servers' items (server order, then catalog order).

What sends something -- ``resources/read`` and ``prompts/get`` -- goes through the policy votes
first, like a tool call, under the method's name (``toolPolicies: {"resources/read": "deny"}``
switches reads of that server off). A prompt call is checked before anything is sent: the prompt
exists, every required argument is there, no unknown argument is given, and every value is a string.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from kxen_core.errors import InvalidArguments, ProtocolError, ServerNotReady, UnknownTool
from kxen_core.policy import ToolCall
from kxen_core.policy.approvals import authorize
from kxen_core.protocol.catalog import CAPABILITY
from kxen_core.runtime.states import State

if TYPE_CHECKING:
    from kxen_core.config import Config
    from kxen_core.plugins.manager import KxenPluginManager
    from kxen_core.policy.approvals import Approvals
    from kxen_core.runtime.server import Server

#: a cursor kxen hands out: this prefix, then the offset (base64 of both, so it stays opaque)
_CURSOR_PREFIX = "kxen:"
MAX_URI_CHARS = 8192


@attrs.frozen(kw_only=True)
class ResourceContent:
    """One content of a resource read, for the host: ``text``, or ``data`` decoded from base64."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    data: bytes | None = None


def declares(server: Server, capability: str) -> bool:
    """Whether ``server`` is ready and declared ``capability`` when it was initialized."""
    session = server.session
    if server.state != State.READY or session is None or session.initialized is None:
        return False
    return capability in session.initialized.capabilities


Pair = tuple[str, dict[str, Any]]  # (server name, catalog item as sent)


def pairs(servers: Iterable[Server], kind: str, server: str | None = None) -> list[Pair]:
    """Every item of catalog ``kind`` of the ready servers (or of ``server`` only), with its server's name."""
    out: list[Pair] = []
    for s in servers:
        if (server is not None and s.name != server) or not declares(s, CAPABILITY[kind]):
            continue
        catalog = s.catalogs.get(kind)
        out.extend((s.name, item) for item in (catalog.items if catalog is not None else ()))
    return out


def entry(pair: Pair) -> dict[str, Any]:
    """A catalog item as hosts see it: ``server`` first, then the item as sent."""
    name, item = pair
    return {"server": name, **{k: v for k, v in item.items() if k != "server"}}


def entries(servers: Iterable[Server], kind: str, server: str | None = None) -> list[dict[str, Any]]:
    """Every item of catalog ``kind`` of the ready servers (or of ``server`` only), each with its ``server``."""
    return [entry(p) for p in pairs(servers, kind, server)]


class Host(Protocol):
    """What these functions need of the runtime (``kxen_core.Runtime`` is one)."""

    servers: dict[str, Server]
    role: str | None
    config: Config | None
    pm: KxenPluginManager
    approvals: Approvals


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"{_CURSOR_PREFIX}{offset}".encode()).decode()


def decode_cursor(cursor: str | None) -> int:
    """The offset a kxen cursor stands for (0 for None); ``InvalidArguments`` for anything else."""
    if cursor is None:
        return 0
    problem = (
        f"invalid cursor {cursor[:80]!r}: pass a nextCursor kxen returned"
        if isinstance(cursor, str)
        else "cursor must be a string"
    )
    if not isinstance(cursor, str) or len(cursor) > 64:
        raise InvalidArguments(problem)
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("ascii")
    except (ValueError, UnicodeError):
        raise InvalidArguments(problem) from None
    number = text[len(_CURSOR_PREFIX) :]
    if not text.startswith(_CURSOR_PREFIX) or not number.isdigit() or len(number) > 9:
        raise InvalidArguments(problem)
    return int(number)


def check_limit(limit: Any, most: int | None = None) -> int | None:
    """``limit`` as a page size (None = no limit); ``InvalidArguments`` unless an integer >= 1 (<= ``most``)."""
    if limit is None:
        return None
    if type(limit) is not int or limit < 1 or (most is not None and limit > most):
        upper = f" to {most}" if most is not None else " or more"
        raise InvalidArguments(f"limit must be an integer from 1{upper}")
    return limit


def page(field: str, items: list[Pair], cursor: str | None, limit: int | None) -> dict[str, Any]:
    """``{field: items from the cursor on (at most limit), "nextCursor": C or None}`` (only the
    page's items are copied)."""
    start = decode_cursor(cursor)
    limit = check_limit(limit)
    end = len(items) if limit is None else min(len(items), start + limit)
    return {field: [entry(p) for p in items[start:end]], "nextCursor": encode_cursor(end) if end < len(items) else None}


def ready_with(rt: Host, name: Any, capability: str) -> Server:
    """The ready server ``name`` that declared ``capability``; a clear error otherwise."""
    if not isinstance(name, str) or not name:
        raise InvalidArguments("server must be a non-empty string (a configured server name)")
    server = rt.servers.get(name)
    if server is None:
        raise UnknownTool(f"no server named {name[:40]!r}")
    if server.state != State.READY or server.session is None:
        raise ServerNotReady(
            server.name, server.state.value, server.phase.value if server.phase else None, server.error
        )
    if not declares(server, capability):
        raise InvalidArguments(f"server {name!r} does not offer {capability} (it did not declare the capability)")
    return server


async def authorize_method(rt: Host, server: Server, method: str, arguments: dict[str, Any], note: Any = None) -> None:
    """The policy votes on a read-only method, as on a tool call named after the method (``note``:
    the audit trail's, told the decision)."""
    secrets = getattr(rt, "secrets", None)  # a URI or a prompt argument carries no secret out either
    if note is not None:
        note.begin(server.config, server.launch, method, None, arguments, rt.role, secrets, method=method)
    call = ToolCall(
        server=server.config,
        tool=method,
        arguments=arguments,
        role=rt.role,
        tool_info={"name": method, "annotations": {"readOnlyHint": True}},
        settings=rt.config.settings if rt.config else None,
        launch=server.launch,
        read_only_method=True,
        secrets=secrets,
    )
    await authorize(rt.pm, call, rt.approvals, note=note)


async def _sent(rt: Host, target: Server, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """``method`` with ``params`` to ``target`` after the policy votes (recorded in the audit trail
    when the runtime keeps one); the raw result."""
    trail = getattr(rt, "_audit", None)
    note = trail.note() if trail is not None else None
    try:
        await authorize_method(rt, target, method, params, note)
        session = target.session
        if session is None:  # stopped while the votes were counted
            raise ServerNotReady(target.name, target.state.value, None, target.error)
        if note is not None:
            note.sending()
        result = await session.request(method, params)
    except BaseException as exc:  # recorded, then raised as it was
        if note is not None:
            note.failed(exc)
        raise
    if note is not None:
        note.ended(result)
    return result


def _check_uri(uri: Any) -> str:
    if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_CHARS:
        raise InvalidArguments(f"uri must be a string of 1-{MAX_URI_CHARS} characters")
    return uri


async def read(rt: Host, server: Any, uri: Any) -> dict[str, Any]:
    """``resources/read`` of ``uri`` on ``server`` after the policy votes; the raw result."""
    target = ready_with(rt, server, "resources")
    uri = _check_uri(uri)
    return await _sent(rt, target, "resources/read", {"uri": uri})


def decode_contents(result: Mapping[str, Any], server: str, uri: str) -> list[ResourceContent]:
    """The contents of a read result, blobs decoded; ``ProtocolError`` for a malformed result."""
    contents = result.get("contents")
    if not isinstance(contents, list):
        raise ProtocolError(f"resources/read of {uri[:200]!r}: 'contents' is not a list", server=server)
    out = []
    for i, item in enumerate(contents):
        if not isinstance(item, dict):
            raise ProtocolError(f"resources/read of {uri[:200]!r}: contents[{i}] is not an object", server=server)
        given = item.get("uri")
        item_uri: str = given if isinstance(given, str) else uri
        mime = item.get("mimeType") if isinstance(item.get("mimeType"), str) else None
        if isinstance(item.get("text"), str):
            out.append(ResourceContent(uri=item_uri, mime_type=mime, text=item["text"]))
            continue
        try:
            data = base64.b64decode(item.get("blob"), validate=True)  # type: ignore[arg-type]
        except (binascii.Error, TypeError, ValueError):
            raise ProtocolError(
                f"resources/read of {uri[:200]!r}: contents[{i}] has neither text nor a base64 blob", server=server
            ) from None
        out.append(ResourceContent(uri=item_uri, mime_type=mime, data=data))
    return out


def check_prompt_call(server: Server, name: Any, arguments: Any) -> tuple[str, dict[str, str]]:
    """(name, arguments) when a ``prompts/get`` may be sent; else ``InvalidArguments`` naming every problem.

    The prompt must be in the server's catalog, every required argument present, none unknown, and
    every value a string."""
    if not isinstance(name, str) or not name:
        raise InvalidArguments("name must be a non-empty string (a prompt name)")
    catalog = server.catalogs.get("prompts")
    prompt = next((p for p in (catalog.items if catalog else ()) if p.get("name") == name), None)
    if prompt is None:
        raise InvalidArguments(f"server {server.name!r} has no prompt named {name[:80]!r}")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise InvalidArguments(f"prompt {name[:80]!r}: arguments must be an object of strings")
    declared = {a["name"]: a for a in prompt.get("arguments") or ()}
    problems = []
    missing = [n for n, a in declared.items() if a.get("required") is True and n not in arguments]
    if missing:
        problems.append("missing required argument(s): " + _names(missing))
    unknown = [k for k in arguments if k not in declared]
    if unknown:
        takes = _names(list(declared)) if declared else "none"
        problems.append(f"unknown argument(s): {_names(unknown)} (it takes: {takes})")
    wrong = [k for k, v in arguments.items() if k in declared and not isinstance(v, str)]
    if wrong:
        problems.append("argument values must be strings: " + _names(wrong))
    if problems:
        raise InvalidArguments(f"prompt {name[:80]!r} of server {server.name!r}: " + "; ".join(problems))
    return name, dict(arguments)


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(str(n)[:80]) for n in names[:10])
    return shown + (f" and {len(names) - 10} more" if len(names) > 10 else "")


async def get_prompt(rt: Host, server: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """``prompts/get`` after the checks and the policy votes; the raw result. Nothing is sent when
    a check fails."""
    target = ready_with(rt, server, "prompts")
    name, args = check_prompt_call(target, name, arguments)
    return await _sent(rt, target, "prompts/get", {"name": name, "arguments": args})


__all__ = [
    "ResourceContent",
    "check_limit",
    "check_prompt_call",
    "decode_contents",
    "declares",
    "decode_cursor",
    "encode_cursor",
    "entries",
    "entry",
    "pairs",
    "get_prompt",
    "page",
    "read",
]

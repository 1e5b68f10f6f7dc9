"""The Settings page over one :class:`kxen_core.Runtime`: routes, the live stream, the actions.

Every route is a thin call of the runtime's Settings API (``settings_snapshot``,
``settings_events``, ``answer_approval``, ``set_remote_enabled``, ``acknowledge_remote``,
``login_start`` / ``login_cancel`` / ``logout``, ``restart``, ``reload``, ``held_tools`` /
``pin_diff`` / ``accept_pin``, ``agent_call``): the page
adds nothing a host's own UI does not get from the API. :class:`kxen_settings_web.guard.Guard`
stands in front of every route.

=================================  =======================================================
``GET /``                          the page (``/?token=...``: the way in, see the guard)
``GET /events``                    server-sent events: ``render`` (the parts that changed)
``GET /api/snapshot``              the snapshot as JSON, and the tools offered
``POST /api/approvals/{id}``       ``{"approved": bool, "remember"?: str}``
``POST /api/servers/{name}/...``   ``restart``, ``login`` (answers ``url``, ``flowId``), ``logout``
``POST /api/logins/{id}/cancel``   cancel a sign-in
``POST /api/reload``               read the configuration again
``POST /api/remote``               ``{"enabled": bool, "acknowledge"?: [name]}``
``POST /api/remote/acknowledge``   ``{"names": [name]}``
``POST /api/pins/{name}/accept``   ``{"tool": str, "digest": str}``: accept the definition shown
``POST /api/call``                 ``{"tool": qualifiedName, "arguments": {...}}``: the agent's view
=================================  =======================================================

An action's answer is JSON: ``{"ok": true, ...}``, or a 4xx with ``{"error": text}`` (and
``problems`` for a refused config), escaped; nothing changes on a refused one.
"""

from __future__ import annotations

import json
import logging
import secrets
from pathlib import Path
from typing import Any

import anyio
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from kxen_core.errors import ApprovalDenied, ConfigError, InvalidArguments, KxenError, UnknownTool
from kxen_core.safe_text import safe_text
from kxen_settings_web import render
from kxen_settings_web.guard import Guard

log = logging.getLogger("kxen.settings_web")

#: the most live streams served at once (one per open tab)
MAX_STREAMS = 8
#: seconds the stream waits after a change for more before it renders (a burst is one update)
COALESCE_SECONDS = 0.05
#: seconds a slow reader may hold one event before its stream is dropped
SEND_SECONDS = 10.0
#: the first page waits at most this long for the runtime's first load (then shows "loading")
FIRST_PAGE_WAIT = 1.0


class _JSON(JSONResponse):
    """An answer's JSON with ``<``, ``>`` and ``&`` written as ``\\u`` escapes: a server's text in it
    (a tool's description, an error) never reads as markup, whatever opens the answer. It decodes
    to the same values."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode()


class SettingsPage:
    """The page's ASGI app (call it, or mount :attr:`app`), for ``runtime`` served at ``port`` on
    127.0.0.1. :attr:`url` is the way in (it holds :attr:`secret`, random per page unless given)."""

    def __init__(self, runtime: Any, *, port: int, secret: str | None = None) -> None:
        if not 1 <= port <= 65535:
            raise ValueError(f"port must be 1 to 65535 (got {port})")
        self.runtime = runtime
        self.port = port
        self.secret = secret or secrets.token_urlsafe(32)
        self._session = secrets.token_urlsafe(32)
        self._csrf = secrets.token_urlsafe(32)
        self._streams: set[Any] = set()
        self.closed = False
        static = Path(__file__).with_name("static")
        routes = [
            Route("/", self.page),
            Route("/events", self.events),
            Route("/api/snapshot", self.snapshot),
            Route("/api/approvals/{approval_id}", self.approval, methods=["POST"]),
            Route("/api/servers/{name}/{verb}", self.server_action, methods=["POST"]),
            Route("/api/logins/{flow_id}/cancel", self.cancel_login, methods=["POST"]),
            Route("/api/reload", self.reload, methods=["POST"]),
            Route("/api/remote", self.remote, methods=["POST"]),
            Route("/api/remote/acknowledge", self.acknowledge, methods=["POST"]),
            Route("/api/pins/{name}/accept", self.accept_pin, methods=["POST"]),
            Route("/api/call", self.call, methods=["POST"]),
            Mount("/static", StaticFiles(directory=static)),
        ]
        inner = Starlette(routes=routes, exception_handlers={KxenError: _kxen_error, Exception: _internal})
        self.app = Guard(inner, port=port, secret=self.secret, session=self._session, csrf=self._csrf)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?token={self.secret}"

    def close(self) -> None:
        """End every live stream (the page is going away)."""
        self.closed = True
        for sub in list(self._streams):
            sub.close()

    # --- what it shows ---------------------------------------------------------------------

    async def _context(self, wait: float = 0.0) -> dict[str, Any]:
        snap = await self.runtime.settings_snapshot(wait=wait)
        pins = self._with_diffs(snap.get("pins", [])[: render.MAX_PINS])
        return render.context(snap, self.runtime.tools(), workspace=str(self.runtime.workspace), pins=pins)

    def _with_diffs(self, held: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each held or changed tool with what changed (``diff``) and the digest of the definition
        shown (``digest``: what "Accept" accepts, nothing newer). A tool the store has nothing
        waiting for (unchecked: the store cannot be used) gets neither, and keeps its next step."""
        out = []
        for entry in held:
            row = dict(entry)
            try:
                shown = self.runtime.pin_diff(entry["server"], entry["tool"])
            except (KxenError, OSError):
                shown = None
            if shown is not None and isinstance(shown.get("listed"), str):
                row["diff"], row["digest"] = shown["diff"], shown["listed"]
            out.append(row)
        return out

    async def page(self, request: Request) -> Response:
        ctx = await self._context(wait=FIRST_PAGE_WAIT)
        return HTMLResponse(render.render_page(ctx, csrf=self._csrf))

    async def snapshot(self, request: Request) -> Response:
        ctx = await self._context()
        return _JSON({"snapshot": ctx["snap"], "tools": ctx["tools"]})

    async def events(self, request: Request) -> Response:
        if len(self._streams) >= MAX_STREAMS or self.closed:
            return _JSON({"error": f"at most {MAX_STREAMS} live pages at once"}, status_code=429)
        sub = self.runtime.settings_events(max_events=64)
        self._streams.add(sub)
        return EventSourceResponse(self._stream(sub), ping=15, send_timeout=SEND_SECONDS)

    async def _stream(self, sub: Any) -> Any:
        """The parts that changed, after each burst of changes (an overflow is one more change:
        the parts are rendered from a fresh snapshot either way)."""
        sent: dict[str, str] = {}
        try:
            while True:
                parts = render.render_parts(await self._context())
                changed = {k: v for k, v in parts.items() if sent.get(k) != v}
                sent = parts
                if changed:
                    yield {"event": "render", "data": json.dumps(changed)}
                if await sub.next() is None:
                    return
                await anyio.sleep(COALESCE_SECONDS)
                while sub.take() is not None:  # what came meanwhile is in the next snapshot
                    pass
        finally:
            sub.close()
            self._streams.discard(sub)

    # --- what it does ----------------------------------------------------------------------

    async def approval(self, request: Request) -> Response:
        body = await _object(request)
        approved = _field(body, "approved", bool)
        remember = _field(body, "remember", str, required=False)
        self.runtime.answer_approval(
            request.path_params["approval_id"],
            approved,
            remember=remember,
            reason="approved on the Settings page" if approved else "denied on the Settings page",
        )
        return _ok()

    async def server_action(self, request: Request) -> Response:
        await _object(request)
        name, verb = request.path_params["name"], request.path_params["verb"]
        rt = self.runtime
        if verb == "restart":
            await rt.restart(name)
            return _ok()
        if verb == "login":
            started = await rt.login_start(name, open_browser=True)
            return _ok(flowId=started.flow_id, url=started.url, server=started.server)
        if verb == "logout":
            return _ok(removed=await rt.logout(name))
        return _JSON({"error": f"no action {safe_text(verb[:40])!r} (restart, login, logout)"}, status_code=404)

    async def cancel_login(self, request: Request) -> Response:
        await _object(request)
        await self.runtime.login_cancel(request.path_params["flow_id"])
        return _ok()

    async def reload(self, request: Request) -> Response:
        await _object(request)
        await self.runtime.reload()
        return _ok()

    async def remote(self, request: Request) -> Response:
        body = await _object(request)
        enabled = _field(body, "enabled", bool)
        names = _names(body, "acknowledge", required=False)
        # the page asked the person, per server, with the snapshot's question: that is the confirmation
        now = await self.runtime.set_remote_enabled(enabled, acknowledge=names or [], confirmed=True)
        return _ok(enabled=now)

    async def acknowledge(self, request: Request) -> Response:
        body = await _object(request)
        names = _names(body, "names")
        if not names:
            raise InvalidArguments("names: tick at least one remote server to confirm")
        await self.runtime.acknowledge_remote(names, confirmed=True)
        return _ok()

    async def accept_pin(self, request: Request) -> Response:
        body = await _object(request)
        tool = _field(body, "tool", str)
        digest = _field(body, "digest", str)
        # bound to the digest the page showed: a definition that changed since is not accepted
        accepted = await self.runtime.accept_pin(request.path_params["name"], tool, digest=digest)
        return _ok(accepted=accepted)

    async def call(self, request: Request) -> Response:
        body = await _object(request)
        tool = _field(body, "tool", str)
        arguments = body.get("arguments", {})
        if not isinstance(arguments, dict):
            raise InvalidArguments("arguments: must be a JSON object")
        out = await self.runtime.agent_call(tool, arguments)
        return _ok(text=out.text, isError=out.is_error, truncated=out.truncated, originalChars=out.original_chars)


async def _object(request: Request) -> dict[str, Any]:
    raw = await request.body()  # the guard read it, bounded in size and time
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise InvalidArguments("the request body is not valid JSON") from None
    if not isinstance(value, dict):
        raise InvalidArguments("the request body must be a JSON object")
    return value


def _field(body: dict[str, Any], key: str, kind: type, *, required: bool = True) -> Any:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise InvalidArguments(f"{key}: must be {'true or false' if kind is bool else 'a string'}")
    return value


def _names(body: dict[str, Any], key: str, *, required: bool = True) -> list[str] | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or len(value) > 1000:
        raise InvalidArguments(f"{key}: must be a list of server names")
    return value


def _ok(**data: Any) -> Response:
    return _JSON({"ok": True, **data})


async def _kxen_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, InvalidArguments):
        status = 400
    elif isinstance(exc, UnknownTool):
        status = 404
    else:
        status = 409  # the request was fine; the runtime's state says no (denied, not ready, refused config)
    body: dict[str, Any] = {"error": safe_text(str(exc), multiline=True)}
    if isinstance(exc, ConfigError):
        body["problems"] = [safe_text(str(p)) for p in exc.problems]
    if isinstance(exc, ApprovalDenied):
        body["denied"] = True
    return _JSON(body, status_code=status)


async def _internal(request: Request, exc: Exception) -> Response:
    log.error("settings page: %s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
    return _JSON({"error": "the Settings page failed on this request (kxen -v logs why)"}, status_code=500)


def settings_app(runtime: Any, *, port: int, secret: str | None = None) -> SettingsPage:
    """The Settings page of ``runtime`` as an ASGI app, for a host that serves it itself on
    ``127.0.0.1:port`` (the Host header is checked against that). Open :attr:`SettingsPage.url`.
    Hold the runtime's approvals (``async with runtime.hold_approvals():``) for the page to answer
    them; without, it lists none and says where they go."""
    return SettingsPage(runtime, port=port, secret=secret)


__all__ = ["COALESCE_SECONDS", "MAX_STREAMS", "SettingsPage", "settings_app"]

"""Signing in to a remote server from a host UI or the CLI: the Runtime's login API.

::

    started = await rt.login_start("notes")          # LoginStarted(flow_id, url, server)
    show(started.url)                                # the host opens it, or shows it
    while rt.login_poll(started.flow_id).state == "pending":
        await anyio.sleep(0.5)
    # "complete": the server was restarted with its new credential; rt.wait_ready() waits for it

The sign-in itself is a plugin's (``kxen_auth_login`` returns an :class:`kxen_core.auth.AuthFlow`):
the runtime starts the flow, runs ``finish()`` in its own task group, and on success restarts the
server. At most one sign-in runs per server: a new start cancels the old one. Every wait is bounded:
the flow bounds its redirect listener, and the runtime bounds ``start()``, ``finish()`` and closing.
``logout`` asks every ``kxen_auth_logout`` to forget the server's tokens and restarts it.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Literal, Sequence

import anyio
import anyio.abc
import attrs

from .auth import AuthFlow, LoginRequest
from .errors import AuthRequired, InvalidArguments, KxenError, PluginHookError, Unsupported, printable
from .failures import failure_text
from .hookcall import acall_all

if TYPE_CHECKING:
    from .config import Config
    from .plugins import KxenPluginManager
    from .server import Server

#: the most seconds a flow's ``start()`` (discovery, registration, the listener) may take
START_SECONDS = 120.0
#: the most seconds a flow's ``finish()`` may take (flows bound their own wait, 300 s by default)
FINISH_SECONDS = 900.0
#: the most seconds closing a flow may take
CLOSE_SECONDS = 5.0
#: finished sign-ins kept for ``login_poll`` (the oldest go first)
KEPT_FINISHED = 32

LoginState = Literal["pending", "complete", "failed", "cancelled"]


@attrs.frozen
class LoginStarted:
    """A sign-in that started: open or show ``url`` (``""``: no person is needed), poll ``flow_id``."""

    flow_id: str
    url: str
    server: str


@attrs.frozen
class LoginStatus:
    """Where a sign-in is: ``pending``, ``complete``, ``failed`` or ``cancelled``; ``reason`` says
    why it failed or was cancelled (safe to show, never a secret)."""

    state: LoginState
    reason: str | None = None


@attrs.define(eq=False)
class _Flow:
    id: str
    server: str
    flow: AuthFlow
    state: LoginState = "pending"
    reason: str | None = None
    # lambdas: naming anyio's classes here would load its task modules when this module loads
    scope: anyio.CancelScope = attrs.field(factory=lambda: anyio.CancelScope())
    done: anyio.Event = attrs.field(factory=lambda: anyio.Event())

    def end(self, state: LoginState, reason: str | None = None) -> None:
        if self.state == "pending":
            self.state, self.reason = state, printable(reason) if reason else None


class LoginHost:
    """Mixed into :class:`kxen_core.Runtime`: the login API. The attributes below are the runtime's."""

    if TYPE_CHECKING:
        pm: KxenPluginManager
        config: Config | None
        _tg: anyio.abc.TaskGroup | None
        _login_flows: OrderedDict[str, _Flow]

        def _server(self, name: str) -> Server: ...

        async def restart(self, name: str) -> None: ...

    _flow_ids = itertools.count(1)

    @property
    def _flows(self) -> OrderedDict[str, _Flow]:
        flows: OrderedDict[str, _Flow] | None = getattr(self, "_login_flows", None)
        if flows is None:
            flows = self._login_flows = OrderedDict()
        return flows

    def _login_request(self, scopes: Sequence[str] = (), open_browser: bool = False, forget_client: bool = False) -> LoginRequest:
        config = self.config
        return LoginRequest(
            settings=config.settings if config else None,
            home=config.home if config else None,
            pm=self.pm,
            open_browser=open_browser,
            scopes=tuple(scopes),
            forget_client=forget_client,
        )

    async def login_start(self, name: str, *, scopes: Sequence[str] = (), open_browser: bool = False) -> LoginStarted:
        """Start signing in to server ``name``: return the authorization URL and a flow id.

        ``scopes`` are asked on top of the usual ones (a step-up after a 403 ``insufficient_scope``);
        ``open_browser`` tells the plugin the caller will open the URL in a browser. A sign-in
        already running for that server is cancelled. Raises ``UnknownTool`` for an unknown server,
        ``Unsupported`` when no plugin can sign in to it, ``AuthRequired`` (with a reason) when the
        sign-in cannot start, ``PluginHookError`` when the plugin broke."""
        if self._tg is None:
            raise KxenError("the runtime is not running: enter it (async with) first")
        server = self._server(name)
        for old in [f for f in self._flows.values() if f.server == name and f.state == "pending"]:
            await self._cancel(old, "a new sign-in was started")
        request = self._login_request(scopes, open_browser)
        try:
            flow = self.pm.hook.kxen_auth_login(server=server.config, request=request)
        except (AuthRequired, PluginHookError):
            raise
        except Exception as exc:
            raise PluginHookError(f"a plugin raised in kxen_auth_login: {type(exc).__name__}: {exc}", hook="kxen_auth_login") from exc
        if flow is None:
            raise Unsupported(f"no installed plugin can sign in to server {name!r} (install kxen-oauth; it signs in to http and sse servers)")
        url = await self._started(flow, name)
        import secrets  # here, not at import: it loads OpenSSL's digests

        entry = _Flow(id=f"login-{next(self._flow_ids)}-{secrets.token_hex(6)}", server=name, flow=flow)
        self._keep(entry)
        self._tg.start_soon(self._finish, entry, name=f"kxen-login-{name}")
        return LoginStarted(flow_id=entry.id, url=url, server=name)

    def login_poll(self, flow_id: str) -> LoginStatus:
        """Where sign-in ``flow_id`` is. ``InvalidArguments`` for an id this runtime did not hand out
        (or one finished so long ago it was forgotten)."""
        entry = self._flows.get(flow_id)
        if entry is None:
            raise InvalidArguments(f"no sign-in with id {printable(flow_id[:60])!r}")
        return LoginStatus(entry.state, entry.reason)

    async def login_cancel(self, flow_id: str) -> None:
        """Cancel sign-in ``flow_id`` (its listener stops; it ends ``cancelled``). Nothing happens
        to one that already ended."""
        entry = self._flows.get(flow_id)
        if entry is None:
            raise InvalidArguments(f"no sign-in with id {printable(flow_id[:60])!r}")
        await self._cancel(entry, "cancelled")

    async def logout(self, name: str, *, forget_client: bool = False) -> bool:
        """Forget the stored tokens of server ``name`` (and its client registration with
        ``forget_client``); True when a plugin removed something. A running sign-in for it is
        cancelled, and the server restarted when something was removed (so its state shows what it
        wants now)."""
        server = self._server(name)
        for old in [f for f in self._flows.values() if f.server == name and f.state == "pending"]:
            await self._cancel(old, "signed out")
        answers = await acall_all(self.pm, "kxen_auth_logout", server=server.config, request=self._login_request(forget_client=forget_client))
        removed = any(answer is True for _, answer in answers)
        if removed:
            await self.restart(name)
        return removed

    # --- the flow's life ----------------------------------------------------------------------

    async def _started(self, flow: AuthFlow, name: str) -> str:
        """``flow.start()``, bounded; the flow is closed when it fails."""
        try:
            with anyio.fail_after(START_SECONDS):
                url = await flow.start()
        except BaseException as exc:
            await _close(flow)
            if isinstance(exc, TimeoutError):
                raise AuthRequired(f"the sign-in to {name!r} did not start within {START_SECONDS:g} s", next_step=f"kxen mcp login {name}") from None
            if isinstance(exc, Exception) and not isinstance(exc, KxenError):
                raise PluginHookError(f"the sign-in flow of {name!r} failed to start: {type(exc).__name__}: {exc}", hook="kxen_auth_login") from exc
            raise
        if not isinstance(url, str):
            await _close(flow)
            raise PluginHookError(f"the sign-in flow of {name!r} started with a {type(url).__name__}, not a URL", hook="kxen_auth_login")
        return url

    async def _finish(self, entry: _Flow) -> None:
        """``flow.finish()`` (bounded, cancellable), the flow closed, then on success a restart."""
        try:
            try:
                with entry.scope, anyio.fail_after(FINISH_SECONDS):
                    await entry.flow.finish()
            except TimeoutError:
                entry.end("failed", f"no sign-in within {FINISH_SECONDS:g} s")
            except AuthRequired as exc:
                entry.end("failed", exc.reason)
            except Exception as exc:  # a plugin bug: the sign-in failed, the runtime goes on
                entry.end("failed", failure_text(exc))
            finally:
                await _close(entry.flow)
            if entry.state == "pending":
                await self.restart(entry.server)  # before "complete": a waiting host then sees the new start
                entry.end("complete")
        finally:
            entry.end("cancelled", "the runtime closed")  # only if still pending
            entry.done.set()

    async def _cancel(self, entry: _Flow, reason: str) -> None:
        entry.end("cancelled", reason)
        entry.scope.cancel()
        with anyio.move_on_after(CLOSE_SECONDS + 1):
            await entry.done.wait()

    def _keep(self, entry: _Flow) -> None:
        flows = self._flows
        flows[entry.id] = entry
        finished = [k for k, f in flows.items() if f.state != "pending"]
        for key in finished[: max(0, len(finished) - KEPT_FINISHED)]:
            del flows[key]


async def _close(flow: Any) -> None:
    """``flow.aclose()``, shielded and bounded; a plugin's error here is not the caller's."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_SECONDS):
        try:
            await flow.aclose()
        except Exception:  # best effort: the flow is being dropped
            pass


__all__ = ["CLOSE_SECONDS", "FINISH_SECONDS", "KEPT_FINISHED", "LoginHost", "LoginStarted", "LoginStatus", "START_SECONDS"]

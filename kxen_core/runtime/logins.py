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
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
import attrs

from kxen_core.auth import AuthFlow, LoginRequest
from kxen_core.errors import AuthRequired, InvalidArguments, KxenError, PluginHookError, Unsupported, printable
from kxen_core.hookcall import acall_all
from kxen_core.policy.egress import egress_for, using_egress
from kxen_core.runtime.failures import failure_text

if TYPE_CHECKING:
    import anyio.abc

    from kxen_core.config import Config
    from kxen_core.plugins.manager import KxenPluginManager
    from kxen_core.runtime.server import Server

#: the most seconds a flow's ``start()`` (discovery, registration, the listener) may take
START_SECONDS = 120.0
#: the most seconds a flow's ``finish()`` may take (flows bound their own wait, 300 s by default)
FINISH_SECONDS = 900.0
#: the most seconds closing a flow may take
CLOSE_SECONDS = 5.0
#: finished sign-ins kept for ``login_poll`` (the oldest go first)
KEPT_FINISHED = 32
#: the most notes one sign-in keeps, and the most characters of each
MAX_NOTES, MAX_NOTE_CHARS = 8, 1000

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
    #: what the sign-in plugin told the person along the way (a repaired token store mode), escaped
    notes: tuple[str, ...] = ()


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
    notes: list[str] = attrs.field(factory=list)

    def end(self, state: LoginState, reason: str | None = None) -> None:
        if self.state == "pending":
            self.state, self.reason = state, printable(reason) if reason else None


class Host(Protocol):
    """What the login functions need of the runtime (:class:`kxen_core.runtime.login_api.LoginHost` is one)."""

    pm: KxenPluginManager
    config: Config | None
    _tg: anyio.abc.TaskGroup | None

    def _server(self, name: str) -> Server: ...

    def _spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> None: ...

    async def restart(self, name: str) -> None: ...


_flow_ids = itertools.count(1)


def flows(host: Host) -> OrderedDict[str, _Flow]:
    """The runtime's sign-ins, oldest first (made on first use)."""
    kept: OrderedDict[str, _Flow] | None = getattr(host, "_login_flows", None)
    if kept is None:
        kept = OrderedDict()
        setattr(host, "_login_flows", kept)  # noqa: B010 (the Host protocol does not declare it)
    return kept


def login_request(
    host: Host,
    scopes: Sequence[str] = (),
    open_browser: bool = False,
    forget_client: bool = False,
    notes: list[str] | None = None,
) -> LoginRequest:
    config = host.config

    def notice(message: str) -> None:
        shown = printable(str(message))[:MAX_NOTE_CHARS]  # a plugin's text: one safe line
        if notes is not None and len(notes) < MAX_NOTES and shown not in notes:
            notes.append(shown)

    return LoginRequest(
        settings=config.settings if config else None,
        home=config.home if config else None,
        pm=host.pm,
        open_browser=open_browser,
        scopes=tuple(scopes),
        forget_client=forget_client,
        notice=notice,
    )


async def start(host: Host, name: str, scopes: Sequence[str], open_browser: bool) -> LoginStarted:
    """``Runtime.login_start``."""
    if host._tg is None:
        raise KxenError("the runtime is not running: enter it (async with) first")
    server = host._server(name)
    for old in [f for f in flows(host).values() if f.server == name and f.state == "pending"]:
        await _cancel(old, "a new sign-in was started")
    notes: list[str] = []
    request = login_request(host, scopes, open_browser, notes=notes)
    # the sign-in's requests (discovery, registration, the token) follow this server's egress rules;
    # the flow's finishing task is started inside, so it keeps them
    with using_egress(egress_for(server.config, request.settings)):
        return await _start(host, name, server, request, notes)


async def _start(host: Host, name: str, server: Server, request: LoginRequest, notes: list[str]) -> LoginStarted:
    try:
        flow = host.pm.hook.kxen_auth_login(server=server.config, request=request)
    except (AuthRequired, PluginHookError):
        raise
    except Exception as exc:
        raise PluginHookError(
            f"a plugin raised in kxen_auth_login: {type(exc).__name__}: {exc}", hook="kxen_auth_login"
        ) from exc
    if flow is None:
        raise Unsupported(
            f"no installed plugin can sign in to server {name!r} (install kxen-oauth; it signs in to http and sse "
            "servers)"
        )
    url = await _started(flow, name)
    import secrets  # here, not at import: it loads OpenSSL's digests

    entry = _Flow(id=f"login-{next(_flow_ids)}-{secrets.token_hex(6)}", server=name, flow=flow, notes=notes)
    _keep(host, entry)
    host._spawn(_finish, host, entry, name=f"kxen-login-{name}")
    _changed(host, entry)
    return LoginStarted(flow_id=entry.id, url=url, server=name)


def listed(host: Host) -> list[dict[str, Any]]:
    """``Runtime.logins``: each sign-in kept, oldest first (never its URL: it may carry a state)."""
    return [_row(entry) for entry in flows(host).values()]


def _row(entry: _Flow) -> dict[str, Any]:
    return {
        "flowId": entry.id,
        "server": entry.server,
        "state": entry.state,
        "reason": entry.reason,
        "notes": list(entry.notes),
    }


def _changed(host: Host, entry: _Flow) -> None:
    events = getattr(host, "_events", None)  # the Settings API's stream (settings_events)
    if events is not None:
        events.publish("login", login=_row(entry))


def poll(host: Host, flow_id: str) -> LoginStatus:
    """``Runtime.login_poll``."""
    entry = flows(host).get(flow_id)
    if entry is None:
        raise InvalidArguments(f"no sign-in with id {printable(flow_id[:60])!r}")
    return LoginStatus(entry.state, entry.reason, tuple(entry.notes))


async def cancel(host: Host, flow_id: str) -> None:
    """``Runtime.login_cancel``."""
    entry = flows(host).get(flow_id)
    if entry is None:
        raise InvalidArguments(f"no sign-in with id {printable(flow_id[:60])!r}")
    await _cancel(entry, "cancelled")


async def logout(host: Host, name: str, forget_client: bool) -> bool:
    """``Runtime.logout``."""
    server = host._server(name)
    for old in [f for f in flows(host).values() if f.server == name and f.state == "pending"]:
        await _cancel(old, "signed out")
    request = login_request(host, forget_client=forget_client)
    with using_egress(egress_for(server.config, request.settings)):  # a revocation request, if any
        answers = await acall_all(host.pm, "kxen_auth_logout", server=server.config, request=request)
    removed = any(answer is True for _, answer in answers)
    if removed:
        await host.restart(name)
    return removed


# --- the flow's life ----------------------------------------------------------------------------


async def _started(flow: AuthFlow, name: str) -> str:
    """``flow.start()``, bounded; the flow is closed when it fails."""
    try:
        with anyio.fail_after(START_SECONDS):
            url = await flow.start()
    except BaseException as exc:
        await _close(flow)
        if isinstance(exc, TimeoutError):
            raise AuthRequired(
                f"the sign-in to {name!r} did not start within {START_SECONDS:g} s", next_step=f"kxen mcp login {name}"
            ) from None
        if isinstance(exc, Exception) and not isinstance(exc, KxenError):
            raise PluginHookError(
                f"the sign-in flow of {name!r} failed to start: {type(exc).__name__}: {exc}", hook="kxen_auth_login"
            ) from exc
        raise
    if not isinstance(url, str):
        await _close(flow)
        raise PluginHookError(
            f"the sign-in flow of {name!r} started with a {type(url).__name__}, not a URL", hook="kxen_auth_login"
        )
    return url


async def _finish(host: Host, entry: _Flow) -> None:
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
            await host.restart(entry.server)  # before "complete": a waiting host then sees the new start
            entry.end("complete")
    finally:
        entry.end("cancelled", "the runtime closed")  # only if still pending
        entry.done.set()
        _changed(host, entry)


async def _cancel(entry: _Flow, reason: str) -> None:
    entry.end("cancelled", reason)
    entry.scope.cancel()
    with anyio.move_on_after(CLOSE_SECONDS + 1):
        await entry.done.wait()


def _keep(host: Host, entry: _Flow) -> None:
    kept = flows(host)
    kept[entry.id] = entry
    finished = [k for k, f in kept.items() if f.state != "pending"]
    for key in finished[: max(0, len(finished) - KEPT_FINISHED)]:
        del kept[key]


async def _close(flow: Any) -> None:
    """``flow.aclose()``, shielded and bounded; a plugin's error here is not the caller's."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_SECONDS):
        try:
            await flow.aclose()
        except Exception:  # best effort: the flow is being dropped
            pass


__all__ = ["CLOSE_SECONDS", "FINISH_SECONDS", "KEPT_FINISHED", "LoginStarted", "LoginStatus", "START_SECONDS"]

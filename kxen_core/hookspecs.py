"""The extension contract: every ``kxen_*`` hook, one docstring each.

Result protocols used below:

* **first non-None** -- implementations are asked in pluggy order; the first that returns something
  other than ``None`` answers and the rest are not asked.
* **collecting** -- every implementation is asked; the core combines the answers.
* **veto** -- collecting, where any ``deny`` wins, then ``ask``, then ``allow``.
* **async-capable** -- an implementation may be ``async def`` (or return an awaitable). These hooks are
  never called as ``pm.hook.x(...)``: the core calls them through :mod:`kxen_core.hookcall`, which
  awaits each answer and names the plugin that raised. Hook wrappers are refused on them.

Hooks that are not async-capable must not block: they register, select or vote, and hand over
objects whose methods are async (a transport is an async context manager).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    from kxen_core.asks import ElicitationRequest, SamplingRequest
    from kxen_core.auth import AuthFlow, LoginRequest
    from kxen_core.commands import RegisterCommand
    from kxen_core.config.models import ServerConfig
    from kxen_core.policy import ApprovalDecision, ApprovalRequest, ToolCall, Vote
    from kxen_core.protocol.catalog import CatalogPage, Verdict
    from kxen_core.transport import CredentialRequest, RegisterTransport

_spec = pluggy.HookspecMarker("kxen")
#: the marker plugins put on their hook implementations (``from kxen_core import hookimpl``)
hookimpl = pluggy.HookimplMarker("kxen")

#: Hooks whose implementations may be ``async def``; called only through :mod:`kxen_core.hookcall`.
ASYNC_HOOKS = frozenset(
    {
        "kxen_catalog_page",
        "kxen_policy_decision",
        "kxen_credential_lookup",
        "kxen_approval_prompt",
        "kxen_sampling_request",
        "kxen_elicitation_request",
        "kxen_auth_logout",
        "kxen_authorize_url",
    }
)


# --- transports -------------------------------------------------------------------------------


@_spec
def kxen_register_transports(register: RegisterTransport) -> None:
    """Declare the transport kinds this plugin provides.

    Registration; called once per plugin manager, at start-up. Call ``register(name, opener,
    options=OptionsClass)`` for each kind (see :class:`kxen_core.transport.RegisterTransport`):

    * ``name`` -- the kind a server entry selects with ``"transport": name`` (``stdio`` for a
      ``command``, ``http`` for a ``url`` when ``transport`` is not given);
    * ``options`` -- an attrs class for the entry's ``options`` object, structured and validated by
      the host's converter when the config is loaded (unknown keys and bad values are config
      errors with their key path); ``None`` when the kind takes no options;
    * ``opener(server, context)`` -- returns a :class:`kxen_core.transport.Transport`, an async
      context manager: entering it opens the connection and yields a
      :class:`kxen_core.transport.MessageStream`; leaving it closes everything the transport
      started (processes, sockets, tasks), bounded in time, even when cancelled. The opener itself
      does no I/O. ``context.options`` holds the structured options and, for a local kind,
      ``context.launch`` the resolved launch the core fingerprinted and approved.

    A kind claimed by two plugins is a load failure naming both, and neither serves it. Do no I/O
    and import nothing heavy here: keep the opener's module imported on first use.

    :param register: the callback that records one kind.

    .. versionadded:: 0.2
    """


@_spec
def kxen_transport_closed(server: ServerConfig, reason: str) -> None:
    """Observe that the transport of ``server`` was closed.

    Collecting; results are ignored. ``reason`` is short and free of secrets (``"stopped"``,
    ``"reload"``, ``"server exited"``...). Must not block.

    .. versionadded:: 0.1
    """


@_spec
def kxen_host_guard(home: Path, subreaper: bool) -> AbstractAsyncContextManager[Any] | None:
    """Return an async context manager that guards process-wide state around a host's work, or ``None``.

    Collecting. Entered once per host process around its runtimes (the ``kxen`` command enters every
    guard around each ``kxen mcp ...``; an embedding host opts in with :func:`kxen_core.host_guard`)
    and left after they closed, even when cancelled. The stdio transport's guard ends the servers a
    crashed host left running (recorded under ``home``) and records the servers it starts; with
    ``subreaper`` (Linux) the process adopts and, on exit, ends the orphans of double-forking servers.
    Must not block; entering and leaving must be bounded in time. A guard that raises on entry is a
    plugin failure: it is skipped and the host goes on.

    :param home: the kxen home directory (``$KXEN_HOME``) of this host.
    :param subreaper: whether this process allows a guard to adopt orphans (every later child of the
        process that is not a server is then treated as a server's leftover).

    .. versionadded:: 0.3
    """


# --- secrets ----------------------------------------------------------------------------------


@_spec
def kxen_register_secrets(register: Callable[[Callable[[], Iterable[str]]], None]) -> None:
    """Register the values this plugin holds as secret, so kxen scrubs them from what servers send.

    Collecting, registration (not async-capable, must not block). Call ``register(values)`` with a
    callable that takes no argument and returns the values the plugin holds *now* (the tokens of a
    sign-in, a client secret): kxen asks it each time it scrubs what a server returned -- before it
    reaches the agent (``Runtime.agent_call``), a terminal, a status or a log -- and replaces each
    value of at least 4 characters by ``***``, as it does for the config's own secrets. The callable
    is asked often: keep it O(1), and hand back the same immutable object (a ``frozenset``) while
    nothing changed, so kxen rebuilds its scrubber only when something did. One that raises counts as
    no values. Asked once per Runtime.

    :param register: ``register(values)``, ``values() -> Iterable[str]``.

    .. versionadded:: 0.5
    """


# --- commands ---------------------------------------------------------------------------------


@_spec
def kxen_register_commands(register: RegisterCommand) -> None:
    """Add commands to the ``kxen`` command line (``kxen settings`` is the settings page's).

    Collecting, registration (not async-capable, must not block, no I/O). Call
    ``register(Command(name, help, configure, run))`` (:class:`kxen_core.commands.Command`) for each
    command. The ``kxen`` command asks this hook only when the word after ``kxen`` is not one of its
    own commands, so a plugin costs nothing to the others. A name the core uses or that two plugins
    register is refused and reported as a warning naming the plugin; so is a registration that
    raises. ``run(runtime, args)`` gets a :class:`kxen_core.Runtime` made with the global options, not
    entered, and runs under the core's host guards and signal handling, as ``kxen mcp ...`` does.

    :param register: ``register(command)``.

    .. versionadded:: 0.6
    """


# --- catalogs ---------------------------------------------------------------------------------


@_spec
def kxen_catalog_page(server: ServerConfig, kind: str, page: CatalogPage) -> list[Verdict] | None:
    """Judge the items of one fetched catalog page.

    Collecting, async-capable (called via ``acall_all``). ``kind`` is ``"tools"``, ``"resources"`` or
    ``"prompts"``. Return ``None`` or a list of :class:`kxen_core.protocol.catalog.Verdict`: ``reject(index,
    reason)`` drops that item (with a diagnostic naming the item and the reason), ``annotate(index,
    key, value)`` attaches a note. Never mutate ``page``; the core applies every verdict. An
    implementation that raises rejects the whole page, reported with its plugin name.

    .. versionadded:: 0.1
    """


# --- policy and approvals ---------------------------------------------------------------------


@_spec
def kxen_policy_decision(call: ToolCall) -> Vote | None:
    """Vote on a tool call before it leaves kxen.

    Veto, async-capable (called via ``acall_all``). Return a :class:`kxen_core.policy.Vote`
    (``allow``, ``ask`` or ``deny`` with a reason) or ``None`` to abstain. ``deny`` beats ``ask`` beats
    ``allow``; the core's config vote always answers (``toolPolicies``, else ``defaultToolPolicy``). An
    implementation that raises counts as ``deny`` and is reported with its plugin name.

    .. versionadded:: 0.1
    """


@_spec
def kxen_approval_prompt(request: ApprovalRequest) -> ApprovalDecision | None:
    """Ask a human to decide ``request``; return ``None`` if this channel cannot ask now.

    First non-None wins, async-capable (called via ``acall_first``). A channel that cannot reach a
    human (no terminal, not configured) returns ``None`` so the next channel is asked. When no
    channel answers the request is denied: kxen fails closed. A channel must not block the event
    loop (run blocking input in a worker thread).

    .. versionadded:: 0.1
    """


# --- credentials ------------------------------------------------------------------------------


@_spec
def kxen_credential_lookup(server: ServerConfig, request: CredentialRequest) -> dict[str, str] | None:
    """Return headers to add to a remote request for ``server``, or ``None`` to pass.

    First non-None wins, async-capable (called via ``acall_first``). The returned header values are
    secrets: kxen never logs or prints them. ``request`` is a
    :class:`kxen_core.transport.CredentialRequest`: ``method``, ``url``, the asking transport's
    ``context``, and ``challenge`` when the transport asks again after a 401 or 403 answer (then
    answering headers different from those sent makes the transport resend the request once).
    ``None`` for a request without a challenge holds for that transport: it sends the later requests
    without asking until the server answers 401 or 403 (a reconnection or a restart asks again). An
    answer that is a :class:`kxen_core.transport.ReusableHeaders` (the headers and a cheap
    ``still_valid()`` check) holds the same way for the later requests to the same URL, while the
    check passes (called before each instead of the hook) and the plugins do not change. Raise
    :class:`kxen_core.errors.AuthRequired` when no usable credential can be had without a
    person: the transports let it through unwrapped and the server goes to ``needs_login``.

    .. versionadded:: 0.1
    """


@_spec(firstresult=True)
def kxen_auth_login(server: ServerConfig, request: LoginRequest) -> AuthFlow | None:
    """Return a sign-in flow for ``server``, or ``None`` when this plugin has nothing to sign in to.

    First non-None wins; not async-capable (it must not block: it hands over an
    :class:`kxen_core.auth.AuthFlow`, whose methods are async). The core calls ``start()`` (the
    authorization URL, or ``""`` when no person is needed), shows the URL, awaits ``finish()`` and
    always ``aclose()``. ``request`` is a :class:`kxen_core.auth.LoginRequest` (``settings``,
    ``home``, ``pm``, ``open_browser``, ``scopes`` for a step-up).

    :param server: the server to sign in to.
    :param request: what the sign-in is asked with.

    .. versionadded:: 0.4
    """


@_spec
def kxen_auth_logout(server: ServerConfig, request: LoginRequest) -> bool | None:
    """Forget the stored tokens of ``server`` (and its client registration when
    ``request.forget_client``).

    Collecting, async-capable (called via ``acall_all``). Return True when something was removed,
    False or ``None`` otherwise.

    :param server: the server to sign out of.
    :param request: what the sign-out is asked with.

    .. versionadded:: 0.4
    """


@_spec
def kxen_authorize_url(server: ServerConfig, url: str) -> bool | None:
    """Show or open an authorization URL to a person, or follow it headlessly; True means taken.

    First non-None wins, async-capable (called via ``acall_first``). A credential plugin that
    meets a 401 needing a sign-in (or a 403 needing a step-up) runs a sign-in in-band only when
    some implementation takes the URL; otherwise it raises
    :class:`kxen_core.errors.AuthRequired`. kxen installs none by default. ``url`` is a secret-free
    authorization URL; it ends, after the person (or the implementation) signs in, at a loopback
    redirect the flow listens on.

    :param server: the server the sign-in is for.
    :param url: the authorization URL.

    .. versionadded:: 0.4
    """


# --- requests from servers --------------------------------------------------------------------


@_spec
def kxen_sampling_request(server: ServerConfig, request: SamplingRequest) -> dict[str, Any] | None:
    """Answer a server's ``sampling/createMessage`` (the server asks the host's model for a message).

    First non-None wins, async-capable (called via ``acall_first``). Return the
    ``CreateMessageResult`` as a dict (``role``, ``content``, ``model``, optionally ``stopReason``),
    or ``None`` to pass. kxen declares the ``sampling`` capability only when some plugin implements
    this hook; when none answers, or one raises or answers without ``model``, ``role`` and
    ``content``, the request is declined (error ``-1``). ``request.params`` is the server's text:
    untrusted. Bounded by the server's request timeout.

    .. versionadded:: 0.2
    """


@_spec
def kxen_elicitation_request(server: ServerConfig, request: ElicitationRequest) -> dict[str, Any] | None:
    """Answer a server's ``elicitation/create`` (the server asks the user for structured input).

    First non-None wins, async-capable (called via ``acall_first``). Return an ``ElicitResult`` as
    a dict: ``{"action": "accept", "content": {...}}`` (flat values: strings, numbers, booleans,
    lists of strings), ``{"action": "decline"}`` or ``{"action": "cancel"}``; or ``None`` to pass.
    kxen declares the ``elicitation`` capability (form mode) only when some plugin implements this
    hook; when none answers, or one raises or answers something else, the answer is ``decline``.
    ``request.message`` and ``request.requested_schema`` are the server's: untrusted, to be escaped
    before they are shown. Bounded by the server's request timeout.

    .. versionadded:: 0.2
    """


def _all_hook_names() -> list[str]:
    return sorted(name for name, value in globals().items() if name.startswith("kxen_") and callable(value))


HOOK_NAMES: tuple[str, ...] = tuple(_all_hook_names())

__all__ = ["ASYNC_HOOKS", "HOOK_NAMES", "hookimpl"] + list(HOOK_NAMES)

"""A tool call on the host's path: the model-facing name, the arguments checked against the tool's
``inputSchema`` (a call the server would refuse is not sent), the policy votes and approval, the
request, and the tool's ``outputSchema`` check (``Runtime.call_tool``).

A remote server that answers "no such session" (Streamable HTTP: 404 on a known session id) did
not process the request: the server connects again at once (:mod:`kxen_core.runtime.reconnect`) and the
call waits for the new session -- at most its own timeout -- and is sent again, once. The caller
sees the result, not the expiry.

A call's timeout is the host's ``timeout``, else the tool's ``timeouts.toolSeconds``, else the
server's ``requestSeconds``; with ``resetOnProgress`` (the default) every call asks for progress,
and each progress notification starts that timeout again, up to ``maxTotalSeconds`` after it was
sent. Every expiry is cancelled on the wire.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from kxen_core.agent import tool_names
from kxen_core.agent.tool_input import check_arguments
from kxen_core.agent.tool_output import check_result
from kxen_core.errors import (
    AuthRequired,
    ClosedError,
    InvalidArguments,
    PolicyDenied,
    SessionExpired,
    UnknownTool,
)
from kxen_core.policy import ToolCall
from kxen_core.policy.approvals import authorize
from kxen_core.protocol.clock import RequestClock
from kxen_core.protocol.tasks import task_support
from kxen_core.runtime import kxen_tools
from kxen_core.runtime.failures import auth_failure
from kxen_core.runtime.states import State
from kxen_core.runtime.tasks import modern_tasks

log = logging.getLogger("kxen.calls")

if TYPE_CHECKING:
    from kxen_core.policy.audit import Note
    from kxen_core.policy.votes import PreparedVotes
    from kxen_core.protocol.progress import ProgressCallback
    from kxen_core.protocol.session import Session
    from kxen_core.runtime.server import Server


class CallHost(kxen_tools.AgentHost, Protocol):
    """What a call needs of the runtime (``kxen_core.Runtime`` is one)."""

    _votes: PreparedVotes

    def _ready(self, name: str) -> Server: ...

    def _server(self, name: str) -> Server: ...


async def call_tool(
    rt: CallHost,
    name: str,
    arguments: Mapping[str, Any] | None,
    *,
    server: str | None,
    timeout: float | None,
    on_progress: ProgressCallback | None,
    note: Note | None = None,
    wait: bool = True,
    as_task: bool = False,
) -> dict[str, Any]:
    # Every call of every host passes here: the lookups are inlined (one function call less each),
    # and each falls back on the helper that raises the right error when anything is off.
    if server is None:
        # a model-facing name: its server part, then that server's name map (kxen's own tools have
        # no separator in their names: kxen_core.runtime.kxen_tools)
        server, sep, rest = name.partition(tool_names.SEPARATOR)
        if not (sep and server and rest):
            if kxen_tools.is_kxen_tool(name):
                return (await kxen_tools.call(rt, name, arguments, rt.output_limit)).as_result()
            try:
                tool_names.server_of(name)
            except ValueError as exc:
                raise UnknownTool(str(exc)) from None
        target = rt.servers.get(server)
        if target is None or target.state != State.READY or target.session is None:
            target = rt._ready(server)  # raises: no such server, or not ready
        tool = target.model_tools.get(name) or ""
    else:
        waiting = rt._server(server)
        if waiting.state == State.AWAITING_APPROVAL and waiting.awaiting_launch is not None:
            await _launch_and_call(rt, waiting, name, arguments)
        target, tool = rt._ready(server), name
    info = target.tools_by_name.get(tool)
    hidden = target.filtered_tools  # a filter keeps it from the model: refused, nothing is sent
    if hidden and tool in hidden:
        raise not_offered(target.name, tool, hidden[tool])
    if info is None:
        held = target.held_tools.get(tool)  # changed or new since pinned: refused, nothing sent (server_pins)
        if held is not None:
            from kxen_core.runtime.server_pins import held_error

            raise held_error(target.name, held, target.tool_names.get(tool))
        raise UnknownTool(f"server {server!r} has no tool {(tool or name)[:80]!r}")
    support = info.get("execution") and task_support(info)  # "", or the tool's execution.taskSupport
    if not wait and support not in ("optional", "required") and not modern_tasks(target.session):
        raise InvalidArguments(
            f"tool {tool!r} of server {target.name!r} does not run as a task (execution.taskSupport is "
            f"{support or 'forbidden'}): call it with wait=True; nothing was sent"
        )
    args = dict(arguments) if arguments else {}
    # arguments the server would refuse: refused here, before a vote or a person is asked
    refused = check_arguments(info, args) if "inputSchema" in info else None
    if refused is not None:
        return refused
    config = rt.config
    settings = config.settings if config else None
    secrets = rt.secrets
    if note is not None:  # the audit trail (kxen_core.policy.audit): the arguments' shape, never a value
        note.begin(target.config, target.launch, tool, info, args, rt.role, secrets)
    # a definition nobody accepted (pinning warn) is never allowed outright: its allow asks again
    if tool in target.unaccepted or not rt._votes.allowed_outright(
        target.config, tool, rt.role, settings, args, target.launch, secrets
    ):
        call = ToolCall(
            server=target.config,
            tool=tool,
            arguments=args,
            role=rt.role,
            tool_info=info,
            settings=settings,
            launch=target.launch,  # the approval is bound to what runs behind the name
            secrets=secrets,
            pin=target.pin_digests.get(tool, ""),  # and to the definition it is given for
            pin_state=target.pin_states.get(tool, ""),
        )
        await authorize(rt.pm, call, rt.approvals, prepared=rt._votes, note=note)
    elif note is not None:
        note.voted("allow", rt._votes.outright_why(target.config, tool))
    session = target.session
    if session is None:  # stopped while the votes were counted
        raise target.not_ready()
    if note is not None:
        note.sending()
    params: dict[str, Any] = {"name": tool, "arguments": args}
    budget = target.config.timeouts
    as_task = support == "required" or (support == "optional" and (as_task or not wait))
    if as_task and session.modern is None:  # 2025-11-25 tasks: the handshake era (runtime.tasks)
        from kxen_core.runtime.tasks import call_as_task

        result = await call_as_task(target, session, params, wait=wait, timeout=timeout, on_progress=on_progress)
        if note is not None:
            note.replied()
        if not wait or "outputSchema" not in info:
            return result
        return check_result(info, result, target.diag)
    if timeout is not None:
        seconds = timeout
    else:  # budget.for_tool(tool), inline
        seconds = budget.toolSeconds.get(tool, budget.requestSeconds) if budget.toolSeconds else budget.requestSeconds
    try:
        if on_progress is not None:
            result = await _send(target, session, params, seconds, on_progress)
        elif budget.resetOnProgress:  # the common case, inlined: progress restarts the timeout
            clock = RequestClock(seconds, budget.maxTotalSeconds)
            routes = target.progress
            token = routes.ticking(clock)
            params["_meta"] = {"progressToken": token}
            try:
                result = await session.request("tools/call", params, timeout=seconds, clock=clock)
            finally:
                routes.close(token)
        else:
            result = await session.request("tools/call", params, timeout=seconds)
    except SessionExpired:
        # not processed by the server: once more, in the session the server is opening now
        renewed = await target.next_session(session, seconds)
        if renewed is None:
            raise
        result = await _send(target, renewed, params, seconds, on_progress)
    except ClosedError as exc:  # the transport ended on an auth failure (another request met it first)
        auth = auth_failure(exc)
        if auth is None:
            raise
        raise AuthRequired(auth.reason, next_step=auth.next_step, scopes=auth.scopes, status=auth.status) from None
    if session.modern is not None and result.get("resultType") == "task":  # the tasks extension (2026-07-28)
        from kxen_core.runtime.tasks import follow_modern_call

        live = target.session or session
        result = await follow_modern_call(
            target, live, result, tool=tool, timeout=timeout, on_progress=on_progress, wait=wait
        )
    if note is not None:
        note.replied()
    # a tool without an outputSchema has nothing to check
    return check_result(info, result, target.diag) if "outputSchema" in info else result


def not_offered(server: str, tool: str, why: str) -> PolicyDenied:
    """The refusal of a call of a tool the model is not shown (:mod:`.server_filters`)."""
    return PolicyDenied(
        f"tool {tool!r} of server {server!r} is not offered to the model: {why}; nothing was sent "
        "(kxen mcp tools --all lists every hidden tool and why)",
        for_agent=f"{server}__{tool} is not available: {why}",
    )


async def timed_call_tool(
    rt: CallHost,
    name: str,
    arguments: Mapping[str, Any] | None,
    *,
    server: str | None,
    timeout: float | None,
    on_progress: ProgressCallback | None,
    note: Note | None = None,
    **task: bool,
) -> dict[str, Any]:
    """:func:`call_tool`, logged with its time and outcome (``kxen.calls`` at info level, ``kxen
    -v``); the arguments are never logged. ``Runtime.call_tool`` takes this path only while that
    logger is enabled, so a call without logging pays one level check."""
    shown = f"{server}/{name}" if server else name
    start = time.monotonic()
    try:
        result = await call_tool(
            rt, name, arguments, server=server, timeout=timeout, on_progress=on_progress, note=note, **task
        )
    except BaseException as exc:
        log.info("call %s: %s after %.1f ms", shown, type(exc).__name__, (time.monotonic() - start) * 1000)
        raise
    outcome = "isError" if isinstance(result, dict) and result.get("isError") else "ok"
    log.info("call %s: %s in %.1f ms", shown, outcome, (time.monotonic() - start) * 1000)
    return result


async def tool_policy(rt: CallHost, server: str, tool: str) -> tuple[str, list[str]]:
    """What the policy votes decide for a call of ``tool`` with no arguments (``allow``, ``ask`` or
    ``deny``) and why: what a person sees in ``kxen mcp tools``. A vote that looks at the arguments
    may still decide otherwise for a real call. ``allowReadOnly`` and a definition not accepted
    (pinning warn) count as they do for a call (:func:`kxen_core.policy.approvals.authorize`)."""
    from kxen_core.policy import Vote, combine
    from kxen_core.policy.claims import read_only_vote
    from kxen_core.policy.pins import UNACCEPTED
    from kxen_core.policy.votes import full_votes

    target = rt._server(server)
    call = ToolCall(
        server=target.config,
        tool=tool,
        arguments={},
        role=rt.role,
        tool_info=target.tools_by_name.get(tool, {}),
        settings=rt.config.settings if rt.config else None,
        launch=target.launch,
        pin_state=target.pin_states.get(tool, ""),
    )
    decision, why = combine(await full_votes(rt.pm, call), target.config.defaultToolPolicy)
    if decision == "ask" and (lifted := read_only_vote(call, why)) is not None:
        decision, why = "allow", [lifted]
    if decision == "allow" and call.pin_state in UNACCEPTED:
        decision, why = "ask", [Vote(decision="ask", reason="its definition is not accepted", plugin="pins")]
    return decision, [f"{v.plugin}: {v.reason}" for v in why]


async def _launch_and_call(rt: CallHost, target: Server, tool: str, arguments: Mapping[str, Any] | None) -> None:
    """A call of ``tool`` to a server whose launch waits for its approval: when the call would need
    an approval as well, one ``ApprovalDenied`` names both fingerprints (approving the launch
    alone would only lead to a second denial). Returns when the call itself would not ask."""
    from kxen_core.errors import ApprovalDenied
    from kxen_core.policy import combine
    from kxen_core.policy.approvals import call_fingerprint
    from kxen_core.policy.votes import full_votes

    launch = target.awaiting_launch
    assert launch is not None
    call = ToolCall(
        server=target.config,
        tool=tool,
        arguments=dict(arguments) if arguments else {},
        role=rt.role,
        tool_info={},  # not listed yet: the server never ran
        settings=rt.config.settings if rt.config else None,
        launch=launch,  # what the call is bound to once this launch runs
        pin=_pinned_digest(target, launch, tool),  # the definition pinned when this launch listed before
    )
    decision, _why = combine(await full_votes(rt.pm, call), target.config.defaultToolPolicy)
    if decision != "ask":
        return
    label, fp = call.qualified_name, call_fingerprint(call)
    raise ApprovalDenied(
        f"server {target.name!r} is awaiting_approval: its launch needs approval (fingerprint {launch.fingerprint}), "
        f"and this call of {label} needs approval too (fingerprint {fp}). To allow both for one run: "
        f"kxen --approve {launch.fingerprint[:16]} --approve {fp[:16]}",
        for_agent=f"{label} was not run: its server's launch and the call need the user's approval",
    )


def _pinned_digest(target: Server, launch: Any, tool: str) -> str:
    """The digest pinned for ``tool`` under this launch's identity, "" when none is (or the store
    cannot be read: the call is then asked with the fingerprint its first listing gives)."""
    from kxen_core.policy.approvals import server_identity
    from kxen_core.policy.pin_store import PinStoreError, pin_store
    from kxen_core.policy.pins import identity_key

    try:
        entry = pin_store().document()["servers"].get(identity_key(server_identity(target.config, launch)))
    except (PinStoreError, OSError):
        return ""
    tools = entry.get("tools") if isinstance(entry, dict) else None
    record = tools.get(tool) if isinstance(tools, dict) else None
    digest = record.get("digest") if isinstance(record, dict) else None
    return digest if isinstance(digest, str) else ""


async def _send(
    target: Server,
    session: Session,
    params: dict[str, Any],
    timeout: float,
    on_progress: ProgressCallback | None,
) -> dict[str, Any]:
    """The call, asking for progress: for the host's ``on_progress``, and, with ``resetOnProgress``
    (the default), so that each progress notification gives the call its timeout again, at most
    ``maxTotalSeconds`` from now (:mod:`kxen_core.protocol.clock`)."""
    budget = target.config.timeouts
    clock = RequestClock(timeout, budget.maxTotalSeconds) if budget.resetOnProgress else None
    params = {k: v for k, v in params.items() if k != "_meta"}  # a retry: a new token
    if on_progress is None:
        if clock is None:
            return await session.request("tools/call", params, timeout=timeout)
        token = target.progress.ticking(clock)
        try:
            asked = {**params, "_meta": {"progressToken": token}}
            return await session.request("tools/call", asked, timeout=timeout, clock=clock)
        finally:
            target.progress.close(token)
    async with target.progress.route(on_progress, clock) as token:
        asked = {**params, "_meta": {"progressToken": token}}
        return await session.request("tools/call", asked, timeout=timeout, clock=clock)


__all__ = ["call_tool", "not_offered", "tool_policy"]

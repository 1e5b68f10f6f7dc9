"""Approvals: count the policy votes on a tool call, ask a channel, remember what was approved.

:func:`authorize` lets every ``kxen_policy_decision`` implementation vote on a call (deny beats ask
beats allow) and sends an ``ask`` to :class:`Approvals`.

A request with a fingerprint (a project launch, a tool call with its arguments) that was approved
once in this process -- by a channel, or up front with ``--approve`` -- is not asked again. A tool
call's fingerprint is bound to the server's identity (:func:`server_identity`: scope, kind, and the
launch fingerprint of a local server or the canonical URL of a remote one), not only its name: when
a reload puts something else behind the name, the same call is asked again; and to the digest of
the tool's definition (``ToolCall.pin``, :mod:`kxen_core.policy.pins`): a remembered yes does not
carry over to a changed definition, and an allow of a definition nobody accepted asks. Channels
are asked one request at a time (a person answers one prompt at a time); with no channel, or a
channel that fails, the answer is no. Nothing is persisted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import attrs

from kxen_core.errors import ApprovalDenied, KxenError, PolicyDenied
from kxen_core.hookcall import acall_first
from kxen_core.policy import ApprovalDecision, ApprovalRequest, ToolCall, Vote, combine, fingerprint
from kxen_core.policy.argument_guard import masked
from kxen_core.policy.claims import claims, read_only_vote
from kxen_core.policy.pins import UNACCEPTED
from kxen_core.policy.votes import PreparedVotes, full_votes
from kxen_core.safe_text import safe_text, shown_url

if TYPE_CHECKING:
    import pluggy

    from kxen_core.config.models import ServerConfig
    from kxen_core.launch.resolve import Launch

log = logging.getLogger("kxen.approvals")

_EARLIER = ApprovalDecision(approved=True, reason="approved earlier in this process", channel="process")


#: the shortest fingerprint prefix ``--approve`` takes (48 bits: no accidental match in practice)
MIN_PREFIX = 12


class Approvals:
    def __init__(self, pm: pluggy.PluginManager, approved: Iterable[str] = ()) -> None:
        self.pm = pm
        #: fingerprints approved for this process (launches, tool calls), or prefixes of at least
        #: MIN_PREFIX characters of them; never persisted
        self.approved: set[str] = set(approved)
        #: a prefix stands for the first fingerprint it matched; a second one it matches is not approved
        self._bound: dict[str, str] = {}
        self._lock = anyio.Lock()
        #: writes ``toolPolicies: {tool: allow}`` for a request answered "always" (set by the Runtime:
        #: the user's config, never a project file); returns what it wrote, for the log
        self.allow_always: Callable[[ApprovalRequest], str] | None = None
        #: called with True just before a channel is asked and with False once it answered: a host
        #: that draws on the terminal (the ``kxen`` command's status spinner) stops while a channel
        #: may be prompting there
        self.prompt_listeners: list[Callable[[bool], None]] = []
        #: how many channels are being asked now (0 or 1: one prompt at a time)
        self.prompting = 0
        #: a channel asked before the plugins' (an object with ``kxen_approval_prompt``): the
        #: approvals a host's UI holds for this runtime (``Runtime.hold_approvals``); None = none
        self.held: Any = None

    def is_approved(self, fingerprint: str | None) -> bool:
        if not fingerprint:
            return False
        if fingerprint in self.approved:
            return True
        for prefix in self.approved:
            if len(prefix) >= MIN_PREFIX and len(prefix) < len(fingerprint) and fingerprint.startswith(prefix):
                bound = self._bound.setdefault(prefix, fingerprint)
                if bound == fingerprint:
                    return True
                log.warning("--approve %s matches more than one fingerprint: give more of it", prefix)
        return False

    def _earlier(self, request: ApprovalRequest) -> bool:
        return self.is_approved(request.fingerprint) or bool(request.tool_key and request.tool_key in self.approved)

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        """A fingerprint approved in this process, else the held channel (:attr:`held`) or the
        first channel that answers, else no.

        A yes is remembered as the channel says (``ApprovalDecision.remember``, among the request's
        ``remember_choices``): not at all (once), this exact request (call), the tool for the process
        (tool), or the tool always (the user's ``toolPolicies``, written by :attr:`allow_always`)."""
        if self._earlier(request):
            return _EARLIER
        async with self._lock:  # one prompt at a time
            if self._earlier(request):
                return _EARLIER  # approved while this request waited for the lock
            self._tell(True)
            try:
                held = self.held
                answer = await held.kxen_approval_prompt(request=request) if held is not None else None
                if answer is None:
                    answer = await acall_first(self.pm, "kxen_approval_prompt", request=request)
            except KxenError as exc:
                log.warning("approval channel failed: %s", safe_text(exc))  # may go to a terminal as is
                return ApprovalDecision(approved=False, reason=f"approval channel failed: {exc}")
            finally:
                self._tell(False)
        if not isinstance(answer, ApprovalDecision):
            if answer is None:
                return ApprovalDecision(approved=False, reason="no approval channel is available")
            # fail closed, and say why: a bare True is not a yes (the hook returns a decision)
            what = type(answer).__name__
            log.warning("an approval channel answered a %s, not an ApprovalDecision: denied", what)
            why = f"the approval channel answered a {what}, not an ApprovalDecision"
            return ApprovalDecision(approved=False, reason=why)
        if answer.approved:
            answer = self._remember(request, answer)
        if not answer.approved and not answer.reason:
            answer = attrs.evolve(answer, reason="declined")
        return answer

    def _tell(self, prompting: bool) -> None:
        self.prompting += 1 if prompting else -1
        for listener in list(self.prompt_listeners):
            try:
                listener(prompting)
            except Exception as exc:  # a listener must not decide an approval
                log.warning("an approval prompt listener failed: %s", safe_text(f"{type(exc).__name__}: {exc}"))

    def _remember(self, request: ApprovalRequest, answer: ApprovalDecision) -> ApprovalDecision:
        how = answer.remember if answer.remember in request.remember_choices else "call"
        if how == "always" and self.allow_always is not None:
            try:
                log.info("%s", self.allow_always(request))
            except Exception as exc:  # the call is still approved; only the lasting rule failed
                log.warning("could not write the allow rule: %s", safe_text(exc))
                answer = attrs.evolve(answer, reason=f"approved; the lasting rule was not written: {exc}")
            how = "tool"
        if how == "tool" and request.tool_key:
            self.approved.add(request.tool_key)
        elif how != "once" and request.fingerprint:
            self.approved.add(request.fingerprint)
        return attrs.evolve(answer, remember=how)


def canonical_url(url: str) -> str:
    """``url`` with the scheme and host lower-cased, a default port dropped, an empty path as ``/``
    and no fragment: two spellings of one endpoint are one identity."""
    try:
        parts = urlsplit(url)
        host, port = (parts.hostname or ""), parts.port
    except ValueError:
        return url
    scheme = parts.scheme.lower()
    if ":" in host:
        host = f"[{host}]"
    if port is not None and (scheme, port) not in (("https", 443), ("http", 80)):
        host = f"{host}:{port}"
    return urlunsplit((scheme, host, parts.path or "/", parts.query, ""))


def server_identity(server: ServerConfig, launch: Launch | None = None) -> dict[str, Any]:
    """What stands behind a server's name: its scope and transport kind, and the canonical URL of a
    remote server or the fingerprint of a local server's launch (from its config when the resolved
    ``launch`` is not known)."""
    identity: dict[str, Any] = {"scope": server.scope, "kind": server.kind}
    if server.is_remote:
        identity["url"] = canonical_url(server.url or "")
    elif launch is not None:
        identity["launch"] = launch.fingerprint
    else:
        identity["config"] = fingerprint(
            {
                "command": server.command,
                "args": server.args,
                "cwd": server.cwd,
                "env": server.env,
                "options": server.options,
            }
        )
    return identity


def call_fingerprint(call: ToolCall) -> str:
    """The fingerprint of one tool call: server name and identity, tool, arguments, and the digest
    of the tool's definition when it is known (``call.pin``): a yes for one definition is not a yes
    for another."""
    payload = {
        "server": call.server.name,
        "identity": server_identity(call.server, call.launch),
        "tool": call.tool,
        "arguments": call.arguments,
    }
    if call.pin:
        payload["pin"] = call.pin
    return fingerprint(payload)


def tool_key(call: ToolCall) -> str:
    """What "allow this tool for the process" remembers: the tool, bound to the server's identity
    and to the digest of the tool's definition when it is known."""
    payload = {"server": call.server.name, "identity": server_identity(call.server, call.launch), "tool": call.tool}
    if call.pin:
        payload["pin"] = call.pin
    return "tool:" + fingerprint(payload)


def _where(server: ServerConfig, launch: Launch | None) -> dict[str, Any]:
    """What an approval request shows about the server: scope, file, kind, URL or launch."""
    shown: dict[str, Any] = {"scope": server.scope, "source": server.source, "transport": server.kind}
    if server.is_remote:
        shown["url"] = shown_url(server)  # as written where it took ${VAR}: those values are secrets
    elif launch is not None:
        shown["launch"] = launch.display()
    else:
        shown["command"] = server.command
    return shown


async def authorize(
    pm: pluggy.PluginManager,
    call: ToolCall,
    approvals: Approvals,
    *,
    prepared: PreparedVotes | None = None,
    note: Any = None,
) -> None:
    """Let every policy plugin vote on ``call``; raise ``PolicyDenied`` on deny, and on ask raise
    ``ApprovalDenied`` unless ``approvals`` gets a yes. Returns when the call may go out. The error
    message names the votes and the next step (:func:`how_to_allow`); its ``for_agent`` is the short,
    path-free reason the model gets ("denied by policy", "needs the user's approval").

    With ``prepared`` (the same ``pm``'s), the votes that cannot change between calls of the tool
    are counted once (:mod:`kxen_core.policy.votes`); the votes and the decision are the same.
    ``note`` (a :class:`kxen_core.policy.audit.Note`) is told the decision and the answer."""
    if prepared is not None:
        decision, why = await prepared.decide(call)
    else:
        decision, why = combine(await full_votes(pm, call), call.server.defaultToolPolicy)
    if decision == "ask" and (lifted := read_only_vote(call, why)) is not None:
        decision, why = "allow", [lifted]  # allowReadOnly: the user trusts their own server's pinned claim
    if decision == "allow" and call.pin_state in UNACCEPTED:
        # an allow was given under the definition accepted before ("always", toolPolicies, a
        # project_tools rule): a definition nobody accepted asks again (pinning warn)
        decision, why = "ask", [Vote(decision="ask", reason=_unaccepted(call), plugin="pins")]
    if note is not None:
        note.voted(decision, why)
    if decision == "allow":
        return
    label = call.qualified_name  # <server>__<tool> with the server's own tool name: for a human
    if decision == "deny":
        reasons = "; ".join(f"{v.plugin}: {v.reason}" for v in why)
        raise PolicyDenied(f"{label} denied by policy ({reasons})", why, for_agent=f"{label} denied by policy")
    if decision == "ask":
        fp = call_fingerprint(call)
        where = _where(call.server, call.launch)
        request = ApprovalRequest(
            kind="tool_call",
            server=call.server.name,
            summary=f"call tool {label} on the {call.server.scope} server {call.server.name!r}"
            + (f" at {where['url']}" if "url" in where else ""),
            details={
                "tool": call.tool,
                # as a person may see them: no secret kxen holds, no credential shape in full
                "arguments": masked(call.arguments, call.secrets),
                "why": [v.reason for v in why],
                **claims(call.server, call.tool_info, call.pin_state),  # title, annotations, whose claims, the pin
                **where,
            },
            fingerprint=fp,
            tool_key=tool_key(call),
            # "always" writes the user's toolPolicies: never for a project server (nor a project
            # file), nor for a server of the host's own mapping (kxen writes no host's config)
            remember_choices=("once", "call", "tool") + (("always",) if _writable(call.server) else ()),
        )
        if call.pin_state == "first" and approvals.is_approved(call_fingerprint(attrs.evolve(call, pin=""))):
            return  # --approve of the fingerprint printed before the server first listed (a launch that waited)
        answer = await approvals.ask(request)
        if note is not None:
            note.asked(answer)
        if not answer.approved:
            changed = f" (asked because {_unaccepted(call)})" if call.pin_state in UNACCEPTED else ""
            raise ApprovalDenied(
                f"{label} needs approval{changed}: {answer.reason}. {how_to_allow(call, fp)}",
                for_agent=f"{label} was not run: it needs the user's approval",
            )


def _writable(server: ServerConfig) -> bool:
    """Whether "always" may write ``server``'s ``toolPolicies``: a user server of the user's file."""
    from kxen_core.config.host import held_by_host

    return server.scope == "user" and not held_by_host(server.source)


def _unaccepted(call: ToolCall) -> str:
    name = call.server.name
    if call.pin_state == "unchecked":
        return "its definition could not be checked against its pin (the pin store cannot be used): asked again"
    return (
        f"its definition changed since it was accepted (see it: kxen mcp pins diff {name} {call.tool}; "
        f"accept it: kxen mcp pins accept {name} {call.tool}): asked again"
    )


def how_to_allow(call: ToolCall, fp: str) -> str:
    """The exact ways to allow a call that was not approved: this call once (a fingerprint prefix
    for ``--approve``), or the tool always (the ``toolPolicies`` line, in the user's config)."""
    once = f"To allow this exact call for one run: kxen --approve {fp[:16]} (fingerprint {fp})"
    line = f'"toolPolicies": {{"{call.tool}": "allow"}}'
    if call.server.scope == "project":
        return f"{once}; a project file may not allow tools (a repository must not approve its own tools)."
    where = call.server.source or "the user mcp.json"
    return f"{once}; to allow the tool always: {line} in server {call.server.name!r} of {where}."


__all__ = [
    "MIN_PREFIX",
    "Approvals",
    "authorize",
    "how_to_allow",
    "call_fingerprint",
    "canonical_url",
    "server_identity",
]

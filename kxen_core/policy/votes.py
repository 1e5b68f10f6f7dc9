"""The policy votes on a tool call: counted in full, or with their fixed part prepared once.

:func:`full_votes` asks every ``kxen_policy_decision`` implementation, in pluggy's order, and turns
each answer into a :class:`Vote` carrying its plugin's name (an implementation that raises, or
answers something that is not a vote, is a ``deny``).

Two of the core's own votes cannot change between calls of one tool: the config vote
(:class:`~kxen_core.policy.defaults.ConfigPolicy`: the server's ``toolPolicies`` and ``defaultToolPolicy``,
and for a project server the user's ``[[project_tools]]`` rules bound to its launch)
and the role vote (:class:`~kxen_core.policy.defaults.RolePolicy`: the acting role and the user's roles).
They read the server's config, the tool's name, the role, the settings and the launch, nothing else.
:class:`PreparedVotes` counts them once per tool and keeps them, in their place among the other
votes, with the inputs they were counted from: the server's config object, the role, the settings
object, the launch object and the list of implementations. A call whose inputs differ in any way (a reload, a new
catalog entry behind a kept name, another role, a plugin registered or removed) is prepared again.
Every other implementation -- the safety check on the arguments and every plugin's -- is asked on
every call, in its place. So the votes, their order and their reasons are exactly those of
:func:`full_votes`; a property test compares the two over random configs, roles, tools, arguments
and plugins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from kxen_core import hookcall
from kxen_core.errors import PluginHookError
from kxen_core.policy import Decision, ToolCall, Vote, argument_guard, combine
from kxen_core.policy.argument_guard import ArgumentGuard
from kxen_core.policy.defaults import ConfigPolicy, RolePolicy, SafetyCheck, flat_strings

if TYPE_CHECKING:
    import pluggy

HOOK = "kxen_policy_decision"
#: implementations whose vote depends only on (server config, tool, role, settings)
_FIXED = frozenset({ConfigPolicy.kxen_policy_decision, RolePolicy.kxen_policy_decision})
#: prepared tools kept at most (a new catalog may leave stale names behind: then start over)
MAX_PREPARED = 4096


def _as_deny(err: PluginHookError) -> Vote:
    return Vote.deny(f"policy plugin failed: {err}")


def _vote(plugin: str, answer: Any) -> Vote:
    if not isinstance(answer, Vote) or answer.decision not in ("allow", "ask", "deny"):
        # an answer that is not a valid vote is a broken plugin: fail closed, name it
        answer = Vote.deny(f"returned {type(answer).__name__} instead of a Vote")
    return attrs.evolve(answer, plugin=plugin)


async def full_votes(pm: pluggy.PluginManager, call: ToolCall) -> list[Vote]:
    """Every implementation's vote on ``call`` (abstentions left out), in pluggy's order."""
    answers = await hookcall.acall_all(pm, HOOK, call=call, on_error=_as_deny)
    return [_vote(plugin, answer) for plugin, answer in answers]


async def _ask(impl: Any, call: ToolCall) -> Vote | None:
    try:
        answer = await hookcall.acall_one(impl, HOOK, {"call": call})
    except PluginHookError as err:
        answer = _as_deny(err)
    return None if answer is None else _vote(impl.plugin_name, answer)


#: the core's votes on the arguments: abstaining whenever their shortcut (``allowed_outright``) passes
_ARGUMENT_CHECKS = frozenset({SafetyCheck.kxen_policy_decision, ArgumentGuard.kxen_policy_decision})


def _is_safety(impl: Any) -> bool:
    return getattr(impl.function, "__func__", None) in _ARGUMENT_CHECKS


def fixed(impl: Any) -> bool:
    """Whether ``impl`` is one of the core's votes that depend on nothing but the tool's config."""
    return getattr(impl.function, "__func__", None) in _FIXED


class _Plan:
    """One tool's votes: the fixed ones counted, the others to ask, and the inputs they came from."""

    __slots__ = (
        "server",
        "role",
        "settings",
        "launch",
        "impls",
        "slots",
        "ask",
        "fixed_votes",
        "decided",
        "allows_flat",
    )

    def __init__(self, call: ToolCall, impls: list[Any], slots: list[Any]) -> None:
        self.server, self.role, self.settings, self.impls = call.server, call.role, call.settings, impls
        self.launch = call.launch  # a project server's user rule is bound to its exact launch
        self.slots = tuple(slots)  # a Vote (fixed, counted) or an implementation to ask per call
        self.ask = tuple(s for s in slots if type(s) is not Vote)
        self.fixed_votes = [s for s in slots if type(s) is Vote]
        #: the decision when every implementation asked per call abstains
        self.decided = combine(self.fixed_votes, call.server.defaultToolPolicy)
        #: allowed whenever the arguments pass the safety check's shortcut: the only implementation
        #: asked per call is the core's safety check, and the fixed votes allow
        self.allows_flat = self.decided[0] == "allow" and all(_is_safety(i) for i in self.ask)

    def fits(self, call: ToolCall, impls: list[Any]) -> bool:
        return (
            self.server is call.server
            and self.role == call.role
            and self.settings is call.settings
            and self.launch is call.launch
            and self.impls == impls
        )


class PreparedVotes:
    """The votes of one plugin manager's implementations, the fixed ones prepared per tool."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.pm = pm
        self._plans: dict[tuple[str, str], _Plan] = {}
        self._impls_seen: tuple[int, list[Any]] | None = None  # (the pm's generation, its implementations)

    def _impls(self) -> list[Any]:
        """The implementations in pluggy's order; listed again only when the plugin manager says
        its plugins changed (``KxenPluginManager.generation``; any other manager: every time)."""
        generation = getattr(self.pm, "generation", None)
        seen = self._impls_seen
        if generation is not None and seen is not None and seen[0] == generation:
            return seen[1]
        impls = hookcall.impls(self.pm, HOOK)
        if generation is not None:
            self._impls_seen = (generation, impls)
        return impls

    def allowed_outright(
        self,
        server: Any,
        tool: str,
        role: str | None,
        settings: Any,
        arguments: dict[str, Any],
        launch: Any = None,
        secrets: Any = None,
    ) -> bool:
        """True when a call of ``tool`` with ``arguments`` (a plain dict) is surely allowed, without
        a :class:`ToolCall` or a vote: its tool is prepared for exactly these inputs, every
        implementation asked per call is one of the core's checks of the arguments (the safety
        check, the argument guard), their shortcuts pass the arguments (so they abstain) and the
        fixed votes allow. False means "count the votes"."""
        plan = self._plans.get((server.name, tool))
        if not (
            plan is not None
            and plan.allows_flat
            and plan.server is server
            and plan.role == role
            and plan.settings is settings
            and plan.launch is launch
            and plan.impls == self._impls()
            and not hookcall.tracing()
        ):
            return False
        strings: list[str] = []
        values: list[str] = []
        # the safety check's shortcut and the argument guard's strings in one walk
        return flat_strings(arguments, strings, values) and argument_guard.clear_strings(
            server, strings, values, secrets
        )

    def outright_why(self, server: Any, tool: str) -> list[Vote]:
        """The votes that allowed a call :meth:`allowed_outright` passed (for the audit trail)."""
        plan = self._plans.get((server.name, tool))
        return list(plan.decided[1]) if plan is not None else []

    async def votes(self, call: ToolCall) -> list[Vote]:
        """The same list of votes as :func:`full_votes` gives for ``call``."""
        if hookcall.tracing():  # tracing shows every implementation on every call
            return await full_votes(self.pm, call)
        return (await self._count(call))[0]

    async def decide(self, call: ToolCall) -> tuple[Decision, list[Vote]]:
        """``combine(votes(call), call.server.defaultToolPolicy)``: the decision and the votes that
        made it (when every implementation asked per call abstains: the one prepared with the plan)."""
        if hookcall.tracing():
            return combine(await full_votes(self.pm, call), call.server.defaultToolPolicy)
        votes, plan, voted = await self._count(call)
        if not voted:
            decision, why = plan.decided
            return decision, list(why)
        return combine(votes, call.server.defaultToolPolicy)

    async def _count(self, call: ToolCall) -> tuple[list[Vote], _Plan, bool]:
        """This call's votes in order, its plan, and whether any implementation asked per call voted."""
        impls = self._impls()
        key = (call.server.name, call.tool)
        plan = self._plans.get(key)
        if plan is None or not plan.fits(call, impls):
            plan = await self._prepare(call, impls)
            if len(self._plans) >= MAX_PREPARED:
                self._plans.clear()
            self._plans[key] = plan
        if not plan.ask:
            return list(plan.fixed_votes), plan, False
        out: list[Vote] = []
        voted = False
        kwargs = {"call": call}
        for slot in plan.slots:
            if type(slot) is Vote:
                out.append(slot)
                continue
            try:
                answer = await hookcall.acall_one(slot, HOOK, kwargs)
            except PluginHookError as err:
                answer = _as_deny(err)
            if answer is not None:
                out.append(_vote(slot.plugin_name, answer))
                voted = True
        return out, plan, voted

    def forget(self) -> None:
        """Drop every prepared vote (they are checked against their inputs anyway)."""
        self._plans.clear()

    async def _prepare(self, call: ToolCall, impls: list[Any]) -> _Plan:
        slots: list[Any] = []
        for impl in impls:
            if not fixed(impl):
                slots.append(impl)
                continue
            vote = await _ask(impl, call)
            if vote is not None:
                slots.append(vote)
        return _Plan(call, impls, slots)


__all__ = ["PreparedVotes", "full_votes"]

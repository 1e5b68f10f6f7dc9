"""Prepared policy votes (kxen_core/policy/votes.py) give exactly the full vote (and the runtime's
"allowed outright" shortcut only when the full vote allows), and the safety check's shortcut for
flat arguments gives exactly the walk's answer.

The property tests draw configs (toolPolicies, defaultToolPolicy), roles, tools, arguments and
extra policy plugins (voting, abstaining, raising, answering garbage, looking at the arguments,
sync and async), and compare :class:`PreparedVotes` with :func:`full_votes` call by call on one
prepared instance, so a stale prepared vote (a changed config, role, settings or plugin list) shows
as a difference. The runtime test proves the same on a real stdio server through ``call_tool``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import demo_entry

from kxen_core import hookimpl
from kxen_core.config.converter import make_converter
from kxen_core.config.models import ServerConfig, Settings
from kxen_core.errors import PolicyDenied
from kxen_core.plugins.manager import make_plugin_manager
from kxen_core.policy import ToolCall, Vote, combine
from kxen_core.policy.defaults import MAX_ARGUMENT_BYTES, SafetyCheck, _flat_and_small, full_safety_check
from kxen_core.policy.votes import PreparedVotes, full_votes
from kxen_core.runtime.workspace import Runtime

TOOLS = ("echo", "read_a", "write_b", "del_c")
DECISIONS = ("allow", "ask", "deny")

# --- strategies -------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)
odd_values = st.sampled_from([b"bytes", {1, 2}, object(), 10**5000, ("a", "tuple")])
arguments = st.one_of(
    st.dictionaries(st.text(max_size=8), scalars, max_size=6),  # the flat shape the shortcut takes
    st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    st.dictionaries(st.text(max_size=8), st.one_of(scalars, odd_values), max_size=4),
    st.dictionaries(st.sampled_from([1, 2.5, None, True, ("k",)]), scalars, min_size=1, max_size=2),
    st.lists(scalars, max_size=3),  # not an object
)


@st.composite
def server_configs(draw: Any) -> ServerConfig:
    policies = draw(st.dictionaries(st.sampled_from(TOOLS), st.sampled_from(DECISIONS), max_size=3))
    return ServerConfig(
        name=draw(st.sampled_from(["srv", "other"])),
        command="x",
        toolPolicies=policies,
        defaultToolPolicy=draw(st.sampled_from(DECISIONS)),
    )


patterns = st.lists(st.sampled_from(["*", "srv__*", "*__read_*", "srv__echo", "other__*", "x"]), max_size=2)


@st.composite
def user_settings(draw: Any) -> Settings:
    roles = draw(
        st.dictionaries(
            st.sampled_from(["dev", "ro"]),
            st.fixed_dictionaries({"allow": patterns, "ask": patterns, "deny": patterns}),
            max_size=2,
        )
    )
    return make_converter().structure({"roles": roles}, Settings)


class Plugin:
    """A policy plugin of a drawn behaviour."""

    def __init__(self, behaviour: str, name: str, is_async: bool) -> None:
        self.behaviour, self.__name__ = behaviour, name
        if is_async:

            async def vote(call: ToolCall) -> Any:
                return self.answer(call)

        else:

            def vote(call: ToolCall) -> Any:
                return self.answer(call)

        self.kxen_policy_decision = hookimpl(vote)

    def answer(self, call: ToolCall) -> Any:
        b = self.behaviour
        if b in DECISIONS:
            return Vote(decision=b, reason=f"{self.__name__} says {b}")  # type: ignore[arg-type]
        if b == "abstain":
            return None
        if b == "raise":
            raise RuntimeError("broken plugin")
        if b == "garbage":
            return "allow"
        # looks at the arguments: the part no prepared vote may keep
        return Vote.deny("has x") if isinstance(call.arguments, dict) and "x" in call.arguments else None


plugins = st.lists(
    st.tuples(st.sampled_from([*DECISIONS, "abstain", "raise", "garbage", "by-args"]), st.booleans()),
    max_size=3,
)
calls = st.tuples(
    st.integers(0, 2),  # which server config
    st.integers(0, 1),  # which settings
    st.sampled_from([None, "dev", "ro", "ghost"]),
    st.sampled_from(TOOLS),
    arguments,
    st.sampled_from(["keep", "add", "remove"]),  # change the plugins before this call
)


def run(coro_fn: Any, *args: Any) -> Any:
    return anyio.run(coro_fn, *args)


def _key(votes: list[Vote]) -> list[tuple[str, str, str]]:
    return [(v.decision, v.reason, v.plugin) for v in votes]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    configs=st.lists(server_configs(), min_size=3, max_size=3),
    settings_=st.lists(user_settings(), min_size=2, max_size=2),
    extra=plugins,
    sequence=st.lists(calls, min_size=1, max_size=8),
    more=plugins,
)
def test_prepared_votes_equal_the_full_vote(configs, settings_, extra, sequence, more):
    pm = make_plugin_manager(load_entrypoints=False, extra=[Plugin(b, f"p{i}", a) for i, (b, a) in enumerate(extra)])
    spare = [Plugin(b, f"late{i}", a) for i, (b, a) in enumerate(more)]
    prepared = PreparedVotes(pm)

    async def check() -> None:
        for server_i, settings_i, role, tool, args, change in sequence:
            if change == "add" and spare:
                pm.register(spare.pop())
            elif change == "remove":
                late = [p for p in pm.get_plugins() if getattr(p, "__name__", "").startswith("late")]
                if late:
                    pm.unregister(late[0])
            server = configs[server_i]
            call = ToolCall(server=server, tool=tool, arguments=args, role=role, settings=settings_[settings_i])
            full = await full_votes(pm, call)
            decision, why = combine(full, server.defaultToolPolicy)
            for _ in range(2):  # the second time the tool is prepared for exactly these inputs
                # the runtime's shortcut (no ToolCall, no vote) only ever says "allowed" when it is so
                if type(args) is dict and prepared.allowed_outright(server, tool, role, settings_[settings_i], args):
                    assert decision == "allow"
                assert _key(await prepared.votes(call)) == _key(full)
                got_decision, got_why = await prepared.decide(call)
                assert (got_decision, _key(got_why)) == (decision, _key(why))

    run(check)


def test_the_shortcut_is_not_sure_past_the_guards_bound_of_strings():
    from kxen_core.policy.argument_guard import MAX_STRINGS

    server = ServerConfig(name="srv", command="x", defaultToolPolicy="allow")
    pm = make_plugin_manager(load_entrypoints=False)
    prepared = PreparedVotes(pm)
    call = ToolCall(server=server, tool="echo", arguments={})
    assert run(prepared.decide, call)[0] == "allow"  # the tool is prepared
    assert prepared.allowed_outright(server, "echo", None, None, {"q": "x"})
    many = {chr(0x4E00 + i): "" for i in range(MAX_STRINGS // 2 + 1)}  # small, flat, too many strings
    assert _flat_and_small(many)
    assert not prepared.allowed_outright(server, "echo", None, None, many)  # counted in full instead


# --- the safety check's shortcut ---------------------------------------------------------------

big_text = st.builds(
    lambda ch, n: ch * n,
    st.sampled_from(["a", "é", "\U0001f600", "\x00", '"', "\ud800"]),
    st.integers(0, 200_000),
)
flat = st.dictionaries(
    st.text(max_size=6) | big_text,
    st.one_of(scalars, big_text, st.integers(min_value=-(2**64), max_value=2**64)),
    max_size=8,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=flat | arguments)
def test_the_safety_shortcut_gives_the_walks_answer(args):
    call = ToolCall(server=ServerConfig(name="srv", command="x"), tool="echo", arguments=args)
    got = SafetyCheck().kxen_policy_decision(call)
    assert got == full_safety_check(args)
    if type(args) is dict and _flat_and_small(args):
        assert got is None  # the shortcut only ever says "fine"


def test_the_shortcut_bound_is_never_below_the_real_size():
    """The shortcut's size bound holds for the worst characters, right at the limit."""
    for ch in ("a", "é", "\U0001f600", "\x00", "\ud800"):
        n = MAX_ARGUMENT_BYTES // 12 - 2
        args = {"k": ch * n}
        real = len(json.dumps(args, separators=(",", ":")).encode())
        assert _flat_and_small(args) is (real <= MAX_ARGUMENT_BYTES)  # at this size both fit
        assert full_safety_check(args) is None


# --- through the runtime, on a real stdio server -------------------------------------------------


class Denier:
    __name__ = "late-denier"

    @hookimpl
    def kxen_policy_decision(self, call: ToolCall) -> Vote | None:
        return Vote.deny("registered late")


@pytest.mark.anyio
async def test_prepared_votes_follow_reloads_roles_and_plugins(kxen_home, tmp_path: Path, monkeypatch):
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.chdir(ws)  # an empty workspace: the demo server is not a held launch
    log = tmp_path / "demo.log"
    kxen_home.write_settings('[roles.dev]\nallow = ["demo__*"]\n')
    kxen_home.write_servers({"demo": demo_entry(log, toolPolicies={"echo": "allow"})})
    pm = make_plugin_manager()

    async def echo(rt: Runtime, text: str) -> str:
        with anyio.fail_after(30):
            return (await rt.call_tool("demo__echo", {"text": text}))["content"][0]["text"]

    async def denied(rt: Runtime, why: str) -> None:
        with pytest.raises(PolicyDenied) as info, anyio.fail_after(30):
            await rt.call_tool("demo__echo", {"text": "no"})
        assert why in str(info.value)

    async with Runtime(pm=pm, role="dev", workspace=ws) as rt:
        with anyio.fail_after(30):
            assert await rt.wait_ready()
        assert await echo(rt, "one") == "one"
        assert await echo(rt, "two") == "two"  # prepared
        # the role's permissions change: the server keeps running, the prepared vote does not stay
        kxen_home.write_settings('[roles.dev]\ndeny = ["demo__echo"]\n')
        await rt.reload()
        await denied(rt, "roles.dev.deny: demo__echo")
        kxen_home.write_settings('[roles.dev]\nallow = ["demo__*"]\n')
        await rt.reload()
        assert await echo(rt, "three") == "three"
        # the config's own policy changes
        kxen_home.write_servers({"demo": demo_entry(log, toolPolicies={"echo": "deny"})})
        await rt.reload()
        with anyio.fail_after(30):
            assert await rt.wait_ready()
        await denied(rt, "toolPolicies.echo")
        kxen_home.write_servers({"demo": demo_entry(log, toolPolicies={"echo": "allow"})})
        await rt.reload()
        with anyio.fail_after(30):
            assert await rt.wait_ready()
        assert await echo(rt, "four") == "four"
        # another acting role, then a plugin registered while running, then removed
        rt.role = "ghost"
        await denied(rt, "role 'ghost' is not defined")
        rt.role = "dev"
        plugin = Denier()
        pm.register(plugin)
        await denied(rt, "late-denier: registered late")
        pm.unregister(plugin)
        assert await echo(rt, "five") == "five"
        # an argument-dependent check still runs on every call
        with pytest.raises(PolicyDenied, match="kxen.safety"), anyio.fail_after(30):
            await rt.call_tool("demo__echo", {"text": "x" * (1024 * 1024)})
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    texts = [m["params"]["arguments"]["text"] for m in sent if m.get("method") == "tools/call"]
    assert texts == ["one", "two", "three", "four", "five"]


def test_the_list_of_implementations_is_read_again_only_when_the_plugins_change():
    from kxen_core import hookimpl
    from kxen_core.plugins.manager import make_plugin_manager
    from kxen_core.policy.votes import PreparedVotes

    pm = make_plugin_manager(load_entrypoints=False)
    prepared = PreparedVotes(pm)
    first = prepared._impls()
    assert prepared._impls() is first  # nothing changed: the same list, not a new one

    class Deny:
        @hookimpl
        def kxen_policy_decision(self, call):
            return None

    plugin = Deny()
    pm.register(plugin, name="late")
    second = prepared._impls()
    assert second is not first and len(second) == len(first) + 1
    pm.unregister(plugin)
    assert prepared._impls() == first

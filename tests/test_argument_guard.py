"""The guard on what leaves (kxen_core.policy.argument_guard): a call carrying a secret the user
holds, or a well-known credential shape, asks on the user's own local server and is denied for a
project or remote one, before anything is sent; the reason names the kind, never the value."""

from __future__ import annotations

import json

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kxen_testing import Channel
from remote_support import REMOTE_PLUGINS, remote
from support import demo_entry, write_project

from kxen_core import Runtime
from kxen_core.config.trust import acknowledge_remote, trust
from kxen_core.errors import ApprovalDenied, PolicyDenied
from kxen_core.plugins import make_plugin_manager
from kxen_core.policy import argument_guard
from kxen_core.policy.approvals import canonical_url
from kxen_core.policy.argument_guard import MIN_SECRET_CHARS, SECRET, found, masked
from kxen_core.safe_text import Secrets

pytestmark = pytest.mark.anyio

WAIT = 30
TOKEN = "tok-5ecr3t-9f2a7c41"
#: a sample of each credential shape (made up, of the right form)
SHAPES = {
    "a private key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n",
    "an AWS access key": "AKIA" + "QWERTYUIOPASDFGH",
    "a GitHub token": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "a GitLab token": "glpat-" + "abcdefghij0123456789",
    "a Slack token": "xoxb-" + "1234567890-abcdefghij",
    "a Stripe secret key": "sk_live_" + "0123456789abcdefghij",
    "a Google API key": "AIza" + "SyA1234567890abcdefghijklmnopqrstuv",
    "an API secret key (sk-)": "sk-proj-" + "A" * 40,
    "a package registry token": "npm_" + "a" * 36,
}

# --- the check itself: hypothesis over where a secret can hide ---------------------------------

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)


def _plant(value, secret: str, where: int, as_key: bool):
    """``value`` with ``secret`` put in somewhere beside it: in a key, a value, nested."""
    if as_key:
        return {f"x{secret}y": value}
    return [
        {"a": value, "b": secret},
        [value, {"deep": [{"k": f"..{secret}.."}]}],
        {"list": [value, [[secret]]]},
        [{"x": value}, f"prefix {secret} suffix"],
    ][where]


@settings(max_examples=150, deadline=None)
@given(value=json_values, where=st.integers(0, 3), as_key=st.booleans())
def test_a_secret_anywhere_in_the_arguments_is_found(value, where, as_key):
    secrets = Secrets([TOKEN])
    planted = _plant(value, TOKEN, where, as_key)
    assert found({"payload": planted}, secrets) == SECRET


@settings(max_examples=100, deadline=None)
@given(cut=st.integers(1, len(TOKEN) - 1), before=text, after=text)
def test_a_secret_split_across_neighbouring_fields_is_found(cut, before, after):
    args = {"first": before + TOKEN[:cut], "second": TOKEN[cut:] + after}
    assert found(args, Secrets([TOKEN])) == SECRET


@settings(max_examples=150, deadline=None)
@given(value=json_values)
def test_no_hit_without_a_secret_or_a_shape(value):
    """Ordinary JSON (short strings) never hits: no configured secret is in it, no shape fits."""
    assert found({"v": value}, Secrets([TOKEN])) is None


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_each_credential_shape_is_found_and_masked(kind):
    args = {"note": f"here: {SHAPES[kind]} thanks"}
    assert found(args) == kind
    shown = json.dumps(masked(args))
    assert SHAPES[kind][6:] not in shown


@settings(max_examples=200, deadline=None)
@given(before=text, after=text, kind=st.sampled_from(sorted(SHAPES) + [None]), cut=st.integers(0, 8))
def test_the_one_search_for_any_shape_agrees_with_the_shapes_one_by_one(before, after, kind, cut):
    # found() searches each string once for any shape, then names which: never fewer hits
    sample = "" if kind is None else SHAPES[kind]
    string = before + sample[: len(sample) - cut] + after
    assert bool(argument_guard.ANY_SHAPE.search(string)) == any(p.search(string) for _k, p in argument_guard.SHAPES)


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_a_shape_is_looked_for_in_each_string_alone(kind):
    # the strings are searched at once, joined by newlines: that must not make a shape of two halves
    def alone(strings: list[str]) -> str | None:  # each string searched by itself, in order
        return next((k for t in strings for k, p in argument_guard.SHAPES if p.search(t)), None)

    sample = SHAPES[kind].rstrip("\n")
    for cut in range(1, len(sample)):
        halves = [sample[:cut], sample[cut:]]
        assert found(dict(zip("ab", halves, strict=True))) == alone(halves), cut
    assert found({"a": "x", "b": sample, "c": "y"}) == kind


@settings(max_examples=150, deadline=None)
@given(value=st.dictionaries(text, st.none() | st.booleans() | st.integers() | st.floats() | text, max_size=6))
def test_a_flat_call_gives_the_strings_of_the_walk(value):
    # the common call (string keys, plain scalars) skips the walk: the same strings in the same order
    walked: tuple[list[str], list[str]] = ([], [])
    argument_guard._strings(value, *walked)
    flat: tuple[list[str], list[str]] = ([], [])
    assert argument_guard._flat(value, *flat) and flat == walked
    # the votes' shortcut walks it once for the safety check and the guard: the same strings again
    from kxen_core.policy.defaults import _flat_and_small, flat_strings

    shortcut: tuple[list[str], list[str]] = ([], [])
    sure = flat_strings(value, *shortcut)
    assert sure is _flat_and_small(value)  # False only for what the safety check walks in full (a huge int)
    assert not sure or shortcut == walked


def test_the_votes_shortcut_finds_what_the_guard_finds():
    from kxen_core.policy.defaults import flat_strings

    secrets = Secrets([TOKEN])
    cases = ({"q": "plain"}, {"q": f"a {TOKEN} b"}, {TOKEN[:9]: 1, "b": TOKEN[9:]}, {"k": SHAPES["a GitHub token"]})
    for args in cases:
        strings: list[str] = []
        values: list[str] = []
        assert flat_strings(args, strings, values)
        assert argument_guard.found_in(strings, values, secrets) == found(args, secrets), args


def test_a_short_secret_is_not_looked_for():
    short = "abcd1234"[: MIN_SECRET_CHARS - 1]
    assert found({"q": f"find {short}"}, Secrets([short])) is None


def test_base64_of_a_secret_is_not_found_a_stated_non_goal():
    import base64

    assert found({"q": base64.b64encode(TOKEN.encode()).decode()}, Secrets([TOKEN])) is None


# --- through the Runtime, against real servers ----------------------------------------------


def _demo(**extra):
    return demo_entry(**{"env": {"API_TOKEN": TOKEN}, "defaultToolPolicy": "allow", **extra})


async def test_a_users_local_server_asks_and_the_approval_never_shows_the_secret(kxen_home, ws):
    """Real demo server over stdio, its tools allowed: a call carrying the server's own API_TOKEN
    asks; the channel sees the arguments with the secret as ***, and a no stops it before it is sent."""
    kxen_home.write_servers({"demo": _demo()})
    channel = Channel(approved=False, reason="no")
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"], extra=[channel]))
    async with rt:
        with anyio.fail_after(WAIT):
            assert await rt.wait_ready()
        assert (await rt.call_tool("demo__echo", {"text": "plain words"}))["content"][0]["text"] == "plain words"
        assert channel.requests == []  # nothing to say about ordinary arguments
        with pytest.raises(ApprovalDenied) as denied:
            await rt.call_tool("demo__echo", {"text": f"the key is {TOKEN}"})
        assert TOKEN not in str(denied.value)
        (request,) = channel.requests
        assert request.details["arguments"] == {"text": "the key is ***"}
        assert any("the arguments carry a value kxen holds as secret" in why for why in request.details["why"])
        out = await rt.agent_call("demo__echo", {"text": SHAPES["an AWS access key"]})
        assert out.is_error and SHAPES["an AWS access key"] not in out.text


async def test_a_yes_sends_it_and_egress_guard_off_asks_nothing(kxen_home, ws):
    kxen_home.write_servers({"demo": _demo(), "open": _demo(egressGuard="off")})
    channel = Channel(approved=True)
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"], extra=[channel]))
    async with rt:
        with anyio.fail_after(WAIT):
            assert await rt.wait_ready()
        result = await rt.call_tool("demo__echo", {"text": TOKEN})
        assert result["content"][0]["text"] == TOKEN and len(channel.requests) == 1
        assert (await rt.call_tool("open__echo", {"text": TOKEN}))["content"][0]["text"] == TOKEN
        assert len(channel.requests) == 1  # the user turned the guard off for that server


async def test_a_remote_server_is_denied_a_secret_with_a_reason_that_does_not_hold_it(kxen_home, ws, peers):
    """Real SDK server over Streamable HTTP: a call carrying a header value the user configured
    for another server is denied before it is sent, even with a channel that says yes."""
    url, kind = peers.sdk("stateful")
    acknowledge_remote(kxen_home.path, [canonical_url(url)], enable=True)
    (kxen_home.path / "config.toml").write_text(
        (kxen_home.path / "config.toml").read_text().replace("[mcp]", "[mcp]\nallow_loopback_http = true", 1)
    )
    kxen_home.write_servers({"r": remote(url, kind, defaultToolPolicy="allow"), "other": _demo()})
    channel = Channel(approved=True)
    pm = make_plugin_manager(allow=[*REMOTE_PLUGINS, "stdio"], extra=[channel])
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=pm)
    async with rt:
        with anyio.fail_after(WAIT):
            assert await rt.wait_ready()
        assert {s["name"]: s["state"] for s in rt.status()}["r"] == "ready"
        assert (await rt.call_tool("r__echo", {"text": "hello"}))["content"][0]["text"] == "hello"
        with pytest.raises(PolicyDenied) as denied:
            await rt.call_tool("r__echo", {"text": f"x{TOKEN}x"})
        message = str(denied.value)
        assert "it is not sent to a remote server" in message and TOKEN not in message
        assert channel.requests == []


async def test_a_project_server_is_denied_and_cannot_turn_the_guard_off(kxen_home, ws):
    trust(kxen_home.path, ws)
    write_project(ws, {"proj": {**demo_entry(), "defaultToolPolicy": "ask", "egressGuard": "off"}})
    config = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"])).load()
    (problem,) = config.project_problems  # the project file is rejected whole, naming file, key path and rule
    assert ".kxen/mcp.json" in problem and "proj.egressGuard" in problem and "only user config may" in problem
    assert "proj" not in config.servers

    write_project(ws, {"proj": {**demo_entry(), "defaultToolPolicy": "ask"}})
    kxen_home.write_servers({"mine": _demo()})  # the secret lives in the user's config
    channel = Channel(approved=True)
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"], extra=[channel]))
    async with rt:
        with anyio.fail_after(WAIT):
            assert await rt.wait_ready()
        with pytest.raises(PolicyDenied, match="it is not sent to a project server"):
            await rt.call_tool("proj__echo", {"text": TOKEN})
        assert all(r.kind != "tool_call" for r in channel.requests)


async def test_no_false_hit_on_server_everythings_tool_calls(kxen_home, ws, everything_js):
    """server-everything over stdio with a secret in its env and every tool allowed: the calls the
    peer's own tools take (text, numbers, enums, ids, a URI) go out without a question."""
    import shutil

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    entry = {"command": node, "args": [everything_js, "stdio"], "env": {"API_TOKEN": TOKEN},
             "defaultToolPolicy": "allow"}  # fmt: skip
    kxen_home.write_servers({"ev": entry})
    channel = Channel(approved=False)
    rt = Runtime(home=kxen_home.path, workspace=ws, pm=make_plugin_manager(allow=["stdio"], extra=[channel]))
    calls = [
        ("echo", {"message": "Hello, MCP! Summarise https://example.com/docs?page=2 in 3 lines."}),
        ("get-sum", {"a": 1234567890, "b": -0.5}),
        ("get-annotated-message", {"messageType": "error", "includeImage": False}),
        ("get-structured-content", {"location": "New York"}),
        ("get-resource-reference", {"resourceType": "Text", "resourceId": 7}),
        ("get-resource-links", {"count": 3}),
        ("get-tiny-image", {}),
    ]
    async with rt:
        with anyio.fail_after(WAIT):
            assert await rt.wait_ready()
        for tool, arguments in calls:
            out = await rt.agent_call(f"ev__{tool}", arguments)
            assert not out.is_error, (tool, out.text)
    assert channel.requests == []

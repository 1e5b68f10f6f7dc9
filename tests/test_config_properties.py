"""Property tests (hypothesis) of config loading: any unknown key in a server entry is rejected,
wrong scalar types are rejected with their path, and every valid entry round-trips."""

from __future__ import annotations

import json
from typing import Any

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kxen_core.config import ServerConfig
from kxen_core.converter import make_converter
from config_support import SERVER_FIELDS, load_entry, shown


_unknown_keys = st.text(min_size=1, max_size=30).filter(lambda k: k not in SERVER_FIELDS)
_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.text(max_size=10))
_json_values = st.recursive(
    _json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)  # fmt: skip
_names = st.from_regex(r"[A-Za-z0-9_-]{1,32}", fullmatch=True).filter(lambda s: "__" not in s and not s.endswith("_"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=_names, key=_unknown_keys, value=_json_values)
def test_any_unknown_key_in_a_server_entry_is_rejected(name, key, value):
    file, loaded = load_entry({"command": "x", key: value}, name=name)
    assert isinstance(loaded, list), f"unknown key {key!r} was accepted"
    assert any(
        p.startswith(f"{file}: mcpServers.{name}: ") and "unknown key" in p and shown(key) in p for p in loaded
    ), loaded


# wrong values for each typed scalar field (field, strategy of values that are never valid)
_not_str = st.one_of(st.booleans(), st.integers(), st.floats(allow_nan=False), st.lists(st.text(), max_size=2))
_not_bool = st.one_of(st.integers(), st.text(), st.floats(allow_nan=False), st.none(), st.lists(st.booleans(), max_size=2))
_not_number = st.one_of(st.booleans(), st.text(), st.none(), st.lists(st.integers(), max_size=2))
_not_policy = st.one_of(
    st.text().filter(lambda s: s not in ("allow", "ask", "deny")), st.booleans(), st.integers(), st.none()
)
_WRONG: dict[str, tuple[Any, Any]] = {
    # path suffix: (strategy, how to place the value into an otherwise valid entry)
    "command": (_not_str.filter(lambda v: v is not None), lambda v: {"command": v}),
    "cwd": (_not_str, lambda v: {"command": "x", "cwd": v}),
    "url": (_not_str, lambda v: {"url": v, "transport": "http"}),
    "transport": (_not_str, lambda v: {"url": "https://x", "transport": v}),
    "enabled": (_not_bool, lambda v: {"command": "x", "enabled": v}),
    "defaultToolPolicy": (_not_policy, lambda v: {"command": "x", "defaultToolPolicy": v}),
    "toolPolicies.t": (_not_policy, lambda v: {"command": "x", "toolPolicies": {"t": v}}),
    "timeouts.requestSeconds": (_not_number, lambda v: {"command": "x", "timeouts": {"requestSeconds": v}}),
    "timeouts.initializeSeconds": (_not_number, lambda v: {"command": "x", "timeouts": {"initializeSeconds": v}}),
    "args": (_not_str.filter(lambda v: not isinstance(v, list)), lambda v: {"command": "x", "args": ["ok", v]}),
    "env.K": (_not_str, lambda v: {"command": "x", "env": {"K": v}}),
    "headers.H": (_not_str, lambda v: {"url": "https://x", "headers": {"H": v}}),
    "oauth.clientId": (_not_str.filter(lambda v: v is not None), lambda v: {"url": "https://x", "oauth": {"clientId": v}}),
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), field=st.sampled_from(sorted(_WRONG)))
def test_wrong_scalar_types_are_rejected_with_their_path(data, field):
    strategy, place = _WRONG[field]
    value = data.draw(strategy, label="value")
    file, loaded = load_entry(place(value))
    assert isinstance(loaded, list), f"{field}={value!r} was accepted as {loaded!r}"
    top = field.split(".")[0]
    assert any(f": mcpServers.srv.{top}" in p for p in loaded), loaded


_text = st.text(max_size=20)
_timeouts = st.fixed_dictionaries(
    {},
    optional={
        "requestSeconds": st.floats(min_value=0, max_value=86400, exclude_min=True) | st.integers(1, 86400),
        "initializeSeconds": st.floats(min_value=0, max_value=86400, exclude_min=True) | st.integers(1, 86400),
    },
)
_common = {
    "toolPolicies": st.dictionaries(st.text(min_size=1, max_size=10), st.sampled_from(["allow", "ask", "deny"]), max_size=3),
    "defaultToolPolicy": st.sampled_from(["allow", "ask", "deny"]),
    "enabled": st.booleans(),
    "timeouts": _timeouts,
}
_env_keys = st.text(min_size=1, max_size=10).filter(lambda k: "=" not in k and "\0" not in k)
_stdio_entries = st.fixed_dictionaries(
    {"command": st.text(min_size=1, max_size=20).filter(lambda s: s.strip())},
    optional={"args": st.lists(_text, max_size=4), "env": st.dictionaries(_env_keys, _text, max_size=3),
              "cwd": _text, **_common},
)  # fmt: skip
_urls = st.builds(
    lambda host, path: f"https://{host}{path}",
    st.from_regex(r"[a-z][a-z0-9-]{0,15}(\.[a-z]{2,5}){0,2}", fullmatch=True),
    st.from_regex(r"(/[A-Za-z0-9._~-]{0,10}){0,3}", fullmatch=True),
)
_remote_entries = st.fixed_dictionaries(
    {"url": _urls},
    optional={
        "transport": st.sampled_from(["http", "sse"]),
        # valid HTTP header names (tokens) and values (visible characters, inner spaces)
        "headers": st.dictionaries(
            st.from_regex(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,10}", fullmatch=True),
            st.from_regex(r"([\x21-\x7e]([\x20-\x7e]{0,8}[\x21-\x7e])?)?", fullmatch=True),
            max_size=3,
        ),
        "oauth": st.fixed_dictionaries(
            {}, optional={"clientId": _text, "scopes": st.lists(_text, max_size=3), "clientSecret": _text}
        ),
        **_common,
    },
)


def _expected(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _expected(v) for k, v in value.items()}
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)  # only timeouts are numbers, and they are floats
    return value


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=_names, entry=st.one_of(_stdio_entries, _remote_entries))
def test_valid_entries_round_trip(name, entry):
    file, server = load_entry(entry, name=name)
    assert isinstance(server, ServerConfig), server
    assert (server.name, server.scope, server.source) == (name, "user", str(file))
    conv = make_converter()
    dumped = conv.unstructure(server)
    for key, value in entry.items():
        got = dumped[key]
        if key == "timeouts":
            assert {k: got[k] for k in value} == _expected(value)
        elif key == "oauth":
            assert {k: got[k] for k in value} == value
        else:
            assert got == value, key
    # what the loader produced structures back to the same object
    again = {k: v for k, v in dumped.items() if k not in ("name", "scope", "source")}
    file2, server2 = load_entry(json.loads(json.dumps(again)), name=name)
    assert isinstance(server2, ServerConfig), server2
    assert server2 == attrs.evolve(server, source=str(file2))

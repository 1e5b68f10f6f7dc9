"""Property tests (hypothesis) of config loading: any unknown key in a server entry is rejected,
wrong scalar types are rejected with their path, and every valid entry round-trips."""

from __future__ import annotations

import json
from typing import Any

import attrs
from config_support import SERVER_FIELDS, load_entry, shown
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kxen_core.config import ServerConfig
from kxen_core.config.converter import make_converter

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
_not_bool = st.one_of(
    st.integers(), st.text(), st.floats(allow_nan=False), st.none(), st.lists(st.booleans(), max_size=2)
)
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
    "oauth.clientId": (
        _not_str.filter(lambda v: v is not None),
        lambda v: {"url": "https://x", "oauth": {"clientId": v}},
    ),
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
    "toolPolicies": st.dictionaries(
        st.text(min_size=1, max_size=10), st.sampled_from(["allow", "ask", "deny"]), max_size=3
    ),
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
            # a client id is printable text; a scope is one RFC 6749 scope-token (no space, '"' or '\\')
            {},
            optional={
                "clientId": st.text(st.characters(categories=["L", "N", "P", "S"]), min_size=1, max_size=20),
                "scopes": st.lists(st.from_regex(r"[\x21\x23-\x5b\x5d-\x7e]{1,20}", fullmatch=True), max_size=3),
                "clientSecret": _text,
            },
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
    again = {k: v for k, v in dumped.items() if k not in ("name", "scope", "source", "expanded")}
    file2, server2 = load_entry(json.loads(json.dumps(again)), name=name)
    assert isinstance(server2, ServerConfig), server2
    assert server2 == attrs.evolve(server, source=str(file2))


# --- file kinds and encodings: load, or a ConfigError naming the file; never another error, never a hang


import os  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402

from kxen_core.config import load_config  # noqa: E402
from kxen_core.config.loader import MAX_CONFIG_BYTES  # noqa: E402
from kxen_core.errors import ConfigError  # noqa: E402

_FILE_KINDS = ["regular", "missing", "directory", "too-large", "unreadable", "empty"]
if os.path.exists("/dev/zero"):
    _FILE_KINDS += ["symlink-to-dev-zero", "symlink-to-dev-null"]
if hasattr(os, "mkfifo"):
    _FILE_KINDS += ["fifo", "symlink-to-fifo"]
_ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32", "latin-1", "cp1252"]

_doc_servers = st.dictionaries(
    st.text(max_size=8),
    st.fixed_dictionaries(
        {"command": st.text(max_size=10)},
        optional={
            "args": st.lists(st.text(max_size=6), max_size=3),
            "env": st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2),
            "cwd": st.text(max_size=6),
        },
    ),
    max_size=3,
)


@st.composite
def _contents(draw: Any, target: str) -> bytes:
    """The bytes of a config file: a plausible document in some encoding, maybe with a lone
    surrogate escape spliced into a string, maybe truncated, or plain random bytes."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=200))
    if target == "config.toml":
        import tomlkit

        text = tomlkit.dumps(
            {"trusted_workspaces": draw(st.lists(st.text(max_size=8), max_size=2)),
             "mcp": {"remote_enabled": draw(st.booleans())}}
        )  # fmt: skip
    else:
        text = json.dumps({"mcpServers": draw(_doc_servers)}, ensure_ascii=draw(st.booleans()))
        if draw(st.booleans()):  # a lone surrogate as a JSON escape, inside the first string
            at = text.find('"', text.find("{") + 1)
            if at >= 0:
                text = (
                    text[: at + 1]
                    + draw(st.sampled_from(["\\ud800", "\\udfff", "\\udc80x", "\\ud83d"]))
                    + text[at + 1 :]
                )
    encoding = draw(st.sampled_from(_ENCODINGS))
    data = text.encode(encoding, errors="replace")
    if draw(st.integers(0, 4)) == 0:
        data = data[: draw(st.integers(0, len(data)))]
    return data


def _plant(kind: str, path: Path, content: bytes, tmp: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "regular":
        path.write_bytes(content)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "directory":
        path.mkdir()
    elif kind == "too-large":
        with open(path, "wb") as f:
            f.write(content[:100])
            f.truncate(MAX_CONFIG_BYTES + 1 + len(content))
    elif kind == "unreadable":
        path.write_bytes(content)
        os.chmod(path, 0)
    elif kind.startswith("symlink-to-dev-"):
        path.symlink_to("/dev/" + kind.rsplit("-", 1)[1])
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink-to-fifo":
        os.mkfifo(tmp / "a.fifo")
        path.symlink_to(tmp / "a.fifo")


def _load_bounded(home: Path, ws: Path, seconds: float = 60.0) -> Any:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = load_config(home, ws)
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "load_config did not return (a FIFO or a device was read?)"
    if "error" in box:
        raise box["error"]
    return box["value"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    target=st.sampled_from(["mcp.json", "config.toml", "project"]),
    kind=st.sampled_from(_FILE_KINDS),
)
def test_any_file_kind_and_encoding_loads_or_is_a_config_error_naming_the_file(data, target, kind):
    content = data.draw(_contents("config.toml" if target == "config.toml" else "mcp.json"), label="content")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        home, ws = tmp / "home", tmp / "ws"
        home.mkdir(), ws.mkdir()
        path = ws / ".kxen" / "mcp.json" if target == "project" else home / target
        _plant(kind, path, content, tmp)
        try:
            try:
                config = _load_bounded(home, ws.resolve())
            except ConfigError as exc:
                assert target != "project", exc  # a project file never stops the load
                assert exc.problems and all(p.startswith(f"{path}: ") for p in exc.problems), exc.problems
                problems = exc.problems
            else:
                problems = list(config.project_problems)
                assert all(p.startswith(f"{path.parent.parent.resolve() / '.kxen' / 'mcp.json'}: ") for p in problems)
            if kind not in ("regular", "missing", "empty", "unreadable"):
                assert problems, f"a {kind} was accepted"
            for p in problems:
                p.encode("utf-8")  # printable, encodable: a lone surrogate never reaches output
                assert p.isprintable(), p
        finally:
            if path.exists() and not path.is_symlink() and kind == "unreadable":
                os.chmod(path, 0o600)

"""Fail-closed config loading: every problem named by file, key path and rule; nothing coerced."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from config_support import load_entry, problems_of, write_json
from hypothesis import example, given
from hypothesis import strategies as st

from kxen_core.config import check_server_key, load_config
from kxen_core.config.converter import make_converter
from kxen_core.errors import ConfigError


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return workspace


# --- a valid config ---------------------------------------------------------------------------


def test_valid_config_loads(kxen_home, ws):
    kxen_home.write_settings("[mcp]\nremote_enabled = true\n")
    file = kxen_home.write_servers(
        {
            "local": {
                "command": "python",
                "args": ["-m", "server"],
                "env": {"LOG": "1"},
                "toolPolicies": {"write": "deny", "read": "allow"},
                "defaultToolPolicy": "ask",
                "timeouts": {"requestSeconds": 5, "initializeSeconds": 12.5},
            },
            "remote-1": {"url": "https://example.com/mcp", "transport": "sse", "headers": {"X-A": "b"}},
            "off": {"command": "x", "enabled": False},
        }
    )
    config = load_config(kxen_home.path, ws)
    assert set(config.servers) == {"local", "remote-1", "off"}
    local = config.servers["local"]
    assert (local.name, local.scope, local.source) == ("local", "user", str(file))
    assert local.kind == "stdio" and not local.is_remote
    assert local.args == ["-m", "server"]
    assert local.toolPolicies == {"write": "deny", "read": "allow"}
    assert local.timeouts.requestSeconds == 5.0 and isinstance(local.timeouts.requestSeconds, float)
    assert local.timeouts.initializeSeconds == 12.5
    remote = config.servers["remote-1"]
    assert remote.kind == "sse" and remote.is_remote
    assert config.servers["off"].enabled is False
    assert config.settings.mcp.remote_enabled is True


def test_missing_files_load_as_empty(tmp_path, ws):
    home = tmp_path / "empty-home"
    home.mkdir()
    config = load_config(home, ws)
    assert config.servers == {}
    assert config.settings.mcp.remote_enabled is False


def test_defaults_for_optional_fields(kxen_home, ws):
    kxen_home.write_servers({"s": {"command": "x"}})
    s = load_config(kxen_home.path, ws).servers["s"]
    assert s.defaultToolPolicy == "ask"  # fail closed: no policy means ask, never allow
    assert s.enabled is True
    assert (s.timeouts.requestSeconds, s.timeouts.initializeSeconds) == (30.0, 60.0)


# --- unreadable and unparsable files ----------------------------------------------------------


def test_directory_named_mcp_json_is_a_problem_not_an_empty_config(kxen_home, ws):
    (kxen_home.path / "mcp.json").mkdir()
    problems = problems_of(kxen_home.path, ws)
    assert len(problems) == 1
    assert problems[0].startswith(str(kxen_home.path / "mcp.json") + ": ")
    assert "cannot be read" in problems[0]


def test_directory_named_config_toml_is_a_problem(kxen_home, ws):
    (kxen_home.path / "config.toml").mkdir()
    problems = problems_of(kxen_home.path, ws)
    assert any(p.startswith(str(kxen_home.path / "config.toml")) and "cannot be read" in p for p in problems)


def test_non_utf8_file_is_rejected(kxen_home, ws):
    (kxen_home.path / "mcp.json").write_bytes(b'{"mcpServers": {"a": {"command": "\xff\xfe"}}}')
    problems = problems_of(kxen_home.path, ws)
    assert len(problems) == 1
    assert problems[0].startswith(str(kxen_home.path / "mcp.json"))
    assert "not valid JSON" in problems[0]


@pytest.mark.parametrize("text", ['{"mcpServers": {', "", "null x", '{"mcpServers": {"a": {"command": "x",}}}'])
def test_broken_json_is_rejected(kxen_home, ws, text):
    (kxen_home.path / "mcp.json").write_text(text)
    problems = problems_of(kxen_home.path, ws)
    assert len(problems) == 1 and "not valid JSON" in problems[0]
    assert problems[0].startswith(str(kxen_home.path / "mcp.json"))


@pytest.mark.parametrize("text", ["[mcp\nremote_enabled = true", "remote_enabled = = 1", "[mcp]\nx = 1\nx = 2\n"])
def test_broken_toml_is_rejected(kxen_home, ws, text):
    kxen_home.write_settings(text)
    problems = problems_of(kxen_home.path, ws)
    assert len(problems) == 1 and "not valid TOML" in problems[0]
    assert problems[0].startswith(str(kxen_home.path / "config.toml"))


@pytest.mark.parametrize(
    "top",
    [
        [],
        "x",
        3,
        None,  # a file holding JSON null is not a missing file
    ],
)
def test_top_level_must_be_an_object(kxen_home, ws, top):
    write_json(kxen_home.path, top)
    problems = problems_of(kxen_home.path, ws)
    assert any("(top level)" in p for p in problems)


# --- unknown keys, wrong types, no coercion ---------------------------------------------------


def test_unknown_key_in_server_is_rejected(kxen_home, ws):
    kxen_home.write_servers({"gh": {"command": "x", "comand": "y"}})
    problems = problems_of(kxen_home.path, ws)
    assert len(problems) == 1
    assert re.search(r": mcpServers\.gh: .*unknown key.*comand", problems[0])


@pytest.mark.parametrize("key", ["name", "scope", "source", "expanded"])
def test_loader_owned_fields_cannot_come_from_the_file(kxen_home, ws, key):
    # a user file must not be able to claim another scope or name
    kxen_home.write_servers({"gh": {"command": "x", key: "project"}})
    problems = problems_of(kxen_home.path, ws)
    assert any("mcpServers.gh" in p and key in p for p in problems)


def test_unknown_top_level_and_settings_keys(kxen_home, ws):
    write_json(kxen_home.path, {"mcpServers": {}, "servers": {}})
    kxen_home.write_settings("[mcp]\nremote_enabled = false\nremote_enable = true\n[extra]\n")
    problems = problems_of(kxen_home.path, ws)
    assert any(p.startswith(str(kxen_home.path / "mcp.json")) and "servers" in p for p in problems)
    assert any("mcp" in p and "remote_enable" in p and "unknown key" in p for p in problems)
    assert any("extra" in p and "unknown key" in p for p in problems)


def test_unknown_key_in_nested_object(kxen_home, ws):
    kxen_home.write_servers({"a": {"url": "https://x", "oauth": {"clientid": "c"}, "timeouts": {"request": 1}}})
    problems = problems_of(kxen_home.path, ws)
    assert any("mcpServers.a.oauth" in p and "clientid" in p for p in problems)
    assert any("mcpServers.a.timeouts" in p and "request" in p for p in problems)


@pytest.mark.parametrize("value", ["false", "true", "0", 0, 1, None])
def test_enabled_is_never_coerced(kxen_home, ws, value):
    kxen_home.write_servers({"a": {"command": "x", "enabled": value}})
    problems = problems_of(kxen_home.path, ws)
    assert any("mcpServers.a.enabled" in p for p in problems)


@pytest.mark.parametrize("value", [True, False, "5", [5], None])
def test_timeouts_reject_non_numbers(kxen_home, ws, value):
    kxen_home.write_servers({"a": {"command": "x", "timeouts": {"requestSeconds": value}}})
    problems = problems_of(kxen_home.path, ws)
    assert any("mcpServers.a.timeouts.requestSeconds" in p for p in problems)


@pytest.mark.parametrize("value", [0, -1, 86401, 1e309, float("nan")])
def test_timeouts_out_of_range(kxen_home, ws, value):
    kxen_home.write_servers({"a": {"command": "x", "timeouts": {"initializeSeconds": value}}})
    problems = problems_of(kxen_home.path, ws)
    assert any("mcpServers.a.timeouts" in p and "initializeSeconds" in p for p in problems)


@pytest.mark.parametrize(
    ("value", "type_"),
    [(1.9, int), (1.0, int), ("1", int), (True, int), (False, float), ("1.5", float),
     (1, str), (None, str), ("false", bool), (0, bool), (1, bool)],
)  # fmt: skip
def test_converter_validates_scalars_instead_of_coercing(value, type_):
    with pytest.raises(ValueError):
        make_converter().structure(value, type_)


def test_converter_accepts_exact_scalars():
    conv = make_converter()
    assert conv.structure(3, int) == 3
    assert conv.structure(3, float) == 3.0 and type(conv.structure(3, float)) is float
    assert conv.structure(False, bool) is False
    assert conv.structure("s", str) == "s"


def test_settings_bool_is_not_coerced(kxen_home, ws):
    kxen_home.write_settings('[mcp]\nremote_enabled = "yes"\n')
    problems = problems_of(kxen_home.path, ws)
    assert len(problems) == 1
    assert problems[0].startswith(str(kxen_home.path / "config.toml") + ": mcp.remote_enabled: ")


@pytest.mark.parametrize("field", ["defaultToolPolicy", "toolPolicies"])
@pytest.mark.parametrize("value", ["ALLOW", "yes", "", "always", True, 1, None])
def test_illegal_policy_never_falls_back(kxen_home, ws, field, value):
    entry: dict[str, Any] = {"command": "x"}
    entry[field] = {"t": value} if field == "toolPolicies" else value
    # a valid neighbour is not loaded either: the whole file is refused
    kxen_home.write_servers({"ok": {"command": "y"}, "a": entry})
    problems = problems_of(kxen_home.path, ws)
    assert len(problems) == 1
    assert f"mcpServers.a.{field}" in problems[0]
    assert "allow" in problems[0] and "deny" in problems[0]  # the rule lists the legal values


# --- server names -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["a__b", "__", "x" * 33, "has space", "", "dot.ted", "slash/ed", "ünï", "a:b", "_", "a_", "x-_"]
)
def test_bad_server_names(kxen_home, ws, name):
    kxen_home.write_servers({name: {"command": "x"}})
    problems = problems_of(kxen_home.path, ws)
    assert len(problems) == 1
    assert problems[0].startswith(str(kxen_home.path / "mcp.json") + f": mcpServers.{name}: ")
    assert "server names" in problems[0]


@pytest.mark.parametrize("name", ["a", "x" * 32, "gh-1", "A_b-C9", "_a", "-", "a_b", "a-"])
def test_good_server_names(kxen_home, ws, name):
    kxen_home.write_servers({name: {"command": "x"}})
    assert set(load_config(kxen_home.path, ws).servers) == {name}


def test_server_name_with_trailing_newline_is_rejected(kxen_home, ws):
    kxen_home.write_servers({"abc\n": {"command": "x"}})
    problems = problems_of(kxen_home.path, ws, one_line=False)
    assert len(problems) == 1 and "server names" in problems[0]


@pytest.mark.parametrize(
    "servers",
    [
        {"abc\n": {"command": "x"}},
        {"a\nmcpServers.ok: fine": {"command": "x"}},
        {"\x1b[2Jx": {"command": "x"}},
        {"ok": {"command": "x", "bad\nkey": 1}},  # unknown key names are printed raw too
    ],
)
def test_problem_lines_never_carry_raw_control_characters(kxen_home, ws, servers):
    kxen_home.write_servers(servers)
    problems = problems_of(kxen_home.path, ws, one_line=False)
    for p in problems:
        assert p.isprintable(), repr(p)


_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,32}")


@given(st.text(max_size=40))
@example("abc\n")
def test_server_key_rule_matches_the_documented_rule(key):
    legal = _NAME_RE.fullmatch(key) is not None and "__" not in key and not key.endswith("_")
    assert (check_server_key(key) is None) == legal


@given(st.text(alphabet=st.characters(codec="ascii"), max_size=40))
def test_server_key_rule_without_newlines(key):
    # the rule itself, apart from the trailing-newline bug covered above
    if key.endswith("\n"):
        key = key.rstrip("\n")
    legal = _NAME_RE.fullmatch(key) is not None and "__" not in key and not key.endswith("_")
    assert (check_server_key(key) is None) == legal


# --- shape rules ------------------------------------------------------------------------------


def test_stdio_without_command(kxen_home, ws):
    kxen_home.write_servers({"a": {"transport": "stdio", "args": ["x"]}})
    problems = problems_of(kxen_home.path, ws)
    assert len(problems) == 1
    assert ": mcpServers.a.command: " in problems[0] and "needs 'command'" in problems[0]


def test_entry_with_neither_command_nor_url(kxen_home, ws):
    kxen_home.write_servers({"a": {"args": ["x"]}})
    problems = problems_of(kxen_home.path, ws)
    assert len(problems) == 1 and "mcpServers.a: " in problems[0]
    assert "'command'" in problems[0] and "'url'" in problems[0]


@pytest.mark.parametrize("command", ["", "   "])
def test_empty_command(kxen_home, ws, command):
    kxen_home.write_servers({"a": {"command": command}})
    problems = problems_of(kxen_home.path, ws)
    assert any("mcpServers.a.command" in p for p in problems)


def test_url_and_command_mixed(kxen_home, ws):
    kxen_home.write_servers(
        {
            "a": {"command": "x", "url": "https://x"},
            "b": {"transport": "http", "command": "x", "url": "https://x"},
            "c": {"transport": "sse"},
        }
    )
    problems = problems_of(kxen_home.path, ws)
    assert any("mcpServers.a.url" in p and "stdio" in p for p in problems)
    assert any("mcpServers.b.command" in p and "http" in p for p in problems)
    assert any("mcpServers.c.url" in p and "needs 'url'" in p for p in problems)
    assert len(problems) == 3


def test_bad_env_names(kxen_home, ws):
    kxen_home.write_servers({"a": {"command": "x", "env": {"A=B": "1", "": "2"}}})
    problems = problems_of(kxen_home.path, ws)
    assert sum("mcpServers.a.env" in p for p in problems) == 2


# --- every problem at once --------------------------------------------------------------------


def test_every_problem_is_listed_at_once(kxen_home, ws):
    settings = kxen_home.write_settings("[mcp]\nremote_enabled = 1\n")
    file = kxen_home.write_servers(
        {
            "bad name": {"command": "x"},
            "a": {"command": "x", "enabled": "false", "bogus": 1},
            "b": {"command": "x", "timeouts": {"requestSeconds": True}},
            "c": {"transport": "stdio"},
            "ok": {"command": "fine"},
        }
    )
    problems = problems_of(kxen_home.path, ws)
    expected = [
        (settings, "mcp.remote_enabled"),
        (file, "mcpServers.bad name"),
        (file, "mcpServers.a.enabled"),
        (file, "mcpServers.a"),  # unknown key
        (file, "mcpServers.b.timeouts.requestSeconds"),
        (file, "mcpServers.c.command"),
    ]
    for path, key in expected:
        assert any(p.startswith(f"{path}: {key}: ") for p in problems), (path, key, problems)
    assert len(problems) == len(expected)
    assert any("bogus" in p for p in problems)
    # the error message carries every problem too
    with pytest.raises(ConfigError) as info:
        load_config(kxen_home.path, ws)
    for p in problems:
        assert p in str(info.value)


def test_unknown_top_level_key_does_not_hide_server_problems(kxen_home, ws):
    write_json(kxen_home.path, {"mcpServers": {"a": {"command": 1}}, "extra": True})
    problems = problems_of(kxen_home.path, ws)
    assert any("extra" in p for p in problems)
    assert any("mcpServers.a.command" in p for p in problems)


def test_non_object_server_entry_names_the_rule(kxen_home, ws):
    kxen_home.write_servers({"a": 1})
    problems = problems_of(kxen_home.path, ws)
    assert len(problems) == 1
    assert ": mcpServers.a: " in problems[0] and "must be an object" in problems[0]


@pytest.mark.parametrize("servers", [[], "x", None, 1])
def test_mcp_servers_must_be_an_object(kxen_home, ws, servers):
    write_json(kxen_home.path, {"mcpServers": servers})
    problems = problems_of(kxen_home.path, ws)
    assert len(problems) == 1 and ": mcpServers: " in problems[0]


# --- containers are not coerced ---------------------------------------------------------------


@pytest.mark.parametrize(
    "entry",
    [
        {"command": "x", "args": "--verbose"},
        {"command": "x", "args": {"--flag": "value"}},
        {"url": "https://x", "oauth": {"scopes": "read write"}},
    ],
)
def test_list_fields_reject_strings_and_objects(entry):
    file, loaded = load_entry(entry)
    assert isinstance(loaded, list), f"accepted as {loaded!r}"


@pytest.mark.parametrize(
    "entry",
    [
        {"command": "x", "env": [["A", "B"]]},
        {"command": "x", "env": "A=B"},
        {"command": "x", "options": []},
        {"command": "x", "toolPolicies": [["t", "allow"]]},
        {"url": "https://x", "headers": "Authorization: x"},
        {"command": "x", "timeouts": []},
        {"url": "https://x", "oauth": "c"},
    ],
)
def test_object_fields_reject_non_objects(entry):
    file, loaded = load_entry(entry)
    assert isinstance(loaded, list)
    (field,) = set(entry) - {"command", "url"}
    assert any(f"mcpServers.srv.{field}" in p for p in loaded)


# --- numbers in settings, header names and values --------------------------------------------


@pytest.mark.parametrize("value", ["1.9", "true", '"64"', "1e3"])
def test_integer_settings_reject_floats_bools_and_strings(kxen_home, ws, value):
    kxen_home.write_settings(f"[mcp.remote_catalog]\nmax_schema_depth = {value}\n")
    problems = problems_of(kxen_home.path, ws)
    assert len(problems) == 1
    assert problems[0].startswith(str(kxen_home.path / "config.toml") + ": mcp.remote_catalog.max_schema_depth: ")


def test_integer_settings_accept_integers(kxen_home, ws):
    kxen_home.write_settings("[mcp.remote_catalog]\nmax_schema_depth = 10\n")
    limits = load_config(kxen_home.path, ws).settings.mcp.remote_catalog
    assert limits.max_schema_depth == 10 and type(limits.max_schema_depth) is int


@pytest.mark.parametrize(
    ("headers", "path", "rule"),
    [
        ({"Authorization": "Bearer s3cr3t-v4lue\n"}, "headers.Authorization", "header values"),
        ({"X-Token": " s3cr3t-v4lue"}, "headers.X-Token", "header values"),
        ({"X-Token": "s3cr3t-v4lue\x00"}, "headers.X-Token", "header values"),
        ({"Bad Name": "s3cr3t-v4lue"}, "headers.Bad Name", "header names"),
    ],
)
def test_bad_header_names_and_values_are_rejected_without_the_value(headers, path, rule):
    file, loaded = load_entry({"url": "https://mcp.example.com/mcp", "headers": headers})
    assert isinstance(loaded, list), loaded
    assert any(f"mcpServers.srv.{path}: {rule}" in p for p in loaded), loaded
    assert not any("s3cr3t-v4lue" in p for p in loaded), loaded

"""``${VAR}`` in user config: expanded from the host environment at load, refused in project config,
and a secret everywhere kxen prints."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from config_support import problems_of
from hypothesis import given, settings
from hypothesis import strategies as st
from kxen_testing import mem, text_result
from remote_support import remote_on
from support import write_project

from kxen_core.config import load_config
from kxen_core.config.expand import BadReference, expand
from kxen_core.config.secrets import config_secrets
from kxen_core.launch.resolve import digest, resolve_launch

SECRET = "s3cr3t-from-the-host-0123"


@pytest.fixture
def host_env(monkeypatch):
    monkeypatch.setenv("KXEN_T_SECRET", SECRET)
    monkeypatch.setenv("KXEN_T_EMPTY", "")
    monkeypatch.delenv("KXEN_T_UNSET", raising=False)


# --- the syntax -----------------------------------------------------------------------------------

ENV = {"A": "alpha", "B": "", "C": "${A}"}


@pytest.mark.parametrize(
    ("written", "expected", "supplied"),
    [
        ("${A}", "alpha", ["alpha"]),
        ("Bearer ${A}", "Bearer alpha", ["alpha"]),
        ("${A}-${A}", "alpha-alpha", ["alpha", "alpha"]),
        ("${UNSET:-dflt}", "dflt", []),
        ("${B:-dflt}", "dflt", []),  # set but empty: the default
        ("${B}", "", []),  # set but empty, no default: empty
        ("${UNSET:-}", "", []),
        ("${A:-dflt}", "alpha", ["alpha"]),
        ("$${A}", "${A}", []),  # the escape writes a literal ${
        ("$$${A}", "$${A}", []),  # a "$", then the escape: only "$${" is special
        ("$A and $ {A} and $", "$A and $ {A} and $", []),  # only ${ starts a reference
        ("${C}", "${A}", ["${A}"]),  # expanded once: a variable's value is never scanned again
        ("${UNSET:-a:-b}", "a:-b", []),
    ],
)
def test_expansion(written, expected, supplied):
    assert expand(written, ENV) == (expected, supplied)


@pytest.mark.parametrize(
    ("written", "rule"),
    [
        ("${UNSET}", "${UNSET} is not set in the environment (set it, or give a default: ${UNSET:-value})"),
        ("x ${A", "an unclosed '${' at character 2"),
        ("${}", "a malformed reference at character 0"),
        ("${1A}", "a malformed reference"),
        ("${A B}", "a malformed reference"),
        ("${env:A}", "write ${NAME}, not ${env:NAME}"),
        ("${A-dflt}", "a malformed reference"),
    ],
)
def test_bad_references_are_problems(written, rule):
    with pytest.raises(BadReference) as info:
        expand(written, ENV)
    assert rule in str(info.value)
    assert "alpha" not in str(info.value)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab${}:-_ AZ", max_size=40))
def test_expansion_never_raises_anything_else_and_text_without_references_is_kept(text):
    try:
        out, supplied = expand(text, ENV)
    except BadReference:
        return
    if "${" not in text:
        assert (out, supplied) == (text, [])


# --- user config: expanded at load, a problem when unset -------------------------------------------


def test_user_env_headers_and_url_expand_at_load(kxen_home, ws, host_env):
    kxen_home.write_servers({
        "s": {"command": "x", "args": ["${KXEN_T_SECRET}"], "cwd": "${KXEN_T_SECRET}",
              "env": {"TOKEN": "${KXEN_T_SECRET}", "LEVEL": "${KXEN_T_UNSET:-info}", "LIT": "$${KXEN_T_SECRET}"}},
        "r": {"url": "https://${KXEN_T_UNSET:-mcp.example.com}/mcp?key=${KXEN_T_SECRET}",
              "headers": {"Authorization": "Bearer ${KXEN_T_SECRET}", "X-Plain": "plain"}},
    })  # fmt: skip
    servers = load_config(kxen_home.path, ws).servers
    s, r = servers["s"], servers["r"]
    assert s.env == {"TOKEN": SECRET, "LEVEL": "info", "LIT": "${KXEN_T_SECRET}"}
    # command and args expand too (issue 25: ${HOME}/bin/tool); cwd is taken as written
    assert s.args == [SECRET] and s.cwd == "${KXEN_T_SECRET}"
    assert r.url == f"https://mcp.example.com/mcp?key={SECRET}"
    assert r.headers == {"Authorization": f"Bearer {SECRET}", "X-Plain": "plain"}
    assert {e.path: e.written for e in r.expanded} == {
        "url": "https://${KXEN_T_UNSET:-mcp.example.com}/mcp?key=${KXEN_T_SECRET}",
        "headers.Authorization": "Bearer ${KXEN_T_SECRET}",
    }


def test_an_unset_variable_names_file_key_path_and_variable(kxen_home, ws, host_env):
    path = kxen_home.write_servers(
        {"s": {"command": "x", "env": {"TOKEN": "${KXEN_T_UNSET}", "OK": "${KXEN_T_SECRET}"}}}
    )
    # not a load problem (the server fails in phase config: test_config_unset.py), but listed as one
    assert load_config(kxen_home.path, ws).unset_problems == (
        f"{path}: mcpServers.s.env.TOKEN: ${{KXEN_T_UNSET}} is not set in the environment "
        "(set it, or give a default: ${KXEN_T_UNSET:-value})",
    )


def test_an_expanded_url_must_still_follow_the_url_rules(kxen_home, ws, monkeypatch):
    monkeypatch.setenv("KXEN_T_HOST", "http://example.com")
    path = kxen_home.write_servers({"r": {"url": "${KXEN_T_HOST}/mcp"}})
    assert problems_of(kxen_home.path, ws) == [
        f"{path}: mcpServers.r.url: must be https:// (plain http:// only for loopback hosts)"
    ]


def test_an_expanded_header_must_still_be_a_header_value(kxen_home, ws, monkeypatch):
    monkeypatch.setenv("KXEN_T_BAD", "two\nlines-secret")
    kxen_home.write_servers({"r": {"url": "https://x.example/mcp", "headers": {"X-Token": "${KXEN_T_BAD}"}}})
    [problem] = problems_of(kxen_home.path, ws)
    assert "headers.X-Token: header values must be visible characters" in problem and "lines-secret" not in problem


# --- project config: refused -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "where"),
    [
        ({"command": "x", "env": {"MODE": "${USER}"}}, "env.MODE"),
        ({"url": "https://x.example/${KXEN_T_SECRET}"}, "url"),
        ({"url": "https://x.example/mcp", "headers": {"X-Tenant": "${KXEN_T_SECRET}"}}, "headers.X-Tenant"),
        ({"command": "x", "env": {"MODE": "$${literal}"}}, "env.MODE"),
    ],
)
def test_project_config_may_not_reference_host_variables(kxen_home, ws, host_env, entry, where):
    kxen_home.write_settings(f'trusted_workspaces = ["{ws}"]\n[mcp]\nremote_enabled = true\n')
    pfile = write_project(ws, {"p": entry})
    config = load_config(kxen_home.path, ws)
    assert "p" not in config.servers
    assert config.project_problems == (
        f"{pfile}: mcpServers.p.{where}: project config must not reference host variables (${{...}}): a repository "
        "must not pull the user's secrets into a server it ships (set the value in user config, where ${VAR} is "
        "expanded)",
    )
    assert SECRET not in json.dumps(config.project_problems)


# --- expanded values are secrets ---------------------------------------------------------------------


def test_expanded_values_are_scrubbed_and_shown_as_a_digest_in_an_approval(kxen_home, ws, host_env):
    kxen_home.write_servers(
        {
            "s": {
                "command": sys.executable,
                "env": {"HARMLESS_NAME": "${KXEN_T_SECRET}", "SHOWN": "${KXEN_T_UNSET:-visible}"},
            }
        }
    )
    server = load_config(kxen_home.path, ws).servers["s"]
    assert config_secrets([server]).text(f"x {SECRET} y") == "x *** y"
    shown = resolve_launch(server, ws).display()["env"]
    # a key that does not look secret still hides a value a host variable supplied
    assert shown == {"HARMLESS_NAME": digest(SECRET), "SHOWN": "visible"}


def test_no_expanded_secret_in_any_cli_output(kx, kxen_home, fakes, host_env, monkeypatch):
    """The fake echoes the secret back (status, tools, call, list, get): every output scrubs it."""
    fakes.add("f", tools={"echo": lambda a: text_result(f"got {a.get('text')} and {os.environ.get('KXEN_T_SECRET')}")})
    entry = mem(
        "f", defaultToolPolicy="allow", egressGuard="off"
    )  # it sends the secret on purpose: what comes back is scrubbed (the guard: test_argument_guard.py)
    entry["headers"] = {"X-Anything": "${KXEN_T_SECRET}"}
    entry["env"] = {"PLAIN_NAME": "prefix-${KXEN_T_SECRET}"}
    kxen_home.write_servers({"demo": entry})
    outputs = []
    for argv in (
        ("mcp", "status", "--json", "--wait", "10"),
        ("mcp", "status", "--wait", "10"),
        ("mcp", "call", "demo", "echo", "--args", json.dumps({"text": SECRET}), "--json"),
        ("mcp", "call", "demo", "echo", "--args", json.dumps({"text": SECRET})),
        ("mcp", "list", "--json"),
        ("mcp", "get", "demo", "--json"),
        ("mcp", "get", "demo"),
        ("config", "check", "--json"),
    ):
        code, out, err = kx(*argv)
        assert code == 0, (argv, out, err)
        outputs.append(out + err)
    joined = "\n".join(outputs)
    assert SECRET not in joined
    assert "got *** and ***" in joined  # the call went through, and both echoes were scrubbed
    assert '"PLAIN_NAME": "prefix-${KXEN_T_SECRET}"' in joined  # get shows what was written


def test_a_config_error_never_shows_an_expanded_value(kx, kxen_home, host_env):
    kxen_home.write_servers({"a": {"url": "https://x.example/${KXEN_T_SECRET}", "transport": "nope"}})
    code, out, err = kx("mcp", "list")
    assert code == 2 and "unknown transport kind 'nope'" in err
    assert SECRET not in out + err


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path.resolve()


@pytest.mark.anyio
async def test_an_approval_request_shows_the_url_as_written_never_what_a_variable_supplied(
    kxen_home, ws, fakes, host_env
):
    """The approval channel (a plugin: it may post to a chat) sees ``${VAR}``, not the value."""
    from kxen_testing import Channel, running

    fakes.add("f", tools={"echo": lambda a: text_result("ok")})
    entry = mem("f", url="https://mcp.example.com/${KXEN_T_SECRET}/mcp")
    kxen_home.write_servers({"r": entry})
    # the URL took a variable's value: it is confirmed by the digest of the URL the loader expanded
    kxen_home.write_settings(remote_on(load_config(kxen_home.path, ws).servers["r"], settings=""))
    channel = Channel(approved=True)
    async with running(kxen_home, ws, channel, servers={"r": entry}) as rt:
        assert rt.servers["r"].state == "ready", rt.servers["r"].snapshot()
        result = await rt.call_tool("r__echo", {})
        assert not result.get("isError"), result
        # status's note names the server by its URL as written too
        assert SECRET not in json.dumps(rt.status(), default=str)
    [request] = channel.requests
    assert request.details["url"] == "https://mcp.example.com/${KXEN_T_SECRET}/mcp"
    assert SECRET not in json.dumps(request.details, default=str) + request.summary

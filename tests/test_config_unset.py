"""An unset ``${VAR}`` in one user entry fails that server (phase ``config``), not the whole config:
the other servers load and run, ``kxen config check`` still reports it, and ``mcp add``/``import``
of such an entry is allowed with a warning."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from kxen_testing import mem, running, text_result

from kxen_core.config import load_config
from kxen_core.config.secrets import config_secrets
from kxen_core.errors import ServerNotReady

SECRET = "s3cr3t-of-the-other-variable-0123"
UNSET_RULE = "${KXEN_T_UNSET} is not set in the environment (set it, or give a default: ${KXEN_T_UNSET:-value})"
SDK_SERVER = Path(__file__).parent / "peers" / "sdk_server.py"
FIXTURES = Path(__file__).parent / "fixtures" / "imports"


@pytest.fixture(autouse=True)
def host_env(monkeypatch):
    monkeypatch.setenv("KXEN_T_SECRET", SECRET)
    monkeypatch.delenv("KXEN_T_UNSET", raising=False)


def test_an_unset_variable_is_no_load_problem_but_is_listed(kxen_home, ws):
    path = kxen_home.write_servers(
        {
            "s": {"command": "x", "env": {"TOKEN": "${KXEN_T_UNSET}", "OK": "${KXEN_T_SECRET}"}},
            "other": {"command": "y"},
        }
    )
    config = load_config(kxen_home.path, ws)  # no ConfigError
    assert set(config.servers) == {"s", "other"}
    s = config.servers["s"]
    assert [(u.path, u.variable) for u in s.unset] == [("env.TOKEN", "KXEN_T_UNSET")]
    # kept as written: nothing was applied, but what the set variable supplied is still a secret
    assert s.env == {"TOKEN": "${KXEN_T_UNSET}", "OK": "${KXEN_T_SECRET}"}
    assert config_secrets([s]).text(f"x {SECRET} ${{KXEN_T_UNSET}}") == "x *** ${KXEN_T_UNSET}"
    assert config.unset_problems == (f"{path}: mcpServers.s.env.TOKEN: {UNSET_RULE}",)
    assert not config.servers["other"].unset


def test_a_malformed_reference_still_rejects_the_file(kxen_home, ws):
    from config_support import problems_of

    path = kxen_home.write_servers(
        {"s": {"command": "x", "env": {"A": "${KXEN_T_UNSET}", "B": "${1X}"}}, "other": {"command": "y"}}
    )
    problems = problems_of(kxen_home.path, ws)
    assert f"{path}: mcpServers.s.env.A: {UNSET_RULE}" in problems
    assert any(p.startswith(f"{path}: mcpServers.s.env.B: a malformed reference") for p in problems)


def test_a_url_holding_an_unset_variable_is_checked_once_it_is_set(kxen_home, ws, monkeypatch):
    kxen_home.write_settings("[mcp]\nremote_enabled = true\n")
    kxen_home.write_servers({"r": {"url": "${KXEN_T_UNSET}/mcp"}})
    assert load_config(kxen_home.path, ws).servers["r"].unset  # not "must be https://" yet
    monkeypatch.setenv("KXEN_T_UNSET", "http://example.com")
    from config_support import problems_of

    [problem] = problems_of(kxen_home.path, ws)
    assert problem.endswith("mcpServers.r.url: must be https:// (plain http:// only for loopback hosts)")


@pytest.mark.anyio
async def test_the_server_fails_in_phase_config_and_the_others_run(kxen_home, ws, fakes):
    fakes.add("f", tools={"echo": lambda a: text_result(f"got {a.get('text')}")})
    servers = {
        "needs": mem("f", defaultToolPolicy="allow", env={"TOKEN": "${KXEN_T_UNSET}"}),
        "fine": mem("f", defaultToolPolicy="allow"),
    }
    async with running(kxen_home, ws, servers=servers) as rt:
        rows = {row["name"]: row for row in rt.status()}
        assert rows["fine"]["state"] == "ready"
        needs = rows["needs"]
        assert (needs["state"], needs["phase"]) == ("failed", "config")
        assert "${KXEN_T_UNSET} is not set in the environment (env.TOKEN in " in needs["error"]
        assert needs["next"] == "set KXEN_T_UNSET in the environment kxen runs in, then start again (kxen mcp status)"
        with anyio.fail_after(10):
            result = await rt.call_tool("fine__echo", {"text": "hi"})
        assert result["content"][0]["text"] == "got hi"
        with pytest.raises(ServerNotReady) as info:
            await rt.call_tool("needs__echo", {"text": "hi"})
        assert "KXEN_T_UNSET" in str(info.value) and "config" in str(info.value)


@pytest.mark.anyio
async def test_setting_the_variable_and_reloading_starts_it(kxen_home, ws, fakes, monkeypatch):
    fakes.add("f", tools={"echo": lambda a: text_result("ok")})
    async with running(kxen_home, ws, servers={"needs": mem("f", env={"TOKEN": "${KXEN_T_UNSET}"})}) as rt:
        assert rt.servers["needs"].state == "failed"
        monkeypatch.setenv("KXEN_T_UNSET", "now-set")
        await rt.reload()
        with anyio.fail_after(10):
            assert await rt.wait_ready()
        assert rt.servers["needs"].state == "ready", rt.servers["needs"].snapshot()


@pytest.mark.anyio
async def test_a_disabled_entry_stays_disabled(kxen_home, ws, fakes):
    fakes.add("f", tools={})
    entry = mem("f", enabled=False, env={"TOKEN": "${KXEN_T_UNSET}"})
    async with running(kxen_home, ws, servers={"off": entry}) as rt:
        assert rt.servers["off"].state == "disabled"


def test_the_cli_lists_runs_and_calls_the_others_and_config_check_reports_it(kx, kxen_home, fakes):
    fakes.add("f", tools={"echo": lambda a: text_result(f"got {a.get('text')} {SECRET}")})
    path = kxen_home.write_servers(
        {
            "needs": mem("f", defaultToolPolicy="allow", env={"TOKEN": "${KXEN_T_UNSET}", "K": "${KXEN_T_SECRET}"}),
            "fine": mem("f", defaultToolPolicy="allow"),
        }
    )
    code, out, err = kx("mcp", "list", "--json")
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(out)["servers"]}
    assert "will fail (phase config): ${KXEN_T_UNSET} is not set" in rows["needs"]["note"]
    code, out, err = kx("mcp", "status", "--json", "--wait", "10")
    assert code == 1, err  # a failed server
    rows = {r["name"]: r for r in json.loads(out)["servers"]}
    assert rows["fine"]["state"] == "ready" and (rows["needs"]["state"], rows["needs"]["phase"]) == ("failed", "config")
    code, out, err = kx("mcp", "status", "--wait", "10")
    assert "KXEN_T_UNSET" in out + err and "config" in out + err
    code, out, err = kx("mcp", "call", "fine", "echo", "--args", '{"text": "hi"}')
    assert code == 0 and "got hi ***" in out, (out, err)
    code, out, err = kx("config", "check")
    assert code == 2 and f"{path}: mcpServers.needs.env.TOKEN: {UNSET_RULE}" in out + err
    code, out, err = kx("config", "check", "--json")
    problem = {"file": str(path), "path": "mcpServers.needs.env.TOKEN", "rule": UNSET_RULE}
    assert code == 2 and json.loads(out)["problems"] == [problem]  # --json problems are objects
    assert SECRET not in out + err


def test_mcp_add_of_an_entry_whose_variable_is_not_set_yet_warns(kx, kxen_home, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory,stdio")
    code, out, err = kx("mcp", "add", "later", "--env", "TOKEN=${KXEN_T_UNSET}", "--", "some-server")
    assert code == 0, (out, err)
    assert "added server 'later'" in out
    assert (
        "warning: server 'later': ${KXEN_T_UNSET} not set in the environment yet (env.TOKEN): the server fails "
        "(phase config) until it is set where kxen runs"
    ) in err
    assert json.loads((kxen_home.path / "mcp.json").read_text())["mcpServers"]["later"]["env"] == {
        "TOKEN": "${KXEN_T_UNSET}"
    }
    code, out, _ = kx(
        "mcp", "add-json", "later2", '{"command": "x", "headers": {}, "env": {"T": "${KXEN_T_UNSET}"}}', "--json"
    )
    assert code == 0 and json.loads(out)["warnings"] == [
        "server 'later2': ${KXEN_T_UNSET} not set in the environment yet (env.T): the server fails (phase config) "
        "until it is set where kxen runs"
    ]


def test_import_of_an_entry_whose_variable_is_not_set_yet_warns(kx, kxen_home, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory,stdio,http,sse")
    monkeypatch.delenv("PG_PASSWORD", raising=False)
    code, out, err = kx("mcp", "import", str(FIXTURES / "cursor.mcp.json"), "--from", "cursor", "--yes", "--json")
    data = json.loads(out)
    row = next(r for r in data["servers"] if r["name"] == "postgres")
    assert row["status"] == "add" and data["written"], data
    assert row["warnings"] == [
        "server 'postgres': ${PG_PASSWORD} not set in the environment yet (env.PGPASSWORD): the server fails "
        "(phase config) until it is set where kxen runs"
    ]
    code, out, err = kx("mcp", "import", str(FIXTURES / "cursor.mcp.json"), "--from", "cursor")
    assert "warning:" not in out  # already there, unchanged: nothing to warn about again


# --- the real-peer twin: the official Python SDK server over stdio ----------------------------------


@pytest.mark.anyio
async def test_sdk_peer_runs_beside_an_entry_whose_variable_is_unset(kxen_home, ws):
    pytest.importorskip("mcp")
    entry = {"command": sys.executable, "args": [str(SDK_SERVER), "stdio"], "defaultToolPolicy": "allow"}
    servers = {"sdk": entry, "needs": {**entry, "env": {"TOKEN": "${KXEN_T_UNSET}"}}}
    async with running(kxen_home, ws, servers=servers, allow=["stdio"], wait=60) as rt:
        assert rt.servers["sdk"].state == "ready", rt.servers["sdk"].snapshot()
        assert (rt.servers["needs"].state, rt.servers["needs"].phase) == ("failed", "config")
        assert rt.servers["needs"].session is None  # never started
        with anyio.fail_after(30):
            result = await rt.call_tool("sdk__add", {"a": 2, "b": 40})
        assert not result.get("isError") and "42" in json.dumps(result), result

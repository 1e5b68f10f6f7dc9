"""``kxen mcp plan`` / ``Runtime.plan()``: what would start and why not, starting and contacting
nothing (every server here logs when it starts; no log file may appear)."""

from __future__ import annotations

import json

from remote_support import remote_on
from support import demo_entry, write_project

from kxen_core.cli import command as cli
from kxen_core.config import load_config
from kxen_core.config.trust import trust
from kxen_core.launch.resolve import resolve_launch
from kxen_core.runtime.workspace import Runtime

SECRET = "sk-live-plan-0123456789"


def _setup(kxen_home, ws, tmp_path):
    logs = {n: tmp_path / f"{n}.log" for n in ("u", "p", "q", "off")}
    kxen_home.write_servers(
        {
            "u": demo_entry(logs["u"], env={"API_TOKEN": SECRET}),
            "off": {**demo_entry(logs["off"]), "enabled": False},
            "web": {"url": f"https://x.example/mcp?api_key={SECRET}", "headers": {"Authorization": f"Bearer {SECRET}"}},
            "gone": {"command": "no-such-command-kxen-plan"},
        }
    )
    write_project(ws, {"p": demo_entry(logs["p"]), "q": demo_entry(logs["q"], args=["x"])})
    return logs


def test_plan_says_what_would_start_and_why_not_and_starts_nothing(kxen_home, ws, tmp_path):
    logs = _setup(kxen_home, ws, tmp_path)
    trust(kxen_home.path, ws)
    config = load_config(None, ws)
    fp_p = resolve_launch(config.servers["p"], ws).fingerprint
    rows = {r["name"]: r for r in Runtime(workspace=ws, approve=[fp_p]).plan()}
    assert not [p for p in logs.values() if p.exists()]  # nothing started
    assert rows["u"]["start"] and rows["u"]["launch"]["env"]["API_TOKEN"] != SECRET  # a digest
    assert rows["p"]["start"] and rows["p"]["approved"] and rows["p"]["fingerprint"] == fp_p
    q = rows["q"]
    assert (q["start"], q["state"], q["approved"]) == (False, "awaiting_approval", False)
    assert f"--approve {q['fingerprint']}" in q["reason"]
    assert (rows["off"]["start"], rows["off"]["state"]) == (False, "disabled")
    assert (rows["web"]["start"], rows["web"]["state"]) == (False, "disabled") and "remote MCP is off" in rows["web"][
        "reason"
    ]
    assert (rows["gone"]["start"], rows["gone"]["state"]) == (False, "failed") and "transport:" in rows["gone"][
        "reason"
    ]
    assert SECRET not in json.dumps(rows)


def test_plan_of_a_remote_server_shows_the_url_without_query_values_and_only_header_names(kxen_home, ws, tmp_path):
    _setup(kxen_home, ws, tmp_path)
    kxen_home.write_settings(remote_on(f"https://x.example/mcp?api_key={SECRET}", settings=""))
    web = {r["name"]: r for r in Runtime(workspace=ws).plan()}["web"]
    assert (
        web["start"] and web["headers"] == ["Authorization"] and "api_key=" in web["url"] and SECRET not in web["url"]
    )


def test_cli_plan_in_an_untrusted_workspace(kxen_home, ws, tmp_path, capsys):
    logs = _setup(kxen_home, ws, tmp_path)
    assert cli.main(["--workspace", str(ws), "mcp", "plan", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in data["servers"]}
    assert data["trusted"] is False
    assert (rows["p"]["state"], rows["p"]["launch"]) == ("awaiting_trust", None)
    assert cli.main(["--workspace", str(ws), "mcp", "plan"]) == 0
    out = capsys.readouterr().out
    assert "awaiting_trust" in out and "kxen trust" in out and SECRET not in out
    assert not [p for p in logs.values() if p.exists()]

"""A config problem never shows a value that may be a credential.

The rule (safe by construction, in :mod:`kxen_core.config.converter`): a value of the wrong type is named by
its type only; a string that is not one of the allowed words is not shown; a validator's message
under a key that looks secret is replaced. So a token pasted into the wrong place -- a list under
``headers.Authorization``, a dict under ``env``, a string where a number belongs -- never reaches
``kxen config check``, ``kxen mcp status --json`` or a ConfigError message.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kxen_core.cli import command as cli
from kxen_core.config import load_config
from kxen_core.config.trust import trust
from kxen_core.errors import ConfigError

_secrets = st.builds(
    lambda prefix, body: prefix + body,
    st.sampled_from(["sk-live-", "Bearer sk-", "ghp_", "xoxb-", "AKIA", "hunter2-", "p@ss:"]),
    st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnpqrstuvwxyz23456789", min_size=12, max_size=40),
)


def _shapes(secret: str) -> st.SearchStrategy[Any]:
    """The secret as a value of every shape: alone, in a list, in an object, nested."""
    return st.sampled_from(
        [
            secret,
            [secret],
            {"k": secret},
            {"Authorization": [secret]},
            [[secret, 1]],
            {"a": {"b": secret}},
            [{"token": secret}],
        ]
    )


# where a value goes in a server entry: (label, builder of the entry around the value)
_PLACES: dict[str, Any] = {
    "command": lambda v: {"command": v},
    "args": lambda v: {"command": "x", "args": v},
    "args[0]": lambda v: {"command": "x", "args": [v]},
    "env": lambda v: {"command": "x", "env": v},
    "env.API_TOKEN": lambda v: {"command": "x", "env": {"API_TOKEN": v}},
    "cwd": lambda v: {"command": "x", "cwd": v},
    "url": lambda v: {"url": v},
    "transport-wrong-type": lambda v: {"url": "https://x.example/mcp", "transport": v},
    "headers": lambda v: {"url": "https://x.example/mcp", "headers": v},
    "headers.Authorization": lambda v: {"url": "https://x.example/mcp", "headers": {"Authorization": v}},
    "headers.X-Plain": lambda v: {"url": "https://x.example/mcp", "headers": {"X-Plain": v}},
    "oauth": lambda v: {"url": "https://x.example/mcp", "oauth": v},
    "oauth.clientSecret": lambda v: {"url": "https://x.example/mcp", "oauth": {"clientSecret": v}},
    "oauth.clientId": lambda v: {"url": "https://x.example/mcp", "oauth": {"clientId": v}},
    "oauth.scopes": lambda v: {"url": "https://x.example/mcp", "oauth": {"scopes": v}},
    "oauth.authorizationServerMetadataUrl": lambda v: {
        "url": "https://x.example/mcp",
        "oauth": {"authorizationServerMetadataUrl": v},
    },
    "options": lambda v: {"command": "x", "options": v},
    "options.maxLineBytes": lambda v: {"command": "x", "options": {"maxLineBytes": v}},
    "toolPolicies": lambda v: {"command": "x", "toolPolicies": v},
    "toolPolicies.t": lambda v: {"command": "x", "toolPolicies": {"t": v}},
    "defaultToolPolicy": lambda v: {"command": "x", "defaultToolPolicy": v},
    "enabled": lambda v: {"command": "x", "enabled": v},
    "timeouts": lambda v: {"command": "x", "timeouts": v},
    "timeouts.requestSeconds": lambda v: {"command": "x", "timeouts": {"requestSeconds": v}},
}

_SETTINGS_PLACES: dict[str, Any] = {
    "trusted_workspaces": lambda v: {"trusted_workspaces": v},
    "trusted_workspaces[0]": lambda v: {"trusted_workspaces": [v]},
    "mcp.remote_enabled": lambda v: {"mcp": {"remote_enabled": v}},
    "mcp.remote_catalog.max_schema_bytes": lambda v: {"mcp": {"remote_catalog": {"max_schema_bytes": v}}},
    "roles.r.allow": lambda v: {"roles": {"r": {"allow": v}}},
    "roles.r.allow[0]": lambda v: {"roles": {"r": {"allow": [v + "x" * 200 if isinstance(v, str) else v]}}},
}


def _problems(home: Path, ws: Path) -> list[str]:
    """Every problem line a load produces (user and project), plus the ConfigError's own text."""
    try:
        config = load_config(home, ws)
    except ConfigError as exc:
        return [*exc.problems, str(exc)]
    return list(config.project_problems)


def _toml(data: dict[str, Any]) -> str:
    import tomlkit

    return tomlkit.dumps(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(), secret=_secrets, place=st.sampled_from(sorted(_PLACES)), scope=st.sampled_from(["user", "project"])
)
def test_no_problem_echoes_a_secret_placed_anywhere_in_a_server_entry(data, secret, place, scope):
    value = data.draw(_shapes(secret), label="value")
    if place == "transport-wrong-type" and isinstance(value, str):
        value = [value]  # a transport *name* is quoted so a typo can be fixed; any other shape is not
    with tempfile.TemporaryDirectory() as tmp:
        home, ws = Path(tmp) / "home", Path(tmp) / "ws"
        (ws / ".kxen").mkdir(parents=True)
        home.mkdir()
        target = home / "mcp.json" if scope == "user" else ws / ".kxen" / "mcp.json"
        target.write_text(json.dumps({"mcpServers": {"srv": _PLACES[place](value)}}))
        for line in _problems(home, ws):
            assert secret not in line, (place, line)
            assert secret[:12] not in line, (place, line)  # not even a truncated echo


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), secret=_secrets, place=st.sampled_from(sorted(_SETTINGS_PLACES)))
def test_no_problem_echoes_a_secret_placed_anywhere_in_settings(data, secret, place):
    value = data.draw(_shapes(secret), label="value")
    with tempfile.TemporaryDirectory() as tmp:
        home, ws = Path(tmp) / "home", Path(tmp) / "ws"
        home.mkdir(), ws.mkdir()
        (home / "config.toml").write_text(_toml(_SETTINGS_PLACES[place](value)))
        for line in _problems(home, ws):
            assert secret not in line and secret[:12] not in line, (place, line)


SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c"


def test_the_reported_case_in_config_check_and_status_json(kxen_home, ws, capsys, monkeypatch):
    """``headers['Authorization']: expected a string, got list ['Bearer sk-live-…']`` -- no more."""
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory")
    trust(kxen_home.path, ws)  # the project file of an untrusted workspace is not read this far
    (ws / ".kxen").mkdir()
    (ws / ".kxen" / "mcp.json").write_text(
        json.dumps(
            {"mcpServers": {"p": {"url": "https://x.example/mcp", "headers": {"Authorization": [f"Bearer {SECRET}"]}}}}
        )
    )
    for argv in (["config", "check"], ["config", "check", "--json"], ["mcp", "status", "--json", "--wait", "5"]):
        cli.main(["--home", str(kxen_home.path), "--workspace", str(ws), *argv])
        out, err = capsys.readouterr()
        assert "mcpServers.p.headers" in out + err and "expected a string, got list" in out + err, argv
        assert SECRET not in out + err and "sk-live" not in out + err, argv
    kxen_home.write_servers({"u": {"url": "https://x.example/mcp", "headers": {"Authorization": [f"Bearer {SECRET}"]}}})
    assert cli.main(["--home", str(kxen_home.path), "--workspace", str(ws), "config", "check", "--json"]) == 2
    out, err = capsys.readouterr()
    assert "expected a string, got list" in out and "sk-live" not in out + err

"""``kxen mcp call`` shows a call's progress on a terminal (stderr, escaped, throttled), and never in
``--json`` output or when stderr is not a terminal."""

from __future__ import annotations

import json

import pytest
from kxen_testing import mem, text_result
from test_server_traffic import progress_fake

from kxen_core.cli import contents as cli


@pytest.fixture
def progress_server(kxen_home, fakes):
    fake = fakes.add("f", progress_fake(3))
    real = fake.methods["tools/call"]

    async def call(params):
        token = (params.get("_meta") or {}).get("progressToken")
        if token is not None:  # a hostile message first: it must reach the terminal escaped
            await fake.notify(
                "notifications/progress", {"progressToken": token, "progress": 0.5, "message": "\x1b[2J[red]x[/red]"}
            )
        return await real(params)

    fake.methods["tools/call"] = call
    kxen_home.write_servers({"s": mem("f", defaultToolPolicy="allow")})
    return fake


def test_progress_is_shown_on_a_terminal(kx, progress_server, monkeypatch):
    monkeypatch.setattr(cli, "_on_terminal", lambda: True)
    monkeypatch.setattr(cli, "PROGRESS_EVERY", 0.0)
    code, out, err = kx("mcp", "call", "s", "work", "--wait", "10")
    assert code == 0 and out.strip() == "done"
    assert "progress 3/3: step 3" in err
    assert "\x1b" not in err and "\\x1b[2J[red]x[/red]" in err
    assert progress_server.tokens == [progress_server.tokens[0]] and progress_server.tokens[0]


def test_no_progress_in_json_or_off_a_terminal(kx, progress_server, monkeypatch):
    monkeypatch.setattr(cli, "_on_terminal", lambda: True)
    code, out, err = kx("mcp", "call", "s", "work", "--json", "--wait", "10")
    assert code == 0 and json.loads(out) == {**text_result("done"), "isError": False} and "progress" not in err
    monkeypatch.setattr(cli, "_on_terminal", lambda: False)
    code, out, err = kx("mcp", "call", "s", "work", "--wait", "10")
    assert code == 0 and "progress" not in err
    # no callback, so nothing shown; progress is still asked for, as it keeps a call alive
    # (timeouts.resetOnProgress, on by default)
    assert all(progress_server.tokens) and len(progress_server.tokens) == 2

"""``kxen mcp login`` / ``kxen mcp logout`` and what ``kxen mcp status`` says of a server that needs a
sign-in, in-process, with a fake sign-in plugin against the real SDK server behind a Bearer gate
(tests/peers/gated_server.py). No fake token ever shows in what the commands print."""

from __future__ import annotations

import json
import webbrowser

import pytest
from auth_support import GOOD, Credentials, LoginPlugin, SignIn, assert_no_token, gated
from remote_support import remote, remote_on

from kxen_core.cli import login as cli_login


@pytest.fixture
def extra_plugins(monkeypatch) -> list:
    """Plugin objects every plugin manager the command makes gets, beside http, sse and memory."""
    from kxen_core.plugins import manager as plugins_mod

    original = plugins_mod.make_plugin_manager
    extra: list = []

    def make(**kwargs):
        return original(**{**kwargs, "extra": [*kwargs.get("extra", ()), *extra]})

    monkeypatch.setattr(plugins_mod, "make_plugin_manager", make)
    return extra


@pytest.fixture
def opened(monkeypatch) -> list[str]:
    """The URLs kxen asked the standard webbrowser module to open (none really is)."""
    urls: list[str] = []

    def fake_open(url, *args, **kwargs):
        urls.append(url)
        return True

    monkeypatch.setattr(webbrowser, "open", fake_open)
    return urls


@pytest.fixture
def gated_server(kx, kxen_home, start_peer, monkeypatch) -> str:
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "http,sse,memory")
    url = gated(start_peer)
    kxen_home.write_settings(remote_on(url))
    kxen_home.write_servers({"r": remote(url)})
    return url


def test_login_no_browser_prints_the_url_waits_and_the_server_goes_ready(
    kx, gated_server, extra_plugins, opened, monkeypatch
):
    creds = Credentials(first=None)
    sign_in = SignIn(creds, url="https://auth.example/authorize?client_id=kxen&state=s1&x=\x1b[31mred")
    extra_plugins += [creds, sign_in]
    said: list[str] = []
    original_say = cli_login.say

    def say(text, *, err=False):
        said.append(text)
        if "still waiting" in text:  # the person signs in only once kxen visibly waits
            for flow in sign_in.flows:
                flow.release.set()
        original_say(text, err=err)

    monkeypatch.setattr(cli_login, "say", say)
    monkeypatch.setattr(cli_login, "FIRST_NOTICE", 0.0)
    code, out, err = kx("mcp", "login", "r", "--no-browser", "--timeout", "60")
    assert code == 0, (out, err)
    assert "To sign in to r, open this URL in a browser:" in out
    assert "https://auth.example/authorize?client_id=kxen&state=s1&x=" in out and "\x1b" not in out  # escaped
    assert "kxen: still waiting for the sign-in to r" in err
    assert "signed in to r" in out and "r is ready: 7 tool(s)" in out, out
    assert opened == []
    assert sign_in.flows[0].request.open_browser is False and sign_in.flows[0].closed == 1
    assert_no_token("the output", out + err)


def test_login_opens_the_browser_unless_told_not_to(kx, gated_server, extra_plugins, opened):
    creds = Credentials(first=None)
    sign_in = SignIn(creds, auto=True)
    extra_plugins += [creds, sign_in]
    code, out, err = kx("mcp", "login", "r", "--scope", "files:read files:write", "--scope", "admin")
    assert code == 0, (out, err)
    assert opened == [sign_in.url]
    assert sign_in.flows[0].request.scopes == ("files:read", "files:write", "admin")
    assert sign_in.flows[0].request.open_browser is True


def test_login_times_out_cancels_and_fails(kx, gated_server, extra_plugins, opened):
    creds = Credentials(first=None)
    sign_in = SignIn(creds)  # never released: nobody signs in
    extra_plugins += [creds, sign_in]
    code, out, err = kx("mcp", "login", "r", "--no-browser", "--timeout", "0.5")
    assert code == 1
    assert "kxen: the sign-in to r was not finished within 0.5 s; cancelled" in err
    assert sign_in.flows[0].closed == 1 and not sign_in.flows[0].finished


def test_a_declined_login_says_why(kx, gated_server, extra_plugins, opened):
    creds = Credentials(first=None)
    extra_plugins += [creds, SignIn(creds, deny=True, auto=True)]
    code, out, err = kx("mcp", "login", "r", "--no-browser")
    assert code == 1
    assert "kxen: sign-in to r failed: the person declined the sign-in (access_denied)" in err


def test_login_without_a_sign_in_plugin_says_what_to_install(kx, gated_server):
    code, out, err = kx("mcp", "login", "r", "--no-browser")
    assert code == 1
    assert "no installed plugin can sign in to server 'r' (install kxen-oauth" in err


def test_logout_reports_what_was_removed(kx, gated_server, extra_plugins):
    creds = Credentials(first=GOOD)
    sign_in = SignIn(creds)
    extra_plugins += [creds, sign_in]
    code, out, err = kx("mcp", "logout", "r", "--forget-client")
    assert (code, out.strip()) == (0, "signed out of r: its stored tokens were removed"), err
    assert sign_in.logouts[0].forget_client is True
    code, out, err = kx("mcp", "logout", "r")
    assert (code, out.strip()) == (0, "nothing was stored for r"), err
    assert_no_token("the output", out + err)


def test_status_names_the_sign_in_as_the_next_step(kx, gated_server, extra_plugins, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # the table unfolded, whatever width the run has
    creds = Credentials(first=None)
    extra_plugins += [creds, LoginPlugin()]
    code, out, err = kx("mcp", "status", "--json", "--wait", "30")
    assert code == 1
    (row,) = json.loads(out)["servers"]
    assert (row["state"], row["phase"], row["next"], row["scopes"]) == ("needs_login", "auth", "kxen mcp login r", [])
    assert row["auth"].startswith("credentials from: "), row["auth"]
    code, out, err = kx("mcp", "status", "--wait", "30")
    assert code == 1
    assert "needs_login (auth)" in out and "next: kxen mcp login r" in out, out
    assert "HTTP 401 Unauthorized from http://127.0.0.1:" in out


def test_status_names_the_missing_scope(kx, gated_server, extra_plugins, kxen_home, start_peer):
    url = gated(start_peer, "stateful", "--need", "tools/list=admin")
    kxen_home.write_settings(remote_on(url))  # another peer than the fixture's: its own confirmation
    kxen_home.write_servers({"r": remote(url)})
    extra_plugins += [Credentials(first=GOOD), LoginPlugin()]
    code, out, err = kx("mcp", "status", "--json", "--wait", "30")
    (row,) = json.loads(out)["servers"]
    assert (row["state"], row["next"], row["scopes"]) == ("needs_login", "kxen mcp login r --scope admin", ["admin"]), (
        row
    )
    assert_no_token("the output", out + err)


@pytest.mark.parametrize("mode", ["stateful", "sse"])
def test_doctor_names_the_auth_step_and_the_next_step(kx, kxen_home, start_peer, extra_plugins, monkeypatch, mode):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "http,sse,memory")
    url = gated(start_peer, mode)
    kxen_home.write_settings(remote_on(url))
    kxen_home.write_servers({"r": remote(url, "sse" if mode == "sse" else "http")})
    extra_plugins += [Credentials(first=None), LoginPlugin()]
    code, out, err = kx("mcp", "doctor", "r", "--json")
    assert code == 1
    steps = {s["step"]: s for s in json.loads(out)["steps"]}
    assert steps["transport"]["ok"] and not steps["auth"]["ok"], steps
    assert steps["auth"]["detail"].startswith("HTTP 401 Unauthorized from http://127.0.0.1:"), steps
    assert steps["auth"]["detail"].endswith("-- next: kxen mcp login r"), steps
    assert "initialize" not in steps

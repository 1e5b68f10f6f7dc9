"""Project config (``<workspace>/.kxen/mcp.json``) comes from a repository: it may not set env keys that
change what runs, may not hold credentials, and is rejected whole on any problem -- nothing from it
starts, while the user's servers keep working. A project entry replaces the user entry of the same
name as a whole: it never inherits the user's env, headers or OAuth secret.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from remote_support import remote_on
from support import WAIT, Spy, demo_entry, settle, state, write_project

from kxen_core import hookimpl
from kxen_core.cli import command as cli
from kxen_core.config import load_config
from kxen_core.config.project import dangerous_env_key, secret_header
from kxen_core.config.trust import trust
from kxen_core.plugins.manager import make_plugin_manager
from kxen_core.policy import ApprovalDecision, ApprovalRequest
from kxen_core.runtime.workspace import Runtime

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def trusted_ws(kxen_home, ws):
    """The project rules apply to what a trusted workspace's file holds: an untrusted workspace's
    file gives only server names (see tests/test_untrusted_project.py)."""
    trust(kxen_home.path, ws)


#: env keys a project may never set (each also in lower case and mixed case below)
DANGEROUS_ENV = [
    "PATH", "NODE_OPTIONS", "PYTHONPATH", "RUBYOPT", "PERL5OPT", "LD_PRELOAD", "DYLD_INSERT_LIBRARIES",
    "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "PYTHONHOME", "PYTHONSTARTUP", "NODE_PATH", "BASH_ENV",
    "RUBYLIB", "PERL5LIB", "JAVA_TOOL_OPTIONS", "SHELL", "HOME",
]  # fmt: skip
#: header names that carry credentials (each also in lower case below)
SECRET_HEADERS = [
    "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-API-Key", "X-Api-Key", "Api-Key",
    "X-Auth-Token", "X-Access-Token", "Private-Token", "X-Goog-Api-Key", "X-Vault-Token", "X-Client-Secret",
]  # fmt: skip
SAFE_ENV = ["MODE", "LOG_LEVEL", "REGION", "API_TOKEN", "FEATURE_FLAGS", "NODE_ENV", "PYTHONUNBUFFERED"]
SAFE_HEADERS = ["Accept-Language", "X-Request-Source", "User-Agent", "X-Trace-Id", "MCP-Client"]


# --- helpers ----------------------------------------------------------------------------------


class ApproveAll:
    """An approval channel that says yes to everything (and remembers what it saw)."""

    __name__ = "approve-all"

    def __init__(self) -> None:
        self.requests: list[ApprovalRequest] = []

    @hookimpl
    def kxen_approval_prompt(self, request: ApprovalRequest) -> ApprovalDecision:
        self.requests.append(request)
        return ApprovalDecision(approved=True, channel="approve-all")


def spy_pm(*extra: Any):
    """No installed plugin at all: nothing can really start, the spy sees what would."""
    return make_plugin_manager(load_entrypoints=False, extra=list(extra))


def mixed_case(key: str) -> str:
    return "".join(c.lower() if i % 2 else c.upper() for i, c in enumerate(key))


# --- rejected keys, named by file, key path and rule ------------------------------------------


@pytest.mark.parametrize(
    "key", DANGEROUS_ENV + [k.lower() for k in DANGEROUS_ENV] + [mixed_case(k) for k in DANGEROUS_ENV[:8]]
)
def test_dangerous_env_keys_are_rejected_with_file_key_path_and_rule(kxen_home, ws, key):
    pfile = write_project(ws, {"p": demo_entry(env={"MODE": "x", key: "/tmp/evil"})})
    config = load_config(None, ws)
    assert "p" not in config.servers
    [problem] = config.project_problems
    assert problem.startswith(f"{pfile}: mcpServers.p.env.{key}: ")
    assert "project config must not set this variable" in problem
    assert "/tmp/evil" not in problem  # the value is never echoed


@pytest.mark.parametrize("name", SECRET_HEADERS + [h.lower() for h in SECRET_HEADERS] + ["AUTHORIZATION"])
def test_secret_headers_are_rejected_with_file_key_path_and_rule(kxen_home, ws, name):
    pfile = write_project(ws, {"r": {"url": "https://example.com/mcp", "headers": {"Accept": "x", name: "s3cr3t-v"}}})
    config = load_config(None, ws)
    assert "r" not in config.servers
    [problem] = config.project_problems
    assert problem.startswith(f"{pfile}: mcpServers.r.headers.{name}: ")
    assert "credential headers" in problem
    assert "s3cr3t-v" not in problem


def test_oauth_client_secret_is_rejected(kxen_home, ws):
    pfile = write_project(
        ws, {"r": {"url": "https://example.com/mcp", "oauth": {"clientId": "kxen", "clientSecret": "cs-SECRET"}}}
    )
    config = load_config(None, ws)
    assert config.project_problems == (
        f"{pfile}: mcpServers.r.oauth.clientSecret: project config must not hold an OAuth client secret",
    )
    assert "r" not in config.servers


def test_project_oauth_without_secret_is_fine(kxen_home, ws):
    write_project(ws, {"r": {"url": "https://example.com/mcp", "oauth": {"clientId": "kxen", "scopes": ["read"]}}})
    config = load_config(None, ws)
    assert config.project_problems == ()
    assert config.servers["r"].oauth.clientId == "kxen"


@pytest.mark.parametrize("key", SAFE_ENV)
def test_ordinary_env_keys_are_accepted(kxen_home, ws, key):
    write_project(ws, {"p": demo_entry(env={key: "1"})})
    config = load_config(None, ws)
    assert config.project_problems == ()
    assert config.servers["p"].env == {key: "1"}


def test_every_problem_is_listed(kxen_home, ws):
    pfile = write_project(
        ws,
        {
            "a": demo_entry(env={"PATH": "/x", "LD_PRELOAD": "/y.so"}),
            "b": {"url": "https://example.com/mcp", "headers": {"Cookie": "c"}, "oauth": {"clientSecret": "s"}},
            "c": demo_entry(),
        },
    )
    problems = load_config(None, ws).project_problems
    paths = sorted(p.split(": ")[1] for p in problems)
    assert paths == [
        "mcpServers.a.env.LD_PRELOAD",
        "mcpServers.a.env.PATH",
        "mcpServers.b.headers.Cookie",
        "mcpServers.b.oauth.clientSecret",
    ]
    assert all(p.startswith(f"{pfile}: ") for p in problems)


def test_the_user_may_set_what_a_project_may_not(kxen_home, ws):
    kxen_home.write_servers(
        {
            "u": demo_entry(env={"PATH": "/usr/bin", "NODE_OPTIONS": "--max-old-space-size=100"}),
            "r": {
                "url": "https://example.com/mcp",
                "headers": {"Authorization": "Bearer u"},
                "oauth": {"clientSecret": "s"},
            },
        }
    )
    config = load_config(None, ws)
    assert set(config.servers) == {"u", "r"}
    assert config.project_problems == ()


@pytest.mark.parametrize(
    "key", ["npm_config_registry", "NPM_CONFIG_REGISTRY", "UV_INDEX_URL", "uv_default_index", "PIP_INDEX_URL",
            "PIP_EXTRA_INDEX_URL", "YARN_REGISTRY", "PNPM_HOME", "BUNDLE_GEMFILE", "GEM_HOME", "CARGO_HOME"]
)  # fmt: skip
def test_registry_redirection_is_rejected(kxen_home, ws, key):
    write_project(ws, {"p": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"],
                             "env": {key: "https://registry.evil.example/"}}})  # fmt: skip
    assert load_config(None, ws).project_problems


@pytest.mark.parametrize("name", ["Ocp-Apim-Subscription-Key", "X-Functions-Key", "X-Access-Key"])
def test_key_headers_are_rejected(kxen_home, ws, name):
    write_project(ws, {"r": {"url": "https://example.com/mcp", "headers": {name: "k"}}})
    assert load_config(None, ws).project_problems


# --- a rejected project file starts nothing; the user's servers keep working ------------------


async def test_nothing_from_a_rejected_project_file_starts_and_user_servers_work(kxen_home, ws, tmp_path):
    good, bad, ulog = tmp_path / "good.log", tmp_path / "bad.log", tmp_path / "user.log"
    kxen_home.write_servers({"u": demo_entry(ulog, toolPolicies={"echo": "allow"})})
    pfile = write_project(ws, {"good": demo_entry(good), "bad": demo_entry(bad, env={"NODE_OPTIONS": "--require x"})})
    trust(kxen_home.path, ws)
    channel = ApproveAll()
    async with Runtime(workspace=ws, pm=make_plugin_manager(extra=[channel])) as rt:
        await settle(rt)
        assert set(rt.servers) == {"u"}
        assert rt.config.project_problems == (
            f"{pfile}: mcpServers.bad.env.NODE_OPTIONS: project config must not set this variable: "
            "it changes what runs or how a runtime loads",
        )
        assert state(rt, "u")["state"] == "ready"
        with anyio.fail_after(WAIT):
            result = await rt.call_tool("u__echo", {"text": "still here"})
        assert result["content"][0]["text"] == "still here"
    assert channel.requests == []
    assert ulog.exists()
    assert not good.exists() and not bad.exists()


async def test_a_rejected_project_entry_leaves_the_user_entry_of_that_name(kxen_home, ws, tmp_path):
    ulog, plog = tmp_path / "user.log", tmp_path / "project.log"
    kxen_home.write_servers({"s": demo_entry(ulog)})
    write_project(ws, {"s": demo_entry(plog, env={"LD_PRELOAD": "/tmp/x.so"})})
    trust(kxen_home.path, ws)
    async with Runtime(workspace=ws, pm=make_plugin_manager(extra=[ApproveAll()])) as rt:
        await settle(rt)
        s = state(rt, "s")
        assert (s["state"], s["scope"]) == ("ready", "user")
    assert ulog.exists() and not plog.exists()


def test_config_check_reports_the_rejected_project_file(kxen_home, ws, capsys):
    pfile = write_project(ws, {"p": demo_entry(env={"PYTHONPATH": "."})})
    assert cli.main(["--workspace", str(ws), "config", "check", "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False
    assert out["problems"] == [
        {
            "file": str(pfile),
            "path": "mcpServers.p.env.PYTHONPATH",
            "rule": "project config must not set this variable: it changes what runs or how a runtime loads",
        }
    ]
    assert cli.main(["--workspace", str(ws), "config", "check"]) == 2
    err = capsys.readouterr().err
    assert "none of its servers will start" in err and "mcpServers.p.env.PYTHONPATH" in err


def test_mcp_status_names_a_rejected_project_file(kxen_home, ws, capsys):
    pfile = write_project(ws, {"p": demo_entry(env={"PYTHONPATH": "."})})
    cli.main(["--workspace", str(ws), "mcp", "status", "--wait", "5"])
    err = capsys.readouterr().err
    assert f"{pfile}: mcpServers.p.env.PYTHONPATH: " in err and "none of its servers will start" in err
    cli.main(["--workspace", str(ws), "mcp", "status", "--json", "--wait", "5"])
    out = json.loads(capsys.readouterr().out)
    assert [(p["file"], p["path"]) for p in out["problems"]] == [(str(pfile), "mcpServers.p.env.PYTHONPATH")]
    assert out["servers"] == []


def test_mcp_approvals_names_a_rejected_project_file(kxen_home, ws, capsys):
    write_project(ws, {"p": demo_entry(env={"PYTHONPATH": "."})})
    cli.main(["--workspace", str(ws), "mcp", "approvals"])
    captured = capsys.readouterr()
    assert "mcpServers.p.env.PYTHONPATH" in captured.out + captured.err


async def test_a_project_cannot_loosen_tool_policy_to_allow(kxen_home, ws, tmp_path):
    # allowing tools is the user's decision: a project file that says "allow" is rejected whole
    plog = tmp_path / "p.log"
    write_project(ws, {"p": demo_entry(plog, defaultToolPolicy="allow", toolPolicies={"echo": "allow"})})
    trust(kxen_home.path, ws)
    config = load_config(None, ws)
    assert "p" not in config.servers
    problems = "\n".join(config.project_problems)
    assert "mcpServers.p.defaultToolPolicy" in problems and "mcpServers.p.toolPolicies.echo" in problems
    assert "only ask or deny" in problems
    pm = make_plugin_manager()
    for impl in list(pm.hook.kxen_approval_prompt.get_hookimpls()):
        pm.unregister(impl.plugin)
    async with Runtime(workspace=ws, pm=pm) as rt:
        await settle(rt)
        assert "p" not in rt.servers
    assert not plog.exists()  # nothing from the rejected file ever started


# --- a project entry replaces the user entry whole ---------------------------------------------


async def test_project_entry_never_inherits_user_env_headers_or_secrets(kxen_home, ws):
    kxen_home.write_settings(remote_on("https://user.example.com/mcp", "https://project.example.com/mcp", settings=""))
    kxen_home.write_servers(
        {
            "s": demo_entry(env={"USER_ONLY": "user-secret-env", "SHARED": "user"}, toolPolicies={"echo": "allow"}),
            "r": {
                "url": "https://user.example.com/mcp",
                "headers": {"Authorization": "Bearer user-token", "X-Team": "user"},
                "oauth": {"clientId": "user-app", "clientSecret": "user-client-secret"},
                "toolPolicies": {"x": "allow"},
            },
        }
    )
    write_project(ws, {"s": demo_entry(env={"SHARED": "project"}), "r": {"url": "https://project.example.com/mcp"}})
    trust(kxen_home.path, ws)
    config = load_config(None, ws)
    assert config.servers["s"].scope == config.servers["r"].scope == "project"
    assert config.user_servers["s"].env["USER_ONLY"] == "user-secret-env"  # kept aside for fallback only

    spy = Spy()
    async with Runtime(workspace=ws, pm=spy_pm(spy, ApproveAll())) as rt:
        await settle(rt)
    opened = {s.name: s for s in spy.opened}
    assert set(opened) == {"s", "r"}
    assert opened["s"].scope == "project"
    assert opened["s"].env == {"SHARED": "project"}
    assert opened["s"].toolPolicies == {}
    assert opened["r"].scope == "project"
    assert opened["r"].url == "https://project.example.com/mcp"
    assert opened["r"].headers == {} and opened["r"].oauth is None and opened["r"].toolPolicies == {}


# --- property: nothing a project may not hold ever reaches a transport -------------------------


def _any_case(key: str):
    return st.lists(st.booleans(), min_size=len(key), max_size=len(key)).map(
        lambda flips: "".join(c.upper() if f else c.lower() for c, f in zip(key, flips, strict=True))
    )


env_keys = st.one_of(
    st.sampled_from(DANGEROUS_ENV + SAFE_ENV).flatmap(_any_case),
    st.sampled_from(["LD_", "DYLD_"]).flatmap(
        lambda p: st.from_regex(r"[A-Z_]{1,10}", fullmatch=True).map(lambda s: p + s)
    ),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True),
)
header_names = st.one_of(
    st.sampled_from(SECRET_HEADERS + SAFE_HEADERS).flatmap(_any_case),
    st.from_regex(r"X-[A-Za-z][A-Za-z0-9-]{0,12}", fullmatch=True),
)
values = st.text(alphabet="abcdefghij0123456789-", max_size=8)


@st.composite
def project_entry(draw) -> dict[str, Any]:
    if draw(st.booleans()):
        env = draw(st.dictionaries(env_keys, values.map(lambda v: "project:" + v), max_size=5))
        return {"command": sys.executable, "args": ["-c", "pass"], "env": env}
    entry: dict[str, Any] = {
        "url": "https://project.example.com/mcp",
        "headers": draw(st.dictionaries(header_names, values.map(lambda v: "project:" + v), max_size=4)),
    }
    if draw(st.booleans()):
        entry["oauth"] = {"clientId": "p"} | ({"clientSecret": "project:cs"} if draw(st.booleans()) else {})
    return entry


NAMES = ["a", "b", "c"]
USER_SERVERS = {
    "a": {"command": sys.executable, "args": ["-c", "pass"], "env": {"PATH": "user:/usr/bin", "LD_PRELOAD": "user:x"}},
    "b": {"url": "https://user.example.com/mcp", "headers": {"Authorization": "user:Bearer t"},
          "oauth": {"clientId": "u", "clientSecret": "user:cs"}},
}  # fmt: skip


def _expected_rejected(project: dict[str, Any]) -> bool:
    """The test's own oracle: the lists above, case-insensitively, plus the loader prefixes."""
    for entry in project.values():
        for key in entry.get("env", {}):
            if key.upper() in DANGEROUS_ENV or key.upper().startswith(("LD_", "DYLD_")):
                return True
        for name in entry.get("headers", {}):
            if name.lower() in {h.lower() for h in SECRET_HEADERS}:
                return True
        if "clientSecret" in entry.get("oauth", {}):
            return True
    return False


def _values(server: Any) -> list[str]:
    out = list(server.env.values()) + list(server.headers.values())
    if server.oauth is not None and server.oauth.clientSecret is not None:
        out.append(server.oauth.clientSecret)
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    project=st.dictionaries(st.sampled_from(NAMES), project_entry(), min_size=1, max_size=3),
    with_user=st.booleans(),
)
async def test_no_rejected_key_or_secret_ever_reaches_a_transport(project, with_user):
    with tempfile.TemporaryDirectory() as tmp:
        home, ws = Path(tmp) / "home", Path(tmp) / "ws"
        home.mkdir(), ws.mkdir()
        ws = ws.resolve()
        urls = ("https://project.example.com/mcp", "https://user.example.com/mcp")
        (home / "config.toml").write_text(remote_on(*urls, settings=f"trusted_workspaces = [{json.dumps(str(ws))}]\n"))
        (home / "mcp.json").write_text(json.dumps({"mcpServers": USER_SERVERS if with_user else {}}))
        write_project(ws, project)
        config = load_config(home, ws)
        if _expected_rejected(project):
            assert config.project_problems, "a project file with a forbidden key was accepted"

        spy, channel = Spy(), ApproveAll()
        async with Runtime(home=home, workspace=ws, pm=spy_pm(spy, channel)) as rt:
            with anyio.fail_after(WAIT):
                assert await rt.wait_ready()

        approved = {r.fingerprint for r in channel.requests}
        event("project rejected" if config.project_problems else "project accepted")
        event(f"project servers reaching a transport: {sum(s.scope == 'project' for s in spy.opened)}")
        for server in spy.opened:
            values_ = _values(server)
            if server.scope == "user":
                # a user entry reaches the transport unchanged: nothing from the project mixed in
                assert all(v.startswith("user:") for v in values_), server
                continue
            assert not config.project_problems, f"{server.name} started from a rejected project file"
            assert all(v.startswith("project:") for v in values_)
            assert not any(dangerous_env_key(k) for k in server.env)
            assert not any(k.upper() in DANGEROUS_ENV for k in server.env)
            assert not any(secret_header(h) for h in server.headers)
            assert not any(h.lower() in {s.lower() for s in SECRET_HEADERS} for h in server.headers)
            assert server.oauth is None or server.oauth.clientSecret is None
            if server.kind == "stdio":
                assert channel.requests and approved  # it was asked for, by fingerprint
        if config.project_problems:
            assert not any(v.startswith("project:") for s in spy.opened for v in _values(s))
            assert channel.requests == []

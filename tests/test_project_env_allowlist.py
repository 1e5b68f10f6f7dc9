"""Project env is an allowlist of shapes a user can read, with the denylist as a second line.

The attack: a repository sets env that changes what an approved server's tools run (git's
``core.fsmonitor`` through ``GIT_CONFIG_*``, a bash function, a proxy, a TLS switch, a config file
a library loads...) or hides code behind a digest in the approval. Every such key is refused with
file, key path and rule, and the value is never echoed.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from kxen_testing import Channel
from support import demo_entry, settle, state, write_project

from kxen_core.config import load_config
from kxen_core.config.project import ENV_ALLOWED, dangerous_env_key, env_key_rule, env_value_rule
from kxen_core.config.trust import trust
from kxen_core.runtime.workspace import Runtime

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def trusted_ws(kxen_home, ws):
    """The project rules apply to what a trusted workspace's file holds: an untrusted workspace's
    file gives only server names (see tests/test_untrusted_project.py)."""
    trust(kxen_home.path, ws)


#: keys that change what runs, accepted before (the issue's list and their relatives)
GAPS = [
    "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0", "GIT_CONFIG_KEY_12", "GIT_CONFIG_PARAMETERS",
    "GIT_DIR", "GIT_WORK_TREE", "GIT_ASKPASS", "GIT_EDITOR", "GIT_PAGER", "GIT_TEMPLATE_DIR", "GIT_EXTERNAL_DIFF",
    "GIT_PROXY_COMMAND", "BASH_FUNC_git%%", "BASH_FUNC_ls", "PYTHONWARNINGS", "PYTHONPYCACHEPREFIX",
    "PYTHONPLATLIBDIR", "OPENSSL_CONF", "OPENSSL_ENGINES", "LESSOPEN", "LESSCLOSE", "NODE_TLS_REJECT_UNAUTHORIZED",
    "NODE_EXTRA_CA_CERTS", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE",
    "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSH_AUTH_SOCK", "GNUPGHOME", "XDG_CONFIG_HOME",
    "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "GOOGLE_APPLICATION_CREDENTIALS", "KUBECONFIG",
    "DOCKER_HOST", "GOFLAGS", "GOPROXY", "RUSTC_WRAPPER", "CC", "MAKEFLAGS", "PUPPETEER_EXECUTABLE_PATH",
    "TERMINFO", "LOCPATH", "TZDIR", "HOSTALIASES", "MY_TOOL_PATH", "APP_CONFIG", "SERVER_PLUGIN_DIR",
    "KXEN_HOME", "TERMCAP", "VIMINIT", "EXINIT", "GDBINIT", "FLASK_APP", "DJANGO_SETTINGS_MODULE", "MPLBACKEND",
    "CELERY_APP", "SQLALCHEMY_ENGINE", "LOG_HANDLER_CLASS", "IPYTHONDIR", "IRBRC", "ZDOTDIR", "_JAVA_OPTIONS", "1X",
    "A-B", "A.B", "A B", "K\u00e9Y", "X\x1bY",
]  # fmt: skip
#: values a shell, a template or a parser could run or expand
CODE_VALUES = ["$(id)", "`id`", "a;b", "a|b", "a&b", "a>b", "x\ny", "{{7*7}}", "${HOME}", "'q'", '"q"',
               "a\\b", "!cmd", "*", "~/x", "a\x00b", "\x1b[31m"]  # fmt: skip
#: ordinary settings a project may set (they reach the approval in clear, or as a digest when secret)
FINE = {"MODE": "fast", "LOG_LEVEL": "debug", "REGION": "eu-west-1", "NODE_ENV": "production",
        "PYTHONUNBUFFERED": "1", "API_BASE": "https://api.example.com/v1", "FEATURE_FLAGS": "a,b",
        "MAX_ITEMS": "100", "API_TOKEN": "tok-SECRET-1", "TZ": "Europe/Paris"}  # fmt: skip


@pytest.mark.parametrize("key", GAPS)
def test_keys_that_change_what_runs_are_refused_with_file_key_path_and_rule(kxen_home, ws, key):
    pfile = write_project(ws, {"p": demo_entry(env={"MODE": "x", key: "v4lue-not-echoed"})})
    config = load_config(None, ws)
    assert "p" not in config.servers
    [problem] = config.project_problems
    shown = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in key)
    assert problem.startswith(f"{pfile}: mcpServers.p.env.{shown}: ")
    assert "project config must not" in problem or "project env keys are" in problem
    assert "v4lue-not-echoed" not in problem
    assert problem.isprintable()


@pytest.mark.parametrize("value", CODE_VALUES)
def test_code_bearing_values_are_refused_and_never_echoed(kxen_home, ws, value):
    pfile = write_project(ws, {"p": demo_entry(env={"API_TOKEN": value})})
    config = load_config(None, ws)
    [problem] = config.project_problems
    rule = "project config must not reference host variables" if "${" in value else "project env values are"
    assert problem.startswith(f"{pfile}: mcpServers.p.env.API_TOKEN: {rule}")
    assert value not in problem or value in ("*",) and problem.count("*") == 0


def test_a_long_value_is_refused(kxen_home, ws):
    write_project(ws, {"p": demo_entry(env={"MODE": "x" * 1025})})
    [problem] = load_config(None, ws).project_problems
    assert "at most 1024 characters" in problem and "x" * 100 not in problem


async def test_the_git_fsmonitor_attack_never_reaches_an_approval(kxen_home, ws, tmp_path):
    """The issue's attack: an approved server running ``git status`` ran ./evil.sh via core.fsmonitor."""
    marker = tmp_path / "pwned"
    (ws / "evil.sh").write_text(f"#!/bin/sh\necho pwned > {marker}\n")
    (ws / "evil.sh").chmod(0o755)
    env = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": "./evil.sh"}
    pfile = write_project(ws, {"p": demo_entry(env=env)})
    trust(kxen_home.path, ws)
    channel = Channel(approved=True)
    from kxen_testing import running

    async with running(kxen_home, ws, channel, allow=["stdio"]) as rt:
        status = json.dumps(rt.status())
        problems = rt.problems
    assert not channel.requests, "a launch with git config in its env was put to the user"
    assert len(problems) == 3 and all(p.startswith(f"{pfile}: mcpServers.p.env.GIT_CONFIG_") for p in problems)
    assert "./evil.sh" not in status + "".join(problems)
    assert not marker.exists()


async def test_allowed_env_reaches_the_approval_readable(kxen_home, ws, tmp_path):
    write_project(ws, {"p": demo_entry(env=FINE)})
    trust(kxen_home.path, ws)
    channel = Channel(approved=False)
    async with Runtime(workspace=ws, pm=_pm(channel)) as rt:
        await settle(rt)
        assert state(rt, "p")["state"] == "awaiting_approval"
    [request] = channel.requests
    shown = request.details["env"]
    for key, value in FINE.items():
        if key == "API_TOKEN":
            assert shown[key].startswith("sha256:") and value not in json.dumps(request.details)
        else:
            assert shown[key] == value


def _pm(*channels):
    from kxen_core.plugins.manager import make_plugin_manager

    pm = make_plugin_manager(extra=list(channels))
    for impl in list(pm.hook.kxen_approval_prompt.get_hookimpls()):
        if impl.plugin not in channels:
            pm.unregister(impl.plugin)
    return pm


def test_the_denylist_stays_a_second_line():
    for key in ("GIT_CONFIG_KEY_0", "BASH_FUNC_x%%", "PYTHONWARNINGS", "OPENSSL_CONF", "LESSOPEN", "https_proxy"):
        assert dangerous_env_key(key), key
    for key in ENV_ALLOWED:
        assert not dangerous_env_key(key) and env_key_rule(key) is None
    assert env_value_rule("plain-value_1.2:/x@y+z=%#,") is None


def test_the_git_fsmonitor_attack_is_real_where_git_exists(tmp_path):
    """The oracle: with these variables git does run the repository's script (so refusing them matters)."""
    git = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True).stdout.strip()
    if not git:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run([git, "init", "-q"], cwd=repo, env=env, check=True, timeout=30)
    marker = tmp_path / "pwned"
    (repo / "evil.sh").write_text(f"#!/bin/sh\necho pwned > {marker}\n")
    (repo / "evil.sh").chmod(0o755)
    attack = {**env, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": "./evil.sh"}
    subprocess.run([git, "status", "--short"], cwd=repo, env=attack, capture_output=True, timeout=30)
    assert marker.exists()
    assert all(env_key_rule(k) for k in attack if k.startswith("GIT_"))
    assert sys.executable  # (no interpreter of the host was involved)

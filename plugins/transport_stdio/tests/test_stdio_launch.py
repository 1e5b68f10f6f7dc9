"""Launch contract: environment, working directory, command resolution, no shell, own session."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from kxen_testing import running
from kxen_transport_stdio import ENV_PASSTHROUGH, StdioTransport
from stdio_support import HELPER, HELPER_ARGV, OWNER, STDIO, context, helper, owned_helpers, server_pid

from kxen_core.config import ServerConfig
from kxen_core.errors import ConnectError
from kxen_core.launch.resolve import resolve_launch
from kxen_core.protocol.session import Session
from kxen_core.runtime.workspace import Runtime
from kxen_core.transport import TransportContext

pytestmark = pytest.mark.anyio


async def _environ(rt, server: str = "h") -> dict:
    with anyio.fail_after(10):
        result = await rt.call_tool("environ", server=server)
    return result["structuredContent"]


async def test_env_is_cleared_to_the_allow_list_plus_configured(kxen_home, workspace, monkeypatch):
    monkeypatch.setenv("SECRET_X", "must-not-leak")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nope")
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("USER", "kxen-test-user")
    monkeypatch.delenv("LC_ALL", raising=False)
    configured = {"FOO": "bar", "USER": "configured-wins"}
    async with running(kxen_home, workspace, servers={"h": helper(env=configured)}, allow=STDIO) as rt:
        info = await _environ(rt)
    env = info["env"]
    assert "SECRET_X" not in env and "AWS_SECRET_ACCESS_KEY" not in env and "KXEN_HOME" not in env
    assert "VIRTUAL_ENV" not in env and "LC_ALL" not in env
    expected = {k for k in ENV_PASSTHROUGH if k in os.environ} | set(configured)
    # Python may coerce a C locale by setting LC_CTYPE in its own environment (PEP 538)
    assert set(env) - {"LC_CTYPE"} == expected - {"LC_CTYPE"}
    assert "PYTHONSAFEPATH" not in env  # exactly the allowlist and the entry's env: nothing added
    for key in expected - set(configured) - {"LC_CTYPE"}:
        assert env[key] == os.environ[key]
    assert env["FOO"] == "bar"
    assert env["USER"] == "configured-wins"


async def test_child_runs_in_its_own_session_and_group(kxen_home, workspace):
    async with running(kxen_home, workspace, servers={"h": helper()}, allow=STDIO) as rt:
        info = await _environ(rt)
    assert info["pgid"] == info["pid"] == info["sid"] != os.getpgid(0)


async def test_cwd_defaults_to_the_workspace(kxen_home, workspace):
    async with running(kxen_home, workspace, servers={"h": helper()}, allow=STDIO) as rt:
        info = await _environ(rt)
    assert Path(info["cwd"]) == workspace


async def test_relative_cwd_is_relative_to_the_workspace(kxen_home, workspace):
    (workspace / "sub" / "dir").mkdir(parents=True)
    async with running(kxen_home, workspace, servers={"h": helper(cwd="sub/dir")}, allow=STDIO) as rt:
        info = await _environ(rt)
    assert Path(info["cwd"]) == workspace / "sub" / "dir"


async def test_missing_cwd_fails_in_transport_phase(kxen_home, workspace):
    async with running(kxen_home, workspace, servers={"h": helper(cwd="nope")}, allow=STDIO) as rt:
        st = rt.status()[0]
    assert (st["state"], st["phase"]) == ("failed", "transport")
    assert "working directory does not exist" in st["error"]


def _launcher(directory: Path, name: str) -> Path:
    """An executable shell script that execs the helper server (so argv[0] is not python)."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / name
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{HELPER}" "{OWNER}" "$@"\n')
    script.chmod(0o755)
    return script


async def test_command_is_resolved_against_the_configured_path(kxen_home, workspace, tmp_path):
    _launcher(tmp_path / "bin", "kxen-helper-cmd")
    path = f"{tmp_path / 'bin'}:/usr/bin:/bin"
    entry = {"command": "kxen-helper-cmd", "env": {"PATH": path}, "defaultToolPolicy": "allow"}
    async with running(kxen_home, workspace, servers={"h": entry}, allow=STDIO) as rt:
        assert rt.status()[0]["state"] == "ready", rt.status()
        info = await _environ(rt)
    assert info["env"]["PATH"] == path


async def test_command_with_a_slash_is_relative_to_the_server_cwd(kxen_home, workspace):
    """Such a command is a workspace file: even a user server runs it only in a trusted workspace
    and with its fingerprint approved."""
    from kxen_core.config.trust import trust

    script = _launcher(workspace / "srv" / "bin", "run")
    entry = {"command": "bin/run", "cwd": "srv", "defaultToolPolicy": "allow"}
    async with running(kxen_home, workspace, servers={"h": entry}, allow=STDIO) as rt:
        st = rt.status()[0]
    assert st["state"] == "awaiting_trust" and str(script) in st["error"] and "kxen trust" in st["error"]
    fp = st["fingerprint"]
    trust(kxen_home.path, workspace)
    async with running(kxen_home, workspace, servers={"h": entry}, allow=STDIO, approve=[fp]) as rt:
        assert rt.status()[0]["state"] == "ready", rt.status()
        info = await _environ(rt)
    assert Path(info["cwd"]) == workspace / "srv"


async def test_missing_command_fails_in_transport_phase_with_a_clear_error(kxen_home, workspace):
    servers = {
        "a": {"command": "kxen-no-such-command-xyz", "defaultToolPolicy": "allow"},
        "b": {"command": "./missing/script.sh", "defaultToolPolicy": "allow"},
    }
    async with running(kxen_home, workspace, servers=servers, allow=STDIO) as rt:
        status = {s["name"]: s for s in rt.status()}
    for name, cmd in (("a", "kxen-no-such-command-xyz"), ("b", "./missing/script.sh")):
        assert (status[name]["state"], status[name]["phase"]) == ("failed", "transport")
        assert "command not found" in status[name]["error"] and cmd in status[name]["error"]


async def test_non_executable_file_is_not_run(kxen_home, workspace):
    (workspace / "plain.sh").write_text("#!/bin/sh\n")
    async with running(kxen_home, workspace, servers={"h": {"command": "./plain.sh"}}, allow=STDIO) as rt:
        st = rt.status()[0]
    assert (st["state"], st["phase"]) == ("failed", "transport")


async def test_no_shell_is_involved(kxen_home, workspace):
    # shell syntax in args reaches the child verbatim
    entry = helper()
    entry["args"].append("--stderr=$HOME;echo pwned")
    async with running(kxen_home, workspace, servers={"h": entry}, allow=STDIO) as rt:
        st = rt.servers["h"]
        assert st.state == "ready"
        stderr = st.session._stream.describe()["stderr"]
    assert stderr == "$HOME;echo pwned"


def test_resolve_launch_keeps_a_symlinked_command_path(tmp_path):
    """A venv's bin/python is a symlink; exec'ing its target would drop the venv (site-packages)."""
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    link = tmp_path / "venv" / "bin" / "python"
    link.symlink_to(sys.executable)
    server = ServerConfig(name="s", command="venv/bin/python")
    assert resolve_launch(server, tmp_path).command == str(link)
    server = ServerConfig(name="s", command="python", env={"PATH": str(link.parent)})
    assert resolve_launch(server, tmp_path).command == str(link)


async def test_venv_interpreter_keeps_its_venv(tmp_path):
    """Run this venv's python by its (symlinked) path: the child must see the same sys.prefix."""
    server = ServerConfig(name="s", command=sys.executable, args=HELPER_ARGV)
    ctx = context(server, tmp_path)
    with anyio.fail_after(15):
        async with StdioTransport(server, ctx) as stream, Session(stream, server="s", request_timeout=10) as s:
            await s.initialize()
            result = await s.request("tools/call", {"name": "environ", "arguments": {}})
    assert result["structuredContent"]["prefix"] == sys.prefix


def test_relative_path_entries_never_resolve_into_the_workspace(tmp_path, monkeypatch):
    """Relative PATH entries (configured or the host's, '' and '.' too) would name workspace
    directories: they are skipped, and the command is looked up on the absolute entries only."""
    _launcher(tmp_path / "ws" / "tools", "kxen-rel-cmd")
    _launcher(tmp_path / "ws", "kxen-rel-cmd")
    for path in ("tools:/usr/bin", "tools", ".:tools", ":tools", "./tools:/nonexistent"):
        server = ServerConfig(name="s", command="kxen-rel-cmd", env={"PATH": path})
        with pytest.raises(ConnectError, match="command not found"):
            resolve_launch(server, tmp_path / "ws")
    monkeypatch.setenv("PATH", ".:tools")
    with pytest.raises(ConnectError, match="command not found"):
        resolve_launch(ServerConfig(name="s", command="kxen-rel-cmd"), tmp_path / "ws")
    _launcher(tmp_path / "host-bin", "kxen-rel-cmd")
    server = ServerConfig(name="s", command="kxen-rel-cmd", env={"PATH": f"tools:.:{tmp_path / 'host-bin'}"})
    launch = resolve_launch(server, tmp_path / "ws")
    assert launch.command == str(tmp_path / "host-bin" / "kxen-rel-cmd")
    assert launch.held is None


async def test_connect_error_for_a_missing_command_directly(tmp_path):
    server = ServerConfig(name="s", command="kxen-no-such-command-xyz")
    with pytest.raises(ConnectError, match="command not found"):
        context(server, tmp_path)  # the core resolves the launch before any transport opens


async def test_the_transport_refuses_to_start_without_a_resolved_launch(tmp_path):
    server = ServerConfig(name="s", command=sys.executable, args=HELPER_ARGV)
    with pytest.raises(ConnectError, match="no resolved launch"):
        async with StdioTransport(server, TransportContext(workspace=tmp_path)):
            pass  # pragma: no cover


async def test_approved_project_server_keeps_its_venv(kxen_home, workspace):
    """The runtime starts an approved project server by the core's resolved command: no symlink resolving."""
    from kxen_core.config import load_config
    from kxen_core.launch.resolve import resolve_launch
    from kxen_core.runtime.workspace import Runtime

    kxen_home.write_settings(f"trusted_workspaces = [{json.dumps(str(workspace))}]\n")
    (workspace / ".kxen").mkdir()
    entry = {"command": sys.executable, "args": HELPER_ARGV}
    (workspace / ".kxen" / "mcp.json").write_text(json.dumps({"mcpServers": {"p": entry}}))
    config = load_config(None, workspace)
    assert not config.project_problems, config.project_problems
    server = config.servers["p"]
    assert server.scope == "project"
    fingerprint = resolve_launch(server, workspace).fingerprint
    async with Runtime(workspace=workspace, approve=[fingerprint]) as rt:
        with anyio.fail_after(15):
            await rt.wait_ready()
        assert rt.servers["p"].state == "ready", rt.status()
        pid = server_pid(rt, "p")
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    # exec'd by the venv's own (symlinked) path, so the interpreter finds its pyvenv.cfg
    assert argv0 == sys.executable


@pytest.mark.parametrize(
    "options, message",
    [
        ({"maxLineBytes": "big"}, "options.maxLineBytes: expected an integer, got str"),
        ({"maxLineBytes": 0}, "options.maxLineBytes: maxLineBytes must be an integer from 1024 to 1073741824"),
        ({"maxLineBytes": True}, "options.maxLineBytes: expected an integer, got a boolean"),
        ({"maxLineByte": 4096}, "options: unknown key(s): maxLineByte (did you mean 'maxLineBytes'?)"),
    ],
)
async def test_invalid_options_fail_closed(kxen_home, workspace, options, message):
    """Bad options are a config error at load, naming the file and key path: nothing starts."""
    from kxen_core.errors import ConfigError

    kxen_home.write_servers({"h": helper(options=options)})
    with pytest.raises(ConfigError) as info:
        async with Runtime(workspace=workspace):
            pass  # pragma: no cover
    (problem,) = info.value.problems
    assert problem.startswith(f"{kxen_home.path / 'mcp.json'}: mcpServers.h.{message}"), problem
    assert "big" not in problem  # a value of the wrong type is named by its type only
    assert owned_helpers() == []


async def test_nul_byte_in_an_argument_is_a_connect_error(kxen_home, workspace):
    async with running(kxen_home, workspace, servers={"h": helper("a\u0000b")}, allow=STDIO) as rt:
        st = rt.status()[0]
    assert (st["state"], st["phase"]) == ("failed", "transport")
    assert "cannot start" in st["error"]


@pytest.mark.parametrize(
    ("configured", "host", "expected"),
    [
        ({"PATH": "tools:/usr/bin"}, {"PATH": "/bin"}, "/usr/bin"),
        ({}, {"PATH": ".:/usr/bin::bin:/bin"}, "/usr/bin:/bin"),
        ({"PATH": "node_modules/.bin"}, {}, os.defpath),
        ({}, {"PATH": ""}, os.defpath),
        ({"PATH": "/opt/x:/usr/bin"}, {"PATH": "."}, "/opt/x:/usr/bin"),
    ],
)
def test_the_childs_path_never_names_the_workspace(configured, host, expected):
    """What the child runs next (npx -> node, a shell -> git) is not looked up under its cwd either."""
    from kxen_transport_stdio.transport import child_env

    env = child_env(configured, host)
    assert env["PATH"] == expected
    assert set(env) <= {"PATH", *host, *configured}


async def test_a_host_path_with_a_dot_reaches_the_child_without_it(kxen_home, workspace, monkeypatch):
    monkeypatch.setenv("PATH", f".:bin::{os.path.dirname(sys.executable)}:/usr/bin:/bin")
    async with running(kxen_home, workspace, servers={"h": helper()}, allow=STDIO) as rt:
        info = await _environ(rt)
    assert info["env"]["PATH"] == f"{os.path.dirname(sys.executable)}:/usr/bin:/bin"

"""Attacks by a cloned repository on what a stdio launch runs.

* a user's own server (``npx -y pkg``, ``python3 -m mod``, ``uv run``, ``node server.js``, ...)
  must not run what the workspace holds unless the user trusted the workspace and approved that
  launch's fingerprint (launcher rules, :mod:`kxen_core.launch.launchers`);
* commands are looked up on the host PATH, never in the workspace; ``python -m``/``-c`` with importable
  code in a workspace cwd is held (nothing is added to the launch or the environment);
* the fingerprint covers the command's target and the content of workspace files it runs, so an
  approval does not start changed code;
* a project ``cwd`` stays inside the workspace.

Every "command" here is a stdlib script written by the test into a bin directory outside the
workspace; when run, it records that it ran in a marker file (nothing of the host's runs).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import anyio
import pytest
from kxen_testing import Channel, running
from support import DEMO, settle, state, write_project

from kxen_core.cli import command as cli
from kxen_core.config import ServerConfig, load_config
from kxen_core.config.trust import trust
from kxen_core.errors import ConnectError
from kxen_core.launch import resolve as launch_mod
from kxen_core.launch.launchers import RULES
from kxen_core.launch.resolve import Launch, code_bearing, file_digest, resolve_launch, shown_env_value
from kxen_core.runtime.workspace import Runtime

pytestmark = pytest.mark.anyio

STDIO = ["stdio"]


def stub(bin_dir: Path, name: str, marker: Path) -> Path:
    """An executable stand-in for a launcher: records that it ran, then exits."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\nopen({str(marker)!r}, 'a').write('ran\\n')\n")
    path.chmod(0o755)
    return path


def user_entry(command: str, args: list[str], bin_dir: Path, **extra) -> dict:
    return {"command": command, "args": args, "env": {"PATH": f"{bin_dir}:/usr/bin:/bin"}, **extra}


# --- launcher rules: what each launcher would pick up from the workspace ------------------------

#: (launcher, args, workspace files to plant, the path the reason must name)
PLANTS = [
    ("npx", ["-y", "@modelcontextprotocol/server-everything"],
     ["node_modules/@modelcontextprotocol/server-everything/package.json"],
     "node_modules/@modelcontextprotocol/server-everything"),
    ("npx", ["-y", "some-server@1.2.3"], [".npmrc"], ".npmrc"),
    ("npx", ["some-server"], ["node_modules/.bin/some-server"], "node_modules/.bin"),
    ("npx", ["-y", "some-server"], ["package.json"], "package.json"),
    ("npm", ["exec", "--yes", "some-server"], ["node_modules/some-server/index.js"], "node_modules/some-server"),
    ("pnpm", ["dlx", "some-server"], [".npmrc"], ".npmrc"),
    ("bunx", ["some-server"], ["bunfig.toml"], "bunfig.toml"),
    ("bun", ["run", "server.ts"], ["server.ts"], "server.ts"),
    ("deno", ["run", "-A", "npm:some-server"], ["deno.json"], "deno.json"),
    ("python3", ["-m", "mcp_server_time"], ["mcp_server_time/__init__.py"], "mcp_server_time"),
    ("python3", ["-m", "mcp_server_time.cli", "--x"], ["mcp_server_time.py"], "mcp_server_time.py"),
    ("python3.12", ["-u", "-m", "evil_mod"], ["evil_mod.py"], "evil_mod.py"),
    ("python3", ["server.py"], ["server.py"], "server.py"),
    ("node", ["dist/index.js"], ["dist/index.js"], "dist/index.js"),
    ("bash", ["./start.sh"], ["start.sh"], "start.sh"),
    ("uvx", ["mcp-server-time"], ["uv.toml"], "uv.toml"),
    ("uv", ["run", "mcp-server-time"], ["pyproject.toml"], "pyproject.toml"),
    ("uv", ["run", "--with", "x", "server.py"], ["uv.lock"], "uv.lock"),
    ("uv", ["tool", "run", "mcp-server-time"], ["uv.toml"], "uv.toml"),
    ("poetry", ["run", "serve"], ["pyproject.toml"], "pyproject.toml"),
    ("make", ["serve"], ["Makefile"], "Makefile"),
    ("yarn", ["serve"], ["package.json"], "package.json"),
    ("pnpm", ["mcp"], [".pnpmfile.cjs"], ".pnpmfile.cjs"),
    ("python3", ["-X", "dev", "-m", "evil_mod"], ["evil_mod/__init__.py"], "evil_mod"),
    ("uvx", ["--from", "./tools/evil", "mcp-server-time"], ["tools/evil/pyproject.toml"], "tools/evil"),
    ("npx", ["-y", "./local-pkg"], ["local-pkg/package.json"], "local-pkg"),
    ("node", ["--import", "./hook.mjs", "/opt/server.js"], ["hook.mjs"], "hook.mjs"),
    ("node", ["--require=dotenv-hook", "/opt/server.js"], ["node_modules/dotenv-hook/index.js"], "node_modules"),
    ("bun", ["/opt/server.ts"], ["bunfig.toml"], "bunfig.toml"),
    ("pipx", ["run", "./tool"], ["tool/pyproject.toml"], "tool"),
    ("java", ["-jar", "server.jar"], ["server.jar"], "server.jar"),
    # python -m / -c put the cwd first on sys.path: any module or package it holds is imported first
    ("python3", ["-m", "mcp_server_time"], ["json.py"], "json.py"),
    ("python3", ["-c", "import requests"], ["requests/__init__.py"], "requests/__init__.py"),
    ("python3", ["-u", "-Wignore", "-c", "pass"], ["fast.cpython-312-x86_64-linux-gnu.so"],
     "fast.cpython-312-x86_64-linux-gnu.so"),
    ("python3", ["-X", "dev", "-"], ["helper.pyc"], "helper.pyc"),
]  # fmt: skip


@pytest.mark.parametrize(("launcher", "args", "plant", "named"), PLANTS, ids=[f"{p[0]}-{p[3]}" for p in PLANTS])
def test_a_launcher_that_would_pick_up_a_workspace_file_is_held(ws, tmp_path, launcher, args, plant, named):
    bin_dir = tmp_path / "bin"
    stub(bin_dir, launcher, tmp_path / "ran")
    server = ServerConfig(name="u", **user_entry(launcher, args, bin_dir))
    clean = resolve_launch(server, ws)
    assert clean.held is None, "an empty workspace holds nothing a launcher could pick up"
    for rel in plant:
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("planted by the repository\n")
    launch = resolve_launch(server, ws)
    assert launch.held and str(ws / named) in launch.held, launch.held
    assert launch.fingerprint != clean.fingerprint
    assert launch.command == str(bin_dir / launcher)  # the host's launcher, never a workspace one


@pytest.mark.parametrize("parent", [True, False])
def test_a_launcher_looks_up_from_a_sub_cwd_to_the_workspace_root(ws, tmp_path, parent):
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "npx", tmp_path / "ran")
    (ws / "sub").mkdir()
    (ws / ("node_modules" if parent else "sub/node_modules") / "pkg").mkdir(parents=True)
    launch = resolve_launch(ServerConfig(name="u", cwd="sub", **user_entry("npx", ["-y", "pkg"], bin_dir)), ws)
    assert launch.held and "node_modules" in launch.held


def test_uvx_ignores_a_pyproject_without_uv_settings(ws, tmp_path):
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "uvx", tmp_path / "ran")
    server = ServerConfig(name="u", **user_entry("uvx", ["mcp-server-time"], bin_dir))
    (ws / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert resolve_launch(server, ws).held is None
    (ws / "pyproject.toml").write_text(
        "[project]\nname = 'x'\n[tool.uv.sources]\nmcp-server-time = { path = 'evil' }\n"
    )
    assert "pyproject.toml" in (resolve_launch(server, ws).held or "")


def test_every_rule_has_a_name_commands_and_an_explanation():
    assert len({r.name for r in RULES}) == len(RULES)
    for rule in RULES:
        assert rule.name and rule.commands and rule.paths and rule.how


def test_a_command_inside_the_workspace_is_held_however_it_is_named(ws, tmp_path):
    marker = tmp_path / "ran"
    stub(ws / "node_modules" / ".bin", "srv", marker)
    stub(ws, "run.sh", marker)
    for command in ("./run.sh", f"../{ws.name}/run.sh", "node_modules/.bin/srv", str(ws / "run.sh")):
        launch = resolve_launch(ServerConfig(name="u", command=command), ws)
        assert launch.held and "is a file in the workspace" in launch.held, command


async def test_user_npx_server_with_a_planted_package_does_not_run_in_an_untrusted_workspace(kxen_home, ws, tmp_path):
    marker = tmp_path / "ran"
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "npx", marker)
    pkg = ws / "node_modules" / "@modelcontextprotocol" / "server-everything"
    pkg.mkdir(parents=True)
    (pkg / "package.json").write_text('{"bin": "evil.js"}')
    entry = user_entry("npx", ["-y", "@modelcontextprotocol/server-everything"], bin_dir)
    channel = Channel(approved=True)  # even a channel that says yes is not asked: trust comes first
    async with running(kxen_home, ws, channel, servers={"u": entry}, allow=STDIO) as rt:
        st = state(rt, "u")
    assert st["state"] == "awaiting_trust"
    assert str(pkg) in st["error"] and "kxen trust" in st["error"] and st["fingerprint"] in st["error"]
    assert not channel.requests
    assert not marker.exists(), "the launcher ran in an untrusted workspace"
    assert all(c.isprintable() for c in st["error"])


async def test_held_user_server_in_a_trusted_workspace_needs_its_fingerprint(kxen_home, ws, tmp_path):
    marker = tmp_path / "ran"
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "python3", marker)
    (ws / "mcp_server_time").mkdir()
    (ws / "mcp_server_time" / "__init__.py").write_text("print('repository code')\n")
    trust(kxen_home.path, ws)
    entry = user_entry("python3", ["-m", "mcp_server_time"], bin_dir)
    async with running(kxen_home, ws, servers={"u": entry}, allow=STDIO) as rt:
        st = state(rt, "u")
    assert st["state"] == "awaiting_approval"
    assert "python -m" in st["error"] and str(ws / "mcp_server_time") in st["error"]
    assert f"--approve {st['fingerprint']}" in st["error"]
    assert not marker.exists()
    # kxen mcp approvals shows exactly the fingerprint the runtime asked for
    rows = _approvals_json(kxen_home, ws)
    [row] = [r for r in rows["approvals"] if r["server"] == "u"]
    assert row["fingerprint"] == st["fingerprint"] and row["scope"] == "user"
    assert str(ws / "mcp_server_time") in row["held"]
    # approved by that fingerprint, it starts (the stub exits, so it fails after starting)
    async with running(kxen_home, ws, servers={"u": entry}, allow=STDIO, approve=[st["fingerprint"]]) as rt:
        assert state(rt, "u")["state"] == "failed"
    assert marker.exists()


def _approvals_json(kxen_home, ws) -> dict:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["--home", str(kxen_home.path), "--workspace", str(ws), "mcp", "approvals", "--json"]) == 0
    return json.loads(out.getvalue())


async def test_an_unplanted_workspace_starts_the_user_launcher_as_before(kxen_home, ws, tmp_path):
    marker = tmp_path / "ran"
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "npx", marker)
    async with running(kxen_home, ws, servers={"u": user_entry("npx", ["-y", "pkg"], bin_dir)}, allow=STDIO) as rt:
        st = state(rt, "u")
    assert st["state"] == "failed" and st["fingerprint"] is None  # it ran (a stub, not a server)
    assert marker.exists()


def _importing_entry(marker: Path, ws: Path, *flags: str) -> dict:
    """``python -c`` that imports ``evilmod`` (if it can), then runs the demo server."""
    (ws / "evilmod.py").write_text(f"open({str(marker)!r}, 'w').write('pwned')\n")
    code = (
        "import runpy, sys\n"
        "try:\n    import evilmod\nexcept ImportError:\n    pass\n"
        f"sys.argv = [{str(DEMO)!r}]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )
    return {"command": sys.executable, "args": [*flags, "-c", code], "defaultToolPolicy": "allow"}


async def test_python_does_not_import_from_the_workspace_unasked(kxen_home, ws, tmp_path):
    """``python -c`` puts the cwd (the workspace) first on sys.path: with a module there, even the
    user's own launch waits for trust and approval of exactly that launch; nothing is added to it."""
    marker = tmp_path / "imported"
    entry = _importing_entry(marker, ws)
    async with running(kxen_home, ws, servers={"u": entry}, allow=STDIO) as rt:
        st = state(rt, "u")
    assert st["state"] == "awaiting_trust", st
    assert "python -m/-c" in st["error"] and str(ws / "evilmod.py") in st["error"]
    assert not marker.exists(), "the child imported a module from the workspace"
    trust(kxen_home.path, ws)
    async with running(kxen_home, ws, servers={"u": entry}, allow=STDIO) as rt:
        st = state(rt, "u")
    assert st["state"] == "awaiting_approval" and st["fingerprint"], st
    assert not marker.exists()
    # approved, it runs as shown: the approved launch imports what the user saw it would
    launch = resolve_launch(ServerConfig(name="u", **entry), ws)
    assert launch.args == tuple(entry["args"]) and "PYTHONSAFEPATH" not in launch.env
    assert str(ws / "evilmod.py") in launch.display()["files"]
    async with running(kxen_home, ws, servers={"u": entry}, allow=STDIO, approve=[st["fingerprint"]]) as rt:
        assert state(rt, "u")["state"] == "ready", rt.status()
    assert marker.exists()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="-P needs Python 3.11")
async def test_python_with_safe_path_mode_is_not_held_and_does_not_import(kxen_home, ws, tmp_path):
    marker = tmp_path / "imported"
    entry = _importing_entry(marker, ws, "-P")
    async with running(kxen_home, ws, servers={"u": entry}, allow=STDIO) as rt:
        assert state(rt, "u")["state"] == "ready", rt.status()
    assert not marker.exists(), "the child imported a module from the workspace"


@pytest.mark.parametrize(
    ("args", "plant", "cwd"),
    [
        (["-P", "-m", "mcp_server_time"], "json.py", None),  # safe-path mode: the cwd is not on sys.path
        (["-I", "-c", "import json"], "json.py", None),  # isolated mode implies it
        (["-IPc", "import json"], "json.py", None),
        (["/opt/weather/server.py"], "json.py", None),  # a script: its own directory goes first
        (["-m", "mcp_server_time"], "my-notes.py", None),  # not a module name
        (["-m", "mcp_server_time"], "README.md", None),
        (["-m", "mcp_server_time"], "docs/index.md", None),  # a directory without __init__.py
        (["-m", "mcp_server_time"], "json.py", "outside"),  # the cwd is not the workspace's
    ],
)
def test_python_that_cannot_import_from_the_workspace_is_not_held(ws, tmp_path, args, plant, cwd):
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "python3", tmp_path / "ran")
    root = ws if cwd is None else tmp_path / cwd
    (root / plant).parent.mkdir(parents=True, exist_ok=True)
    (root / plant).write_text("x = 1\n")
    extra = {} if cwd is None else {"cwd": str(root)}
    assert resolve_launch(ServerConfig(name="u", **user_entry("python3", args, bin_dir, **extra)), ws).held is None


def test_a_crowded_cwd_is_held_as_a_whole(ws, tmp_path, monkeypatch):
    from kxen_core.launch import python_cli

    monkeypatch.setattr(python_cli, "MAX_CWD_ENTRIES", 4)
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "python3", tmp_path / "ran")
    for i in range(6):
        (ws / f"notes{i}.txt").write_text("")
    launch = resolve_launch(ServerConfig(name="u", **user_entry("python3", ["-c", "pass"], bin_dir)), ws)
    assert launch.held and f"holds {ws}" in launch.held


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-m", "x"], "-m"),
        (["-mx"], "-m"),
        (["-u", "-X", "dev", "-c", "pass"], "-c"),
        (["-Bc", "pass"], "-c"),
        (["-"], "-"),
        ([], "-"),
        (["--", "-"], "-"),
        (["--check-hash-based-pycs", "always", "-m", "x"], "-m"),
        (["-W", "error", "server.py", "-m", "x"], None),
        (["--", "server.py"], None),
        (["-P", "-m", "x"], None),
        (["-I", "-"], None),
        (["-sIc", "pass"], None),
        (["-Xfrozen_modules=off", "-P", "-c", "pass"], None),
    ],
)
def test_which_python_launches_put_the_cwd_on_the_import_path(args, expected):
    from kxen_core.launch.python_cli import cwd_import

    assert cwd_import(args) == expected


# --- the fingerprint covers what runs ---------------------------------------------------------


def _project_script(ws: Path, body: str) -> None:
    (ws / "server.py").write_text(body)
    write_project(ws, {"p": {"command": sys.executable, "args": ["server.py"]}})


async def test_an_approval_does_not_start_changed_code(kxen_home, ws, tmp_path):
    marker = tmp_path / "ran"
    _project_script(ws, "print('v1')\n")
    trust(kxen_home.path, ws)
    old = resolve_launch(load_config(None, ws).servers["p"], ws)
    assert old.files[str(ws / "server.py")].startswith("sha256:")
    (ws / "server.py").write_text(f"open({str(marker)!r}, 'w').write('v2 ran')\n")  # same size class, new code
    new = resolve_launch(load_config(None, ws).servers["p"], ws)
    assert new.fingerprint != old.fingerprint
    async with Runtime(workspace=ws, approve=[old.fingerprint]) as rt:
        await settle(rt)
        p = state(rt, "p")
    assert p["state"] == "awaiting_approval" and p["fingerprint"] == new.fingerprint
    assert not marker.exists(), "the old approval started the changed script"


def test_a_retargeted_symlink_changes_the_fingerprint(ws, tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("print('a')\n")
    b.write_text("print('a')\n")  # same content: only the target differs
    (ws / "server.py").symlink_to(a)
    server = ServerConfig(name="p", scope="project", command=sys.executable, args=["server.py"])
    before = resolve_launch(server, ws)
    (ws / "server.py").unlink()
    (ws / "server.py").symlink_to(b)
    assert resolve_launch(server, ws).fingerprint != before.fingerprint
    # and the command's own target is covered
    (tmp_path / "bin").mkdir()
    link = tmp_path / "bin" / "tool"
    link.symlink_to("/bin/true")
    first = resolve_launch(ServerConfig(name="u", command=str(link)), ws)
    assert first.target == os.path.realpath("/bin/true") and first.command == str(link)
    link.unlink()
    link.symlink_to("/bin/false")
    assert resolve_launch(ServerConfig(name="u", command=str(link)), ws).fingerprint != first.fingerprint


def test_a_changed_command_binary_changes_the_fingerprint(ws, tmp_path):
    cmd = stub(tmp_path / "bin", "tool", tmp_path / "ran")
    server = ServerConfig(name="u", command=str(cmd))
    before = resolve_launch(server, ws)
    cmd.write_text(cmd.read_text() + "# changed\n")
    assert resolve_launch(server, ws).fingerprint != before.fingerprint


def test_option_values_naming_workspace_files_are_digested(ws):
    (ws / "cfg.js").write_text("module.exports = 1\n")
    server = ServerConfig(name="p", scope="project", command=sys.executable, args=["--config=cfg.js"])
    before = resolve_launch(server, ws)
    assert str(ws / "cfg.js") in before.files
    (ws / "cfg.js").write_text("module.exports = 2\n")
    assert resolve_launch(server, ws).fingerprint != before.fingerprint


def test_a_large_file_is_fingerprinted_by_size_and_mtime(tmp_path, monkeypatch):
    monkeypatch.setattr(launch_mod, "MAX_DIGEST_BYTES", 16)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 64)
    st = big.stat()
    assert file_digest(str(big)) == f"size:64;mtime_ns:{st.st_mtime_ns};ctime_ns:{st.st_ctime_ns};ino:{st.st_ino}"
    small = tmp_path / "small"
    small.write_bytes(b"x" * 8)
    assert file_digest(str(small)).startswith("sha256:")
    assert file_digest(str(tmp_path / "missing")) == "unreadable"


def test_approvals_cli_and_runtime_share_the_fingerprint_over_files(kxen_home, ws):
    _project_script(ws, "print('v1')\n")
    trust(kxen_home.path, ws)  # an untrusted workspace's file gives only names
    fp = resolve_launch(load_config(None, ws).servers["p"], ws).fingerprint
    row = _approvals_json(kxen_home, ws)["approvals"][0]
    assert row["fingerprint"] == fp
    assert row["launch"]["files"][str(ws / "server.py")].startswith("sha256:")


# --- a project cwd stays inside the workspace -------------------------------------------------


@pytest.mark.parametrize(
    "cwd", ["~", "~/src", "/", "/etc", "../..", "..", "sub/../..", "sub/../../x", "a\\..\\..", "\0x"]
)
def test_a_project_cwd_outside_the_workspace_is_a_config_error(kxen_home, ws, cwd):
    pfile = write_project(ws, {"p": {"command": sys.executable, "args": ["-c", "pass"], "cwd": cwd}})
    trust(kxen_home.path, ws)
    config = load_config(None, ws)
    assert "p" not in config.servers
    [problem] = config.project_problems
    assert problem.startswith(f"{pfile}: mcpServers.p.cwd: ")
    assert "inside the workspace" in problem or "NUL" in problem


def test_a_project_cwd_symlink_that_leads_out_is_refused_at_launch(ws, tmp_path):
    (ws / "out").symlink_to(tmp_path)
    server = ServerConfig(name="p", scope="project", command=sys.executable, cwd="out")
    with pytest.raises(ConnectError, match="outside the workspace"):
        resolve_launch(server, ws)
    (ws / "sub").mkdir()
    assert resolve_launch(attrs_evolve(server, cwd="sub"), ws).cwd == str(ws / "sub")


def attrs_evolve(server: ServerConfig, **changes) -> ServerConfig:
    import attrs

    return attrs.evolve(server, **changes)


# --- what an approval shows -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [("GIT_CONFIG_KEY_0", "$(sh ./x.sh)"), ("API_TOKEN", "$(id)"), ("API_TOKEN", "`id`"), ("DB_PASSWORD", "a;b"),
     ("SESSION", "x|y"), ("AUTH", "a\nb"), ("SECRET", "{{x}}"), ("PRIVATE_KEY", "'q'"),
     ("DATABASE_URL", "postgres://u:p@h/$(id)")],
)  # fmt: skip
def test_a_code_bearing_value_is_never_shown_as_a_digest(key, value):
    assert code_bearing(value)
    clear = value.replace("\n", "\\x0a")  # in clear, with control characters escaped
    assert shown_env_value(key, value) == clear and clear.isprintable()
    launch = Launch(command="/bin/x", args=(), cwd="/", env={key: value})
    assert launch.display()["env"][key] == clear
    assert shown_env_value("API_TOKEN", "plain-secret-1") != "plain-secret-1"


def test_a_command_found_on_an_absolute_path_entry_is_the_users_choice(ws, tmp_path):
    """An activated venv of the workspace (an absolute PATH entry the user set) is not held; the
    same file named by a relative path is."""
    stub(ws / ".venv" / "bin", "srv", tmp_path / "ran")
    on_path = resolve_launch(ServerConfig(name="u", command="srv", env={"PATH": str(ws / ".venv" / "bin")}), ws)
    assert on_path.held is None and on_path.command == str(ws / ".venv" / "bin" / "srv")
    assert resolve_launch(ServerConfig(name="u", command=".venv/bin/srv"), ws).held


def test_a_user_config_that_is_itself_in_the_workspace_is_not_held(ws, tmp_path):
    """``--home`` inside the repository: its config already decides what runs, holding protects nothing."""
    (ws / "server.py").write_text("print('x')\n")
    inside_ws = ServerConfig(name="u", command=sys.executable, args=["server.py"], source=str(ws / "home" / "mcp.json"))
    outside = ServerConfig(name="u", command=sys.executable, args=["server.py"], source=str(tmp_path / "mcp.json"))
    assert resolve_launch(inside_ws, ws).held is None
    assert "server.py" in (resolve_launch(outside, ws).held or "")
    # the fingerprint still covers the script either way
    assert str(ws / "server.py") in resolve_launch(inside_ws, ws).files


def test_padding_the_args_does_not_hide_the_real_script(ws, monkeypatch):
    """Past the count of content digests, a file still counts by size, mtime, ctime and inode."""
    monkeypatch.setattr(launch_mod, "MAX_DIGEST_FILES", 2)
    for name in ("pad1", "pad2", "pad3", "real.py"):
        (ws / name).write_text("print('v1')\n")
    server = ServerConfig(name="p", scope="project", command=sys.executable, args=["pad1", "pad2", "pad3", "real.py"])
    before = resolve_launch(server, ws)
    assert set(before.files) >= {str(ws / n) for n in ("pad1", "pad2", "pad3", "real.py")}
    real = ws / "real.py"
    st = real.stat()
    real.write_text("print('v2')\n")  # same size, mtime put back: ctime still moves
    os.utime(real, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert resolve_launch(server, ws).fingerprint != before.fingerprint


def test_a_users_own_secret_is_a_digest_whatever_its_characters(ws, tmp_path):
    """A held user launch goes to an approval too: the user's secret stays a digest even with $ or !."""
    (ws / "server.py").write_text("print('x')\n")
    secret = "pa$$w0rd!-SECRET"
    server = ServerConfig(name="u", command=sys.executable, args=["server.py"], env={"DB_PASSWORD": secret})
    launch = resolve_launch(server, ws)
    assert launch.held
    shown = json.dumps(launch.display())
    assert secret not in shown and launch.display()["env"]["DB_PASSWORD"].startswith("sha256:")


async def test_trust_changes_apply_to_held_user_launches_on_reload(kxen_home, ws, tmp_path):
    from kxen_core.config.trust import untrust

    marker = tmp_path / "ran"
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "npx", marker)
    (ws / "node_modules" / "pkg").mkdir(parents=True)
    entry = user_entry("npx", ["-y", "pkg"], bin_dir)
    fp = resolve_launch(ServerConfig(name="u", **entry), ws).fingerprint
    async with running(kxen_home, ws, servers={"u": entry}, allow=STDIO, approve=[fp]) as rt:
        assert state(rt, "u")["state"] == "awaiting_trust" and not marker.exists()
        trust(kxen_home.path, ws)
        await rt.reload()
        with anyio.fail_after(30):
            await rt.wait_ready()
        assert marker.exists()  # trusted and approved: it ran (a stub, so it failed after)
        untrust(kxen_home.path, ws)
        await rt.reload()
        with anyio.fail_after(30):
            await rt.wait_ready()
        assert state(rt, "u")["state"] == "awaiting_trust"


@pytest.mark.parametrize("key", ["PATH", "path", "NODE_PATTERN", "DISPATCH_MODE"])
def test_what_runs_is_never_hidden_as_a_secret(key):
    """PATH decides what a launcher finds: an approval shows it in clear ("pat" is a word, not a fragment)."""
    from kxen_core.config.secrets import sensitive_key

    assert not sensitive_key(key)
    launch = Launch(command="/bin/x", args=(), cwd="/", env={key: "/opt/bin:/usr/bin"}, scope="user")
    assert launch.display()["env"][key] == "/opt/bin:/usr/bin"
    for secret in ("GITHUB_PAT", "PAT", "GITLAB_PAT_RO", "MYPAT", "pat_token"):
        assert sensitive_key(secret), secret


def test_repository_file_names_reach_an_approval_without_control_characters(ws):
    name = "evil\x1b[2K\rname\x07.py"
    (ws / name).write_text("print('x')\n")
    server = ServerConfig(name="p", scope="project", command=sys.executable, args=[name, "a\nb"])
    launch = resolve_launch(server, ws)
    assert str(ws / name) in launch.files  # the fingerprint is over the real name
    shown = launch.display()
    text = json.dumps(shown, ensure_ascii=False)
    assert all(c.isprintable() for c in text), text
    assert shown["args"][0] == "evil\\x1b[2K\\x0dname\\x07.py"
    user = resolve_launch(ServerConfig(name="u", command=sys.executable, args=[name]), ws)
    assert user.held and user.held.isprintable()


def test_an_unchanged_files_digest_is_remembered_and_a_rewrite_is_seen(tmp_path, monkeypatch):
    """A settled file is hashed once; a rewrite (same size, even with its mtime set back) changes
    its ctime and is hashed again; a file changed just now is not remembered at all."""
    from kxen_core.launch import resolve as launch_mod

    monkeypatch.setattr(launch_mod, "_DIGESTS", {})
    reads: list[int] = []
    real_read = os.read

    def counting_read(fd: int, n: int) -> bytes:
        reads.append(fd)
        return real_read(fd, n)

    monkeypatch.setattr(launch_mod.os, "read", counting_read)
    monkeypatch.setattr(launch_mod, "SETTLED_SECONDS", 0.05)
    target = tmp_path / "server.bin"
    target.write_bytes(b"a" * 1000)
    fresh = file_digest(str(target))
    assert fresh.startswith("sha256:") and launch_mod._DIGESTS == {}  # changed just now: not kept
    time.sleep(0.1)  # settled (and any rewrite from now on gets a later ctime)
    first = file_digest(str(target))
    assert first == fresh and len(launch_mod._DIGESTS) == 1
    reads.clear()
    assert file_digest(str(target)) == first and reads == []  # remembered: not read again
    st = target.stat()
    target.write_bytes(b"b" * 1000)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime set back: ctime still moves
    second = file_digest(str(target))
    assert second != first and reads  # hashed again
    monkeypatch.setattr(launch_mod, "MAX_REMEMBERED_DIGESTS", 3)
    others = [tmp_path / f"other{i}" for i in range(5)]
    for i, other in enumerate(others):
        other.write_bytes(bytes([i]))
    time.sleep(0.1)
    for other in others:
        file_digest(str(other))
    assert len(launch_mod._DIGESTS) == 3  # bounded

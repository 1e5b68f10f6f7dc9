"""Hostile config files: kxen reads only regular files, without blocking, with a hard byte bound.

An untrusted repository controls ``<workspace>/.kxen/mcp.json``, and it is read even before the
workspace is trusted (status, ``config check`` and ``mcp approvals`` show what trusting would run).
So it may be a symlink to ``/dev/zero`` (``st_size`` 0, endless data), a FIFO (an ``open`` that never
returns), a directory, huge, or not text: every one is a clear problem naming the file, never a
hang, a crash or unbounded memory. The same holds for the user's own files and ``kxen trust``.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import demo_entry, write_project

from kxen_core.cli import command as cli
from kxen_core.config import load_config, loader
from kxen_core.config.loader import MAX_CONFIG_BYTES, UnreadableFile, read_limited
from kxen_core.errors import ConfigError

#: generous: proves "does not hang", not speed
NO_HANG = 60.0

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
needs_dev_zero = pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a daemon thread; fail (instead of hanging the suite) if it does not return."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the test
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"did not return within {seconds} s (a FIFO or a device was read?)"
    if "error" in box:
        raise box["error"]
    return box["value"]


def project_path(ws: Path) -> Path:
    (ws / ".kxen").mkdir(exist_ok=True)
    return ws / ".kxen" / "mcp.json"


def hostile(kind: str, path: Path, tmp_path: Path) -> None:
    """Make ``path`` one of the file kinds an attacker can plant."""
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "dev-null":
        path.symlink_to("/dev/null")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink-to-fifo":
        fifo = tmp_path / "elsewhere.fifo"
        os.mkfifo(fifo)
        path.symlink_to(fifo)
    elif kind == "directory":
        path.mkdir()
    elif kind == "too-large":
        with open(path, "wb") as f:
            f.write(b'{"mcpServers": {}}' + b" " * MAX_CONFIG_BYTES)
    elif kind == "sparse-huge":
        with open(path, "wb") as f:
            f.truncate(8 * MAX_CONFIG_BYTES)  # st_size says huge, reading gives NULs
    elif kind == "symlink-loop":
        path.symlink_to(path)
    else:  # pragma: no cover
        raise AssertionError(kind)


KINDS = [
    pytest.param("dev-zero", marks=needs_dev_zero),
    pytest.param("dev-null", marks=needs_dev_zero),
    pytest.param("fifo", marks=needs_fifo),
    pytest.param("symlink-to-fifo", marks=needs_fifo),
    "directory",
    "too-large",
    "sparse-huge",
    "symlink-loop",
]


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_project_file_is_a_problem_naming_it_not_a_hang(kxen_home, ws, tmp_path, kind):
    kxen_home.write_servers({"u": demo_entry()})
    pfile = project_path(ws)
    hostile(kind, pfile, tmp_path)
    config = within(NO_HANG, lambda: load_config(None, ws))
    assert "u" in config.servers  # the user's servers still load
    assert config.project_problems, kind
    (problem,) = config.project_problems
    assert problem.startswith(f"{pfile}: (file): "), problem
    rule = problem.split(": (file): ", 1)[1]
    if kind in ("too-large", "sparse-huge"):
        assert rule == f"larger than {MAX_CONFIG_BYTES} bytes"
    elif kind != "symlink-loop":
        assert rule.startswith("cannot be read: must be a regular file"), rule
    else:
        assert rule.startswith("cannot be read: "), rule


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["mcp.json", "config.toml"])
def test_a_hostile_user_file_fails_closed_naming_it(kxen_home, ws, tmp_path, kind, name):
    path = kxen_home.path / name
    hostile(kind, path, tmp_path)
    with pytest.raises(ConfigError) as info:
        within(NO_HANG, lambda: load_config(None, ws))
    assert any(p.startswith(f"{path}: (file): ") for p in info.value.problems), info.value.problems


@needs_fifo
def test_kxen_mcp_status_with_a_fifo_project_file_returns(kxen_home, ws):
    """The reported attack, end to end: a FIFO at .kxen/mcp.json hung ``kxen mcp status``."""
    os.mkfifo(project_path(ws))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KXEN_")}
    env.update(KXEN_HOME=str(kxen_home.path), KXEN_LOAD_PLUGINS="memory")
    proc = subprocess.run(
        [sys.executable, "-m", "kxen_core.cli", "--workspace", str(ws), "mcp", "status", "--json", "--wait", "5"],
        capture_output=True, text=True, timeout=NO_HANG * 2, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    [problem] = out["problems"]  # {file, path, rule}
    assert problem["file"] == str(project_path(ws)) and "must be a regular file (it is a FIFO)" in problem["rule"]


@needs_dev_zero
def test_the_reader_never_reads_more_than_the_bound(tmp_path, monkeypatch):
    """/dev/zero is refused before it is opened; a file that is replaced by a device after the
    check is still refused on the open descriptor; a large regular file costs at most limit+1 bytes."""
    read = []
    real_read = os.read

    def counting_read(fd: int, n: int) -> bytes:
        chunk = real_read(fd, n)
        read.append(len(chunk))
        return chunk

    monkeypatch.setattr(loader.os, "read", counting_read)
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * (10 * 1024 * 1024))
    with pytest.raises(UnreadableFile, match="larger than 1000 bytes"):
        read_limited(big, 1000)
    assert sum(read) <= 1001

    # a race: the check sees a regular file, the open gets a device -- fstat on the descriptor wins
    real_stat = os.stat
    regular = real_stat(big)
    monkeypatch.setattr(
        loader.os, "stat", lambda p, *a, **k: regular if str(p) == "/dev/zero" else real_stat(p, *a, **k)
    )
    read.clear()
    with pytest.raises(UnreadableFile, match="it is a device"):
        read_limited("/dev/zero", 1000)
    assert read == []


@needs_fifo
def test_a_fifo_swapped_in_after_the_check_does_not_block_the_open(tmp_path, monkeypatch):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    regular = os.stat(__file__)
    real_stat = os.stat
    monkeypatch.setattr(loader.os, "stat", lambda p, *a, **k: regular if str(p) == str(fifo) else real_stat(p, *a, **k))
    with pytest.raises(UnreadableFile, match="it is a FIFO"):
        within(NO_HANG, lambda: read_limited(fifo))


@pytest.mark.parametrize("kind", KINDS)
def test_kxen_trust_with_a_hostile_settings_file_refuses_without_hanging(kxen_home, ws, tmp_path, capsys, kind):
    path = kxen_home.path / "config.toml"
    hostile(kind, path, tmp_path)
    code = within(NO_HANG, lambda: cli.main(["trust", str(ws)]))
    assert code == 2
    err = capsys.readouterr().err
    assert f"{path}: (file): cannot be updated: " in err
    assert (
        stat.S_ISLNK(os.lstat(path).st_mode)
        or not stat.S_ISREG(os.lstat(path).st_mode)
        or kind in ("too-large", "sparse-huge")
    ), "the hostile settings file was replaced"


@pytest.mark.parametrize(
    "data, rule",
    [
        (b"\xef\xbb\xbf" + b'{"mcpServers": {}}', "must be UTF-8 without a byte order mark"),
        ('{"mcpServers": {}}'.encode("utf-16"), "not UTF-8 text"),
        (b'{"mcpServers": {"a": {"command": "\xc3"}}}', "not UTF-8 text (invalid byte at offset 34)"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (
            b'{"mcpServers": {"a": {"command": "x", "timeouts": {"requestSeconds": ' + b"9" * 5000 + b"}}}}",
            "not valid JSON",
        ),
    ],
)
def test_odd_encodings_and_nesting_are_problems_naming_the_file(kxen_home, ws, data, rule):
    pfile = project_path(ws)
    pfile.write_bytes(data)
    config = within(NO_HANG, lambda: load_config(None, ws))
    (problem,) = config.project_problems
    assert problem.startswith(f"{pfile}: (file): not valid JSON"), problem
    assert rule in problem, problem


def test_deeply_nested_toml_settings_are_a_problem(kxen_home, ws):
    path = kxen_home.write_settings("x = " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(ConfigError) as info:
        within(NO_HANG, lambda: load_config(None, ws))
    assert info.value.problems == [f"{path}: (file): not valid TOML: nested too deeply"]


def test_a_nul_byte_in_the_home_path_is_a_problem(ws):
    with pytest.raises(ConfigError) as info:
        load_config(Path("bad\0home"), ws)
    assert "cannot be read" in str(info.value)


def test_an_untrusted_project_file_is_read_with_the_same_bounds_and_starts_nothing(kxen_home, ws, tmp_path):
    plog = tmp_path / "p.log"
    write_project(ws, {"p": demo_entry(plog)})
    config = load_config(None, ws)
    assert not config.trusted and "p" in config.servers  # listed, so status can say awaiting_trust
    assert not plog.exists()

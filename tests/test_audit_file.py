"""The audit trail's files and ``kxen mcp audit``: 0600 in a 0700 directory, rotation within its
bounds, two processes appending at once lose nothing, an unwritable or unsafe directory is a
warning once and never a failed call, the ``[audit]`` settings' rules, and the command through the
CLI after a real ``kxen mcp call demo add`` (kxen_core.policy.audit_file, kxen_core.cli.audit)."""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from kxen_testing import running
from support import demo_entry

from kxen_core.errors import ConfigError
from kxen_core.policy import audit_file, audit_read

DOCS = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()


def data_dir() -> Path:
    return Path(os.environ["KXEN_DATA_DIR"])


def record(n: int, **extra: object) -> dict[str, object]:
    return {"v": 1, "event": "decided", "id": f"t-{n}", "time": 1.0e9 + n, "server": "s", "tool": "t", **extra}


def flushed() -> None:
    assert audit_file.flush(10.0)


# --- the files ---------------------------------------------------------------------------------


def test_a_new_file_is_0600_in_a_0700_directory_and_an_open_one_is_set_back(tmp_path):
    directory = tmp_path / "made" / "data"
    sink = audit_file.sink(directory, 65536, 5)
    audit_file.submit(sink, record(1))
    flushed()
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(sink.path.stat().st_mode) == 0o600
    sink.path.chmod(0o644)
    audit_file.submit(sink, record(2))
    flushed()
    assert stat.S_IMODE(sink.path.stat().st_mode) == 0o600
    assert [json.loads(line)["id"] for line in audit_read.lines(directory)] == ["t-1", "t-2"]


def test_rotation_keeps_at_most_max_files_each_near_the_bound(tmp_path):
    sink = audit_file.sink(tmp_path, 65536, 3)
    for n in range(3000):  # ~150 bytes each: several rotations
        audit_file.submit(sink, record(n, args={"path": "str:10"}))
    flushed()
    names = sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock"))
    assert names in (["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"], ["audit.jsonl.1", "audit.jsonl.2"])
    for path in audit_read.files(tmp_path):
        assert path.stat().st_size < 65536 + audit_file.MAX_LINE_BYTES  # the bound and at most one line
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    ids = [int(json.loads(line)["id"][2:]) for line in audit_read.lines(tmp_path)]
    assert ids == sorted(ids) and ids[-1] == 2999  # the newest kept, oldest first, in order


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from kxen_core.policy import audit_file
    sink = audit_file.sink(Path(sys.argv[1]), 65536, 100)
    for n in range(int(sys.argv[3])):
        record = {"v": 1, "event": "decided", "id": f"{sys.argv[2]}-{n}", "time": 1.0e9, "pad": "x" * 100}
        audit_file.submit(sink, record)
    assert audit_file.flush(60.0)
    """
)


def test_two_processes_appending_and_rotating_at_once_lose_nothing(tmp_path):
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), name, "3000"], stderr=subprocess.PIPE)
        for name in ("a", "b")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    assert len(audit_read.files(tmp_path)) > 2  # they rotated
    ids = [json.loads(line)["id"] for line in audit_read.lines(tmp_path)]  # every line whole
    assert sorted(ids) == sorted(f"{name}-{n}" for name in ("a", "b") for n in range(3000))


def test_a_record_too_large_for_a_line_is_cut_and_stays_json(tmp_path):
    sink = audit_file.sink(tmp_path, 65536, 5)
    audit_file.submit(sink, record(1, args={f"k{i}": "str:1" for i in range(2000)}))
    audit_file.submit(sink, record(2, by=[{"reason": "r" * 20_000}]))
    flushed()
    first, second = (json.loads(line) for line in audit_read.lines(tmp_path))
    assert (first["args"], first["argsCut"]) == ("cut", True)
    assert second["cut"] is True and second["id"] == "t-2" and "by" not in second


@pytest.mark.anyio
async def test_an_unwritable_data_directory_is_a_warning_once_never_a_failed_call(kxen_home, ws, monkeypatch, caplog):
    blocker = ws.parent / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("KXEN_DATA_DIR", str(blocker / "data"))  # under a file: cannot be made
    # pinning off: the pin store shares the data directory and fails closed there (its own tests)
    servers = {"demo": {**demo_entry(), "toolPolicies": {"add": "allow"}, "pinning": "off"}}
    with caplog.at_level(logging.WARNING, logger="kxen.audit"):
        async with running(kxen_home, ws, servers=servers, allow=("stdio",), audit=True) as rt:
            for _ in range(3):
                assert (await rt.call_tool("demo__add", {"a": 1, "b": 2}))["structuredContent"] == {"sum": 3}
                await anyio.to_thread.run_sync(audit_file.flush, 5.0)
    said = [r.getMessage() for r in caplog.records if r.name == "kxen.audit"]
    assert len(said) == 1 and "cannot write" in said[0] and "calls go on without it" in said[0], said


@pytest.mark.anyio
async def test_a_directory_others_can_write_is_not_written_to(kxen_home, ws, tmp_path, monkeypatch, caplog):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    monkeypatch.setenv("KXEN_DATA_DIR", str(shared))
    # pinning off: the pin store shares the data directory and fails closed there (its own tests)
    servers = {"demo": {**demo_entry(), "toolPolicies": {"add": "allow"}, "pinning": "off"}}
    with caplog.at_level(logging.WARNING, logger="kxen.audit"):
        async with running(kxen_home, ws, servers=servers, allow=("stdio",), audit=True) as rt:
            await rt.call_tool("demo__add", {"a": 1, "b": 2})
    assert audit_read.files(shared) == []
    assert any("can be written by others" in r.getMessage() for r in caplog.records), caplog.records


# --- [audit] in config.toml --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, where",
    [
        ("[audit]\nmax_files = 1\n", "audit.max_files"),
        ("[audit]\nmax_file_bytes = 100\n", "audit.max_file_bytes"),
        ("[audit]\nenabled = 'yes'\n", "audit.enabled"),
        ("[audit]\nenable = true\n", "audit"),
    ],
)
def test_bad_audit_settings_name_the_file_key_and_rule(kxen_home, ws, text, where):
    from kxen_core import Runtime

    kxen_home.write_settings(text)
    with pytest.raises(ConfigError) as caught:
        Runtime(home=kxen_home.path, workspace=ws).load()
    (problem,) = caught.value.problems
    assert "config.toml" in problem and where in problem, problem
    assert re.search(r"between|true or false|unknown key", problem), problem


# --- kxen mcp audit ----------------------------------------------------------------------------


@pytest.fixture
def demo_cli(kx, kxen_home, monkeypatch):
    """``kx`` with the stdio transport and the demo server, ``add`` allowed."""
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    monkeypatch.setenv("COLUMNS", "400")  # the table unfolded, whatever another test left
    kxen_home.write_servers({"demo": {**demo_entry(), "toolPolicies": {"add": "allow", "fail": "allow"}}})
    return kx


def lines_of(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_a_call_through_the_cli_is_in_kxen_mcp_audit(demo_cli):
    code, out, err = demo_cli("mcp", "call", "demo", "add", "--args", '{"a": 1, "b": 2}', "--wait", "30")
    assert code == 0, err
    code, _, err = demo_cli("mcp", "call", "demo", "fail", "--wait", "30")
    assert code == 1
    code, out, err = demo_cli("mcp", "audit", "--json")
    assert code == 0 and err == ""
    add, fail = lines_of(out)
    assert (add["server"], add["tool"], add["verdict"], add["args"]) == (
        "demo",
        "add",
        "allow",
        {"a": "int", "b": "int"},
    )
    assert add["result"] == {"chars": len("text") + len('{"sum": 3}'), "items": 1} and fail["error"] == {
        "isError": True
    }
    row = " ".join(line for line in DOCS.splitlines() if line.startswith("| `kxen mcp audit"))
    nested = [k for e in (add, fail) for f in ("by", "approval", "result", "error", "identity") for k in _keys(e, f)]
    missing = sorted({k for k in [*add, *fail, *nested] if f'"{k}"' not in row and f"`{k}`" not in row})
    assert not missing, f"docs/cli.md's kxen mcp audit row does not name: {missing}"
    code, out, _ = demo_cli("mcp", "audit")
    assert code == 0 and "demo" in out and "allow" in out and "a:int b:int" in out and "isError" in out
    code, out, _ = demo_cli("mcp", "audit", "--json", "--tool", "fail")
    assert [e["tool"] for e in lines_of(out)] == ["fail"]
    code, out, _ = demo_cli("mcp", "audit", "--json", "--limit", "1")
    assert [e["tool"] for e in lines_of(out)] == ["fail"]  # newest last
    code, out, _ = demo_cli("mcp", "audit", "--server", "other")
    assert code == 0 and "no recorded calls" in out and "for these filters" in out
    code, out, _ = demo_cli("mcp", "audit", "--json", "--since", "1h")
    assert len(lines_of(out)) == 2
    code, out, _ = demo_cli("mcp", "audit", "--json", "--since", "2999-01-01T00:00Z")
    assert code == 0 and out == ""


def _keys(entry: dict[str, object], field: str) -> list[str]:
    value = entry.get(field)
    items = value if isinstance(value, list) else [value]
    return [k for item in items if isinstance(item, dict) for k in item]


@pytest.mark.parametrize("since", ["yesterday", "15", "3x", "2026-13-01", ""])
def test_a_bad_since_is_a_usage_error_naming_the_option(kx, capsys, since):
    with pytest.raises(SystemExit) as info:
        kx("mcp", "audit", "--since", since)
    out, err = capsys.readouterr()
    assert info.value.code == 2 and out == "" and "argument --since: not a duration or a time" in err, err


def test_a_corrupt_line_is_skipped_and_counted_once(kx):
    data_dir().mkdir(parents=True, exist_ok=True, mode=0o700)
    good = json.dumps({**record(1), "time": "2026-05-01T10:00:00.000Z", "verdict": "allow"})
    (data_dir() / "audit.jsonl.1").write_text(good + "\n{not json\n")
    (data_dir() / "audit.jsonl").write_text('["a list"]\n\x00\x01 garbage\n' + good.replace("t-1", "t-2") + "\n")
    code, out, err = kx("mcp", "audit", "--json")
    assert code == 0 and [e["id"] for e in lines_of(out)] == ["t-1", "t-2"]
    assert err.count("skipped 3 line(s)") == 1, err


def test_config_set_turns_the_commands_trail_off(demo_cli, kxen_home):
    code, _, err = demo_cli("config", "set", "audit.enabled", "false")
    assert code == 0, err
    code, _, err = demo_cli("mcp", "call", "demo", "add", "--args", '{"a": 1, "b": 2}', "--wait", "30")
    assert code == 0, err
    assert audit_read.files(data_dir()) == []
    assert "enabled = false" in (kxen_home.path / "config.toml").read_text()

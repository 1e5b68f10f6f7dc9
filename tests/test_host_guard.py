"""kxen_core.host_guard: every plugin's guard around a host's work, isolated from each other, and
the seam that keeps process code out of the core."""

from __future__ import annotations

import ast
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from kxen_core import hookimpl, host_guard
from kxen_core.plugins.manager import make_plugin_manager

pytestmark = pytest.mark.anyio

CORE = Path(__file__).resolve().parents[1] / "kxen_core"


def _pm(*plugins: object):
    pm = make_plugin_manager(load_entrypoints=False)
    for i, plugin in enumerate(plugins):
        pm.register(plugin, name=f"guard{i}")
    return pm


class Recorder:
    def __init__(
        self,
        log: list[str],
        label: str,
        *,
        fail_enter: BaseException | None = None,
        fail_exit: BaseException | None = None,
    ) -> None:
        self.log, self.label, self.fail_enter, self.fail_exit = log, label, fail_enter, fail_exit

    @hookimpl
    def kxen_host_guard(self, home, subreaper):
        @asynccontextmanager
        async def guard():
            self.log.append(f"enter {self.label} {Path(home).name} {subreaper}")
            if self.fail_enter is not None:
                raise self.fail_enter
            try:
                yield
            finally:
                self.log.append(f"exit {self.label}")
                if self.fail_exit is not None:
                    raise self.fail_exit

        return guard()


async def test_guards_enter_in_order_and_leave_in_reverse(tmp_path):
    log: list[str] = []
    pm = _pm(Recorder(log, "a"), Recorder(log, "b"))
    async with host_guard(pm, tmp_path / "home", subreaper=True) as problems:
        log.append("work")
    assert problems == []
    # pluggy asks the last registered first
    assert log == ["enter b home True", "enter a home True", "work", "exit a", "exit b"]


async def test_a_guard_failing_on_entry_is_skipped_and_reported_not_raised(tmp_path):
    log: list[str] = []
    pm = _pm(Recorder(log, "good"), Recorder(log, "bad", fail_enter=SystemExit(3)))
    async with host_guard(pm, tmp_path) as problems:
        log.append("work")
    assert "work" in log and "exit good" in log and "exit bad" not in log
    assert len(problems) == 1 and "guard1" in problems[0] and "entering" in problems[0] and "SystemExit" in problems[0]


async def test_a_guard_failing_on_exit_is_reported_and_the_others_still_leave(tmp_path):
    log: list[str] = []
    pm = _pm(Recorder(log, "first", fail_exit=RuntimeError("boom\x1b[2J")), Recorder(log, "second"))
    async with host_guard(pm, tmp_path) as problems:
        pass
    assert log[-2:] == ["exit first", "exit second"]
    assert len(problems) == 1 and "leaving" in problems[0] and "boom" in problems[0]
    assert "\x1b" not in problems[0]  # the text is printable


async def test_guards_are_left_when_the_host_is_cancelled(tmp_path):
    log: list[str] = []
    pm = _pm(Recorder(log, "a"))
    with anyio.move_on_after(0.05):
        async with host_guard(pm, tmp_path):
            await anyio.sleep(30)
    assert log == [f"enter a {tmp_path.name} False", "exit a"]


async def test_the_stdio_transport_provides_the_process_guard(tmp_path):
    pm = make_plugin_manager()
    plugins = [impl.plugin_name for impl in pm.hook.kxen_host_guard.get_hookimpls()]
    assert "stdio" in plugins
    async with host_guard(pm, tmp_path, subreaper=False) as problems:
        assert (tmp_path / "run").is_dir()  # the ledger's directory: this process records its servers
        assert len(list((tmp_path / "run").glob("*.json"))) == 0  # nothing started yet, nothing written
    assert problems == []


PROCESS_NAMES = {"subprocess", "signal", "socket", "httpx", "httpcore", "ctypes", "multiprocessing"}
PROCESS_CALLS = {"kill", "killpg", "fork", "setsid", "prctl", "waitpid", "spawn", "execv", "execve"}


def test_the_core_holds_no_process_or_network_code():
    """DESIGN: no network or process code lives in kxen_core. Signals are only *received* by the CLI."""
    found = []
    for path in sorted(CORE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [(node.module or "").split(".")[0]]
            elif isinstance(node, ast.Attribute) and node.attr in PROCESS_CALLS:
                names = [node.attr]
            else:
                continue
            for name in names:
                if name in PROCESS_NAMES | PROCESS_CALLS and not (
                    path.relative_to(CORE).as_posix() == "cli/mcp.py" and name == "signal"
                ):
                    found.append(f"{path.relative_to(CORE)}:{node.lineno}: {name}")
    assert found == []

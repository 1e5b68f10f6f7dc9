"""kxen benchmark: the host's public path (a ``Runtime``) against a raw floor, interleaved in one process.

    uv run python bench/run.py [--quick] [--workloads W1,W2] [--reps N] [--sides raw,kxen] [--json out.json]

``search`` (not in the default list) measures tool search instead of a side against the floor:
recall and latency at 10,000 tools (bench/tool_search.py), informational rows.

Sides (bench/sides.py): ``raw`` the floor, ``kxen`` a Runtime (what the targets judge), ``session``
kxen's Session without the Runtime and ``sdk`` the official SDK's client (both informational);
W9 also ``kxen_bearer``, a Runtime sending a static header, which W9's OAuth side is judged against.
Each workload runs one untimed warm-up per side, then ``reps`` repetitions rotating the order of
the sides. The table shows medians and the kxen/raw ratio against its target.
See docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import attrs
from sides import CHOSEN_TRANSPORTS, SIDES, maker, sides_for, usable
from workloads import WORKLOADS, Sizes, Workload, import_times

IMPORT_LIMIT_MS = 150.0
IMPORT_LIMIT_30_MS = 100.0  # issue 30's target, judged on the same cached measurement
IMPORT_REPS, IMPORT_QUICK_REPS = 15, 5


@attrs.frozen(kw_only=True)
class Row:
    """One line of the table: a metric of a workload, and how its kxen ratio is judged."""

    workload: str
    label: str
    metric: str
    unit: str
    target: float | None  # None: informational
    higher_is_better: bool = False
    versus: str = "raw"  # the side the target's ratio is taken against

    def target_text(self) -> str:
        if self.target is None:
            return "(info)"
        who = "" if self.versus == "raw" else f" {self.versus}"
        return f"≥ {self.target:g}×{who}" if self.higher_is_better else f"≤ {self.target:g}×{who}"

    def met(self, ratio: float) -> bool | None:
        if self.target is None:
            return None
        return ratio >= self.target if self.higher_is_better else ratio <= self.target


ROWS = (
    Row(workload="W1", label="W1 cold start (spawn, initialize, tools/list)", metric="ms", unit="ms", target=1.05),
    Row(workload="W1", label="  client CPU per start", metric="cpu_ms", unit="ms", target=1.0, versus="sdk"),
    Row(workload="W1", label="  close (not timed in W1)", metric="close_ms", unit="ms", target=None),
    Row(workload="W2", label="W2 2,000 sequential calls", metric="us_per_call", unit="µs/call", target=1.15),
    Row(workload="W2", label="  client CPU", metric="cpu_us_per_call", unit="µs/call", target=None),
    Row(
        workload="W3",
        label="W3 2,000 calls, 64 in flight",
        metric="calls_per_s",
        unit="calls/s",
        target=0.6,
        higher_is_better=True,
    ),
    Row(workload="W3", label="  client CPU", metric="cpu_us_per_call", unit="µs/call", target=None),
    Row(workload="W4", label="W4 10,000 tools / 100 pages, time", metric="ms", unit="ms", target=1.5),
    Row(workload="W4", label="  client CPU", metric="cpu_ms", unit="ms", target=None),
    Row(workload="W4mem", label="W4 memory (tracemalloc peak)", metric="peak_kib", unit="KiB", target=None),
    Row(workload="W4mem", label="  memory retained", metric="retained_kib", unit="KiB", target=None),
    Row(workload="W5", label="W5 20 servers, one runtime", metric="ms", unit="ms", target=1.05),
    Row(
        workload="W5",
        label="  client CPU (issue 30: ≤ the SDK's)",
        metric="cpu_ms",
        unit="ms",
        target=1.0,
        versus="sdk",
    ),
    Row(workload="W5b", label="W5 20 runtimes, one plugin manager", metric="ms", unit="ms", target=1.05),
    Row(workload="W5b", label="  client CPU", metric="cpu_ms", unit="ms", target=None),
    Row(workload="W6", label="W6 1,000 sequential calls, HTTP", metric="us_per_call", unit="µs/call", target=1.05),
    Row(workload="W6", label="  client CPU", metric="cpu_us_per_call", unit="µs/call", target=None),
    # issue 30's workloads and targets
    Row(workload="W1", label="I30 cold start, start + close, wall", metric="with_close_ms", unit="ms", target=1.05),
    Row(
        workload="W1",
        label="  client CPU per start + close",
        metric="with_close_cpu_ms",
        unit="ms",
        target=0.8,
        versus="sdk",
    ),
    Row(workload="W4r", label="W4r 10,000 real-schema tools / 100 pages", metric="ms", unit="ms", target=1.3),
    Row(workload="W4r", label="  client CPU", metric="cpu_ms", unit="ms", target=1.5),
    Row(workload="W8", label="W8 100 idle stdio servers, start all", metric="ms", unit="ms", target=1.1),
    Row(workload="W8", label="  client CPU", metric="cpu_ms", unit="ms", target=None),
    Row(
        workload="W8",
        label="  client RSS growth per server (a fresh process per repetition)",
        metric="rss_kib_per_server",
        unit="KiB",
        target=1.0,  # issue 30: ≤ the SDK's (bench/fresh.py: in one process it went negative)
        versus="sdk",
    ),
    Row(workload="W8", label="  echo calls refused after the start (of 100)", metric="refused", unit="", target=None),
    Row(
        workload="W7",
        label="W7 2,000 calls, 64 in flight, HTTP",
        metric="calls_per_s",
        unit="calls/s",
        target=0.7,
        higher_is_better=True,
    ),
    Row(workload="W7", label="  client CPU", metric="cpu_us_per_call", unit="µs/call", target=None),
    Row(
        workload="W9",
        label="W9 1,000 calls, HTTP, stored OAuth token",
        metric="us_per_call",
        unit="µs/call",
        target=1.05,
        versus="kxen_bearer",
    ),
    Row(
        workload="W9",
        label="  client CPU",
        metric="cpu_us_per_call",
        unit="µs/call",
        target=None,
        versus="kxen_bearer",
    ),
    Row(workload="W10", label="W10 read 1 MiB text, bounded view, wall", metric="ms_per_read", unit="ms", target=None),
    Row(workload="W10", label="  client CPU per read", metric="cpu_ms_per_read", unit="ms", target=2.0),
)


def _fmt(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


_FRESH_WORKSPACES: dict[str, str] = {}


async def _in_fresh_process(wl: Workload, side: str, transport: str, sizes: Sizes) -> dict[str, float]:
    """One repetition by bench/fresh.py in a new interpreter (its first use warmed up there)."""
    script = Path(__file__).resolve().parent / "fresh.py"
    if wl.key not in _FRESH_WORKSPACES:  # one per workload: its servers' pins known after the first
        _FRESH_WORKSPACES[wl.key] = tempfile.mkdtemp(prefix="kxen-bench-ws-", dir=os.environ["KXEN_DATA_DIR"])
    env = {**os.environ, "KXEN_BENCH_WORKSPACE": _FRESH_WORKSPACES[wl.key]}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        wl.key,
        side,
        transport,
        json.dumps(attrs.asdict(sizes)),
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=600)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise SystemExit(f"{wl.key} ({side}) in a fresh process did not finish in 600 s") from None
    if proc.returncode != 0:
        raise SystemExit(f"{wl.key} ({side}) in a fresh process failed (exit {proc.returncode})")
    return json.loads(out.decode().strip().splitlines()[-1])


async def run_workload(
    wl: Workload,
    reps: int,
    sides: tuple[str, ...],
    sizes: Sizes,
    transport: str,
    log: Callable[[str], None],
) -> dict[str, list[dict[str, float]]]:
    t = wl.transport or transport
    sides = sides_for(t, sides)
    samples: dict[str, list[dict[str, float]]] = {s: [] for s in sides}
    makers = {s: maker(t, s, wl.pipelined) for s in sides}

    async def one(side: str) -> dict[str, float]:
        if wl.fresh_process:
            return await _in_fresh_process(wl, side, t, sizes)
        return await wl.run(makers[side], sizes)

    for s in sides:  # warm-up, discarded
        await one(s)
    for rep in range(reps):
        k = rep % len(sides)  # rotate, so no side always runs right after another
        order = sides[k:] + sides[:k]
        if rep % 2:
            order = tuple(reversed(order))
        for s in order:
            samples[s].append(await one(s))
    log(f"{wl.key}: {reps} reps done")
    return samples


def _loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def _tree() -> dict[str, Any]:
    """The commit measured, and whether kxen_core or the plugins had uncommitted changes."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=False
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "kxen_core", "plugins"],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        return {}
    return {"commit": head, "uncommitted_changes_in_kxen": bool(dirty)}


def median_of(samples: list[dict[str, float]], metric: str) -> float:
    return statistics.median(s[metric] for s in samples)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    ap.add_argument(
        "--workloads",
        default="W1,W2,W3,W4,W5,W5b,W6,W4r,W7,W8,W9,W10,import",
        help="comma-separated, e.g. W1,W2,import",
    )
    ap.add_argument("--reps", type=int, help="repetitions per side for every workload (default: per workload)")
    ap.add_argument(
        "--sides",
        default=",".join(SIDES),
        help="of raw,kxen,kxen_bearer,session,sdk (the verdicts need raw and kxen; W1's CPU also sdk, W9 kxen_bearer)",
    )
    ap.add_argument(
        "--transport",
        default="stdio",
        choices=CHOSEN_TRANSPORTS,
        help="for W1-W5 (W6 is always http, W9 and W10 their own)",
    )
    ap.add_argument("--json", dest="json_out", help="write every sample and the summary here")
    opts = ap.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    # W9's table has one more column (kxen static Bearer)
    console = Console(width=max(200 if "W9" in opts.workloads.split(",") else 170, Console().width))

    def log(m: Any) -> None:
        console.log(m)

    wanted = [w.strip() for w in opts.workloads.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in WORKLOADS and w not in ("import", "search")]
    if unknown:
        ap.error(f"unknown workloads {unknown}; choose from {', '.join([*WORKLOADS, 'import', 'search'])}")
    if "W4" in wanted and "W4mem" not in wanted:
        wanted.insert(wanted.index("W4") + 1, "W4mem")
    asked = [s.strip() for s in opts.sides.split(",") if s.strip()]
    if [s for s in asked if s not in SIDES]:
        ap.error(f"unknown sides in {opts.sides!r}; choose from {', '.join(SIDES)}")
    sides = tuple(s for s in SIDES if s in asked and usable(s))
    if len(sides) < len(asked):
        log("the sdk side is skipped: the official SDK (the 'mcp' package) is not installed")
    sizes = Sizes()

    # kxen keeps pins (and OAuth tokens) in its data directory, not in the home: without this every
    # run would write into the user's own one, shared with other processes on the machine
    data = tempfile.TemporaryDirectory(prefix="kxen-bench-data-")
    os.environ["KXEN_DATA_DIR"] = data.name
    started = time.perf_counter()
    load_before = _loadavg()
    all_samples: dict[str, Any] = {}

    async def run_all() -> None:
        for key in wanted:
            if key in ("import", "search"):
                continue
            wl = WORKLOADS[key]
            reps = opts.reps or (wl.quick_reps if opts.quick else wl.reps)
            # a data directory per workload: W4's 10,000 pinned tools would otherwise weigh on every
            # later pin update (20 servers at once then outwait the pin store's 10 s lock: refused calls)
            os.environ["KXEN_DATA_DIR"] = tempfile.mkdtemp(prefix=f"{key}-", dir=data.name)
            all_samples[key] = await run_workload(wl, reps, sides, sizes, opts.transport, log)

    asyncio.run(run_all())
    if "import" in wanted:
        reps = opts.reps or (IMPORT_QUICK_REPS if opts.quick else IMPORT_REPS)
        all_samples["import"] = import_times(reps, cached=True)
        all_samples["import_nocache"] = import_times(max(3, reps // 3), cached=False)
        all_samples["import_absent"] = import_times(reps, cached=True, absent=True)
        if all_samples["import_absent"]["plugins"] != all_samples["import"]["plugins"]:
            raise SystemExit("the plugins loaded differ without the adapters' frameworks")
        log(f"import: {reps} reps done")
    if "search" in wanted:
        import tool_search

        all_samples["search"] = tool_search.run(3 if opts.quick else (opts.reps or 20))
        log("search: done")
    total = time.perf_counter() - started
    load_after = _loadavg()
    data.cleanup()

    table = Table(
        title=f"kxen through the Runtime vs the raw floor ({opts.transport}, W6 http; medians; {os.cpu_count()} CPUs; "
        f"{total:.0f} s; load average {load_before} → {load_after})"
    )
    for col, just in (("workload", "left"), ("raw", "right"), ("kxen Runtime", "right"), ("ratio", "right")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    table.add_column("target", justify="right")
    table.add_column("met", justify="center")
    table.add_column("kxen session", justify="right")
    table.add_column("official SDK", justify="right")
    bearer_column = any(isinstance(v, dict) and v.get("kxen_bearer") for v in all_samples.values())
    if bearer_column:
        table.add_column("kxen static Bearer", justify="right")
    summary = []
    verdicts: list[tuple[str, bool]] = []
    for row in ROWS:
        got = all_samples.get(row.workload)
        if not got:
            continue
        med = {s: median_of(got[s], row.metric) for s in sides if got.get(s)}

        def cell(side: str, with_ratio: bool = False, med: dict[str, float] = med, row: Any = row) -> str:
            if side not in med:
                return ""
            text = f"{_fmt(med[side])} {row.unit}"
            if with_ratio and "raw" in med and med["raw"]:
                text += f" ({med[side] / med['raw']:.2f}×)"
            return text

        ratio = med["kxen"] / med[row.versus] if "kxen" in med and med.get(row.versus) else None
        met = row.met(ratio) if ratio is not None else None
        if met is not None:
            verdicts.append((row.label.strip(), met))
        verdict = "" if met is None else ("[green]met[/]" if met else "[red]not met[/]")
        table.add_row(
            row.label,
            cell("raw"),
            cell("kxen"),
            f"{ratio:.2f}×" if ratio is not None else "",
            row.target_text(),
            verdict,
            cell("session", True),
            cell("sdk", True),
            *([cell("kxen_bearer", True)] if bearer_column else []),
        )
        entry: dict[str, Any] = {"row": row.label, "unit": row.unit, **med, "target": row.target_text(), "met": met}
        if ratio is not None:
            entry["ratio"] = ratio
            # robustness check (JSON only): the median of the per-repetition ratios, each pair close in time
            entry["paired_ratio"] = statistics.median(
                k[row.metric] / r[row.metric] for k, r in zip(got["kxen"], got[row.versus], strict=False)
            )
        summary.append(entry)
    imp = all_samples.get("import")
    for key, label in (
        ("import", "import kxen_core + plugins, net"),
        ("import_nocache", "  same, no bytecode cache"),
        ("import_absent", "  issue 30: the adapters' frameworks not installed"),
    ):
        got = all_samples.get(key)
        if not got:
            continue
        bare, full, net = statistics.median(got["bare_ms"]), statistics.median(got["full_ms"]), got["net_ms"]
        limit = {"import": IMPORT_LIMIT_MS, "import_absent": IMPORT_LIMIT_30_MS}.get(key)
        met = net <= limit if limit is not None else None
        if met is not None:
            verdicts.append((label, met))
        table.add_row(
            label,
            f"{_fmt(bare)} ms bare",
            f"{_fmt(full)} − bare = {_fmt(net)} ms",
            "",
            f"≤ {limit:g} ms" if limit is not None else "(info)",
            "" if met is None else ("[green]met[/]" if met else "[red]not met[/]"),
        )
        if key == "import":
            met30 = net <= IMPORT_LIMIT_30_MS
            verdicts.append(("import, issue 30", met30))
            table.add_row(
                "  issue 30: every plugin installed",
                "",
                f"{_fmt(net)} ms",
                "",
                f"≤ {IMPORT_LIMIT_30_MS:g} ms",
                "[green]met[/]" if met30 else "[red]not met[/]",
            )
            summary.append({"row": "import_issue30", "unit": "ms", "net": net, "target": "≤ 100 ms", "met": met30})
        summary.append(
            {
                "row": key,
                "unit": "ms",
                "bare": bare,
                "full": full,
                "net": net,
                "target": f"≤ {limit:g} ms" if limit is not None else None,
                "met": met,
            }
        )
    for name, f in (all_samples.get("search") or {}).items():
        label = f"search, {f['tools']:,} tools ({name})"
        table.add_row(
            label,
            f"recall@1 {f['recall_at_1']:.0%}, @5 {f['recall_at_5']:.0%}",
            f"{_fmt(f['search_ms_median'])} ms/search, index {_fmt(f['index_build_ms'])} ms",
            "",
            "(info)",
            "",
        )
        summary.append({"row": label, **{k: v for k, v in f.items() if k != "misses"}})
    console.print(table)
    missed = [label for label, ok in verdicts if not ok]
    if verdicts:
        console.print(
            f"targets: {len(verdicts) - len(missed)} of {len(verdicts)} met"
            + (f"; [red]not met: {', '.join(missed)}[/]" if missed else "")
        )
    if imp:
        plugins = imp["plugins"]
        console.print(
            f"import: loaded {', '.join(plugins['loaded'])}"
            + (f"; [red]failed to load: {', '.join(plugins['failed'])}[/]" if plugins["failed"] else "")
        )

    if opts.json_out:
        out = {
            "machine": {
                "python": sys.version.split()[0],
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
                "load_average": [load_before, load_after],
            },
            "tree": _tree(),
            "options": {"quick": opts.quick, "reps": opts.reps, "sides": sides, "transport": opts.transport},
            "sizes": attrs.asdict(sizes),
            "seconds": total,
            "summary": summary,
            "samples": all_samples,
        }
        Path(opts.json_out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

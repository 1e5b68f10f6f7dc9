"""kxen benchmark: kxen's client against a raw asyncio floor, interleaved in one process.

    uv run python bench/run.py [--quick] [--workloads W1,W2] [--reps N] [--json out.json]
    uv run python bench/run.py --workloads W2 --floor kxen-unbounded   # what the output bound costs

Each workload runs one untimed warm-up per side, then ``reps`` repetitions alternating the sides
(raw, kxen, then kxen, raw, ...). The table shows medians and the kxen/raw ratio against its target.
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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import attrs
from adapters import ADAPTERS
from workloads import WORKLOADS, Sizes, Workload, import_times

SIDES = ("raw", "kxen")
IMPORT_LIMIT_MS = 150.0
IMPORT_REPS, IMPORT_QUICK_REPS = 15, 5


@attrs.frozen(kw_only=True)
class Row:
    """One line of the table: a metric of a workload, and how its kxen/raw ratio is judged."""

    workload: str
    label: str
    metric: str
    unit: str
    target: float | None  # None: informational
    higher_is_better: bool = False

    def target_text(self) -> str:
        if self.target is None:
            return "(info)"
        return f"≥ {self.target:g}×" if self.higher_is_better else f"≤ {self.target:g}×"

    def met(self, ratio: float) -> bool | None:
        if self.target is None:
            return None
        return ratio >= self.target if self.higher_is_better else ratio <= self.target


ROWS = (
    Row(workload="W1", label="W1 spawn + initialize", metric="ms", unit="ms", target=1.05),
    Row(workload="W1", label="  client CPU", metric="cpu_ms", unit="ms", target=None),
    Row(workload="W1", label="  close (not timed in W1)", metric="close_ms", unit="ms", target=None),
    Row(workload="W2", label="W2 2,000 sequential calls", metric="us_per_call", unit="µs/call", target=1.3),
    Row(workload="W2", label="  client CPU", metric="cpu_us_per_call", unit="µs/call", target=None),
    Row(
        workload="W3",
        label="W3 2,000 calls, 64 in flight",
        metric="calls_per_s",
        unit="calls/s",
        target=0.5,
        higher_is_better=True,
    ),
    Row(workload="W3", label="  client CPU", metric="cpu_us_per_call", unit="µs/call", target=None),
    Row(workload="W4", label="W4 10,000 tools / 100 pages, time", metric="ms", unit="ms", target=2.0),
    Row(workload="W4", label="  client CPU", metric="cpu_ms", unit="ms", target=None),
    Row(workload="W4mem", label="W4 memory (tracemalloc peak)", metric="peak_kib", unit="KiB", target=1.3),
    Row(workload="W4mem", label="  memory retained", metric="retained_kib", unit="KiB", target=None),
    Row(workload="W5", label="W5 20 servers at once", metric="ms", unit="ms", target=1.05),
    Row(workload="W5", label="  client CPU", metric="cpu_ms", unit="ms", target=None),
    Row(workload="W6", label="W6 1,000 sequential calls, HTTP", metric="us_per_call", unit="µs/call", target=1.05),
    Row(workload="W6", label="  client CPU", metric="cpu_us_per_call", unit="µs/call", target=None),
)


def _fmt(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


async def run_workload(
    wl: Workload,
    reps: int,
    sides: tuple[str, ...],
    sizes: Sizes,
    transport: str,
    log: Callable[[str], None],
    floor: str = "raw",
) -> dict[str, list[dict[str, float]]]:
    samples: dict[str, list[dict[str, float]]] = {s: [] for s in sides}

    def make_for(side: str) -> Callable[..., Any]:
        cls = ADAPTERS[wl.transport or transport][floor if side == "raw" else side]
        return lambda spec, pipelined=wl.pipelined: cls(spec, pipelined=pipelined)

    makers = {s: make_for(s) for s in sides}
    for s in sides:  # warm-up, discarded
        await wl.run(makers[s], sizes)
    for rep in range(reps):
        order = sides if rep % 2 == 0 else tuple(reversed(sides))
        for s in order:
            samples[s].append(await wl.run(makers[s], sizes))
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
    ap.add_argument("--workloads", default="W1,W2,W3,W4,W5,W6,import", help="comma-separated, e.g. W1,W2,import")
    ap.add_argument("--reps", type=int, help="repetitions per side for every workload (default: per workload)")
    ap.add_argument("--sides", default="raw,kxen", help="e.g. 'kxen' alone, to profile kxen")
    ap.add_argument(
        "--floor",
        default="raw",
        choices=("raw", "kxen-unbounded"),
        help="what the 'raw' column runs: the raw floor, or kxen without the agent's bounded view (stdio)",
    )
    ap.add_argument(
        "--transport", default="stdio", choices=sorted(ADAPTERS), help="for W1-W5 (W6 is always http)"
    )
    ap.add_argument("--json", dest="json_out", help="write every sample and the summary here")
    opts = ap.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(130, Console().width))
    log = lambda m: console.log(m)
    wanted = [w.strip() for w in opts.workloads.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in WORKLOADS and w != "import"]
    if unknown:
        ap.error(f"unknown workloads {unknown}; choose from {', '.join([*WORKLOADS, 'import'])}")
    if "W4" in wanted and "W4mem" not in wanted:
        wanted.insert(wanted.index("W4") + 1, "W4mem")
    sides = tuple(s for s in SIDES if s in opts.sides.split(","))
    sizes = Sizes()

    started = time.perf_counter()
    load_before = _loadavg()
    all_samples: dict[str, Any] = {}

    async def run_all() -> None:
        for key in wanted:
            if key == "import":
                continue
            wl = WORKLOADS[key]
            reps = opts.reps or (wl.quick_reps if opts.quick else wl.reps)
            all_samples[key] = await run_workload(wl, reps, sides, sizes, opts.transport, log, opts.floor)

    asyncio.run(run_all())
    if "import" in wanted:
        reps = opts.reps or (IMPORT_QUICK_REPS if opts.quick else IMPORT_REPS)
        all_samples["import"] = import_times(reps, cached=True)
        all_samples["import_nocache"] = import_times(max(3, reps // 3), cached=False)
        log(f"import: {reps} reps done")
    total = time.perf_counter() - started
    load_after = _loadavg()

    table = Table(
        title=f"kxen vs raw floor ({opts.transport}, W6 http; medians; {os.cpu_count()} CPUs; {total:.0f} s; "
        f"load average {load_before} → {load_after})"
    )
    for col, just in (("workload", "left"), ("raw", "right"), ("kxen", "right"), ("ratio", "right")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    table.add_column("target", justify="right")
    table.add_column("met", justify="center")
    summary = []
    for row in ROWS:
        got = all_samples.get(row.workload)
        if not got or not all(got.get(s) for s in sides):
            continue
        med = {s: median_of(got[s], row.metric) for s in sides}
        if len(sides) < 2:
            (s,) = sides
            table.add_row(row.label, "", f"{_fmt(med[s])} {row.unit}", "", "", "")
            continue
        ratio = med["kxen"] / med["raw"]
        # robustness check (JSON only): the median of the per-repetition ratios, each pair adjacent in time
        paired = statistics.median(k[row.metric] / r[row.metric] for k, r in zip(got["kxen"], got["raw"]))
        met = row.met(ratio)
        verdict = "" if met is None else ("[green]met[/]" if met else "[red]not met[/]")
        table.add_row(
            row.label,
            f"{_fmt(med['raw'])} {row.unit}",
            f"{_fmt(med['kxen'])} {row.unit}",
            f"{ratio:.2f}×",
            row.target_text(),
            verdict,
        )
        summary.append(
            {
                "row": row.label,
                "unit": row.unit,
                "raw": med["raw"],
                "kxen": med["kxen"],
                "ratio": ratio,
                "paired_ratio": paired,
                "target": row.target_text(),
                "met": met,
            }
        )
    imp = all_samples.get("import")
    for key, label in (("import", "import kxen_core + plugins, net"), ("import_nocache", "  same, no bytecode cache")):
        got = all_samples.get(key)
        if not got:
            continue
        bare, full, net = statistics.median(got["bare_ms"]), statistics.median(got["full_ms"]), got["net_ms"]
        met = net <= IMPORT_LIMIT_MS if key == "import" else None
        table.add_row(
            label,
            f"{_fmt(bare)} ms bare",
            f"{_fmt(full)} − bare = {_fmt(net)} ms",
            "",
            f"≤ {IMPORT_LIMIT_MS:g} ms" if key == "import" else "(info)",
            "" if met is None else ("[green]met[/]" if met else "[red]not met[/]"),
        )
        summary.append(
            {
                "row": key,
                "unit": "ms",
                "bare": bare,
                "full": full,
                "net": net,
                "target": "≤ 150 ms" if key == "import" else None,
                "met": met,
            }
        )
    console.print(table)
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

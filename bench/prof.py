"""Profile one side of one workload, without the other side or the table.

    uv run python bench/prof.py W2 [--side kxen] [--reps 3] [--top 25]
    uv run python bench/prof.py W9 --side kxen_bearer  # W9's static-header side (kxen: the OAuth one)
    uv run --with pyinstrument python bench/prof.py W3 --pyinstrument [--html out.html]

cProfile (default) prints deterministic counts that do not depend on the machine's load: Python
function calls and event-loop iterations per request (W2/W3) or per page (W4), then the top
functions by own time. ``--pyinstrument`` prints a call tree instead (wall clock, sampled).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sides import ADAPTERS, SIDES, maker
from workloads import WORKLOADS, Sizes


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("--side", default="kxen", choices=SIDES, help="kxen: through a Runtime (the default)")
    ap.add_argument("--transport", choices=sorted(ADAPTERS), help="default: the workload's own (W6: http), else stdio")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sort", default="tottime", help="a pstats sort key (cumtime: with what each calls)")
    ap.add_argument("--pyinstrument", action="store_true")
    ap.add_argument("--html", help="with --pyinstrument: write an HTML report here")
    opts = ap.parse_args()

    wl = WORKLOADS[opts.workload]
    make = maker(opts.transport or wl.transport or "stdio", opts.side, wl.pipelined)
    sizes = Sizes()

    async def body() -> None:
        for _ in range(opts.reps):
            await wl.run(make, sizes)

    async def warm() -> None:
        await wl.run(make, sizes)  # imports, plugin manager, caches: not profiled

    asyncio.run(warm())
    if opts.pyinstrument:
        from pyinstrument import Profiler

        profiler = Profiler(async_mode="disabled")
        profiler.start()
        asyncio.run(body())
        profiler.stop()
        if opts.html:
            Path(opts.html).write_text(profiler.output_html())
        print(profiler.output_text(unicode=True, color=False, show_all=False))
        return 0

    prof = cProfile.Profile()
    prof.enable()
    asyncio.run(body())
    prof.disable()
    stats = pstats.Stats(prof)
    total_calls = stats.total_calls  # type: ignore[attr-defined]
    loop_iters = sum(
        v[1]
        for k, v in stats.stats.items()
        if k[2] == "_run_once"  # type: ignore[attr-defined]
    )
    if opts.workload in ("W2", "W3"):
        unit, n = "request", opts.reps * (sizes.calls + (100 if opts.workload == "W2" else sizes.in_flight))
    elif opts.workload == "W6":
        unit, n = "request", opts.reps * (sizes.http_calls + 100)
    elif opts.workload == "W9":
        unit, n = "request", opts.reps * (sizes.auth_calls + 100)
    elif opts.workload == "W10":
        unit, n = "read", opts.reps * (sizes.reads + 1)
    elif opts.workload in ("W4", "W4mem"):
        unit, n = "page", opts.reps * (sizes.tools // sizes.page_size)
    else:
        unit, n = "repetition", opts.reps
    print(
        f"{opts.side} {opts.workload}: {total_calls / n:,.0f} Python function calls and "
        f"{loop_iters / n:.1f} event-loop iterations per {unit} (the per-repetition spawn, initialize and "
        "warm-up calls included)"
    )
    stats.sort_stats(opts.sort).print_stats(opts.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())

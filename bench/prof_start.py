"""Client CPU per cold start through the Runtime, and where it goes (issue 30).

    uv run python bench/prof_start.py                   # CPU per start: median of batches
    uv run python bench/prof_start.py --profile 200     # cProfile over 200 starts: top functions
    uv run python bench/prof_start.py --profile 200 --callers NAME

A start is what a host pays each time: a fresh home and ``mcp.json`` (written outside the clock; the
workspace is the run's one, see bench/adapters_runtime.py), a
fresh ``Runtime`` over one shared plugin manager, entered (config read and checked, admission, launch
resolution, spawn, initialize, era probe, the first ``tools/list``), ``wait_ready``, one echo, and
the close (the process-tree snapshot included). The clock is ``time.process_time()`` of this
process: the client's own CPU, not the server's.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import adapters_runtime
from adapters import ServerSpec
from adapters_runtime import KxenRuntimeClient

PARTS: dict[str, list[float]] = {"start": [], "call": [], "close": []}


async def one_start() -> float:
    client = KxenRuntimeClient(ServerSpec())
    gc.collect()
    c0 = time.process_time()
    await client.start()
    c1 = time.process_time()
    result = await client.call("echo", {"text": "s"})
    c2 = time.process_time()
    await client.close()
    c3 = time.process_time()
    if result["content"][0]["text"] != "s":
        raise SystemExit(f"unexpected echo: {result!r}")
    for part, ms in zip(PARTS, ((c1 - c0) * 1e3, (c2 - c1) * 1e3, (c3 - c2) * 1e3), strict=True):
        PARTS[part].append(ms)
    return (c3 - c0) * 1e3


async def batch(n: int) -> float:
    return statistics.median([await one_start() for _ in range(n)])


#: (module, attribute) of the sync steps whose CPU --phases sums (thread CPU: a worker thread's own)
PHASES = (
    ("kxen_core.runtime.workspace", "Runtime.__init__"),
    ("kxen_core.runtime.workspace", "Runtime.load"),
    ("kxen_core.runtime.workspace", "Runtime._apply"),
    ("kxen_core.config.loader", "load_config"),
    ("kxen_core.launch.resolve", "resolve_launch"),
    ("kxen_core.runtime.connection", "resolve_launch"),
    ("kxen_core.runtime.admission", "resolve_launch"),
    ("kxen_core.policy.pin_store", "PinStore.document"),
    ("kxen_core.policy.pin_store", "PinStore.update_if"),
    ("kxen_core.policy.pins", "listing_of"),
    ("kxen_transport_stdio.child", "spawn"),
    ("kxen_transport_stdio.transport", "spawn"),
    ("kxen_transport_stdio.procs.tree", "table"),
    ("kxen_transport_stdio.procs.tree", "Tree.update"),
    ("shutil", "rmtree"),
)
SPENT: dict[str, list[float]] = {}


def instrument() -> None:
    import functools
    import importlib

    for module, attr in PHASES:
        owner: object = importlib.import_module(module)
        *path, name = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        fn = getattr(owner, name)
        label = f"{module}.{attr}"
        cell = SPENT.setdefault(label, [0.0, 0])

        def wrap(fn: object = fn, cell: list[float] = cell) -> object:
            @functools.wraps(fn)  # type: ignore[arg-type]
            def timed(*a: object, **k: object) -> object:
                t0 = time.thread_time()
                try:
                    return fn(*a, **k)  # type: ignore[operator]
                finally:
                    cell[0] += time.thread_time() - t0
                    cell[1] += 1

            return timed

        setattr(owner, name, wrap())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=7)
    ap.add_argument("--per-batch", type=int, default=15)
    ap.add_argument("--profile", type=int, default=0, help="profile this many starts instead")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--sort", default="tottime")
    ap.add_argument("--callers", help="print the callers of functions matching this")
    ap.add_argument("--phases", action="store_true", help="also the CPU of named sync steps per start")
    ap.add_argument("--data-dir", help="KXEN_DATA_DIR (the pin store): default a fresh temporary one")
    ap.add_argument(
        "--fresh-workspace",
        action="store_true",
        help="a new workspace per start: each a first sight of the server, a new identity to pin",
    )
    opts = ap.parse_args()
    adapters_runtime.FRESH_WORKSPACE = opts.fresh_workspace
    # a fresh store by default, not the user's (with --fresh-workspace every start adds an
    # identity, up to the store's 500)
    if opts.data_dir:
        os.environ["KXEN_DATA_DIR"] = opts.data_dir
        return measure(opts)
    with tempfile.TemporaryDirectory(prefix="kxen-prof-data-") as data:
        os.environ["KXEN_DATA_DIR"] = data
        return measure(opts)


def measure(opts: argparse.Namespace) -> int:

    if opts.phases:
        from kxen_core.runtime.workspace import Runtime  # noqa: F401  (the modules to wrap)

        instrument()
    asyncio.run(batch(3))  # imports, the plugin manager, per-process caches: not measured
    for cell in SPENT.values():
        cell[:] = [0.0, 0]
    if opts.profile:
        prof = cProfile.Profile(time.process_time)  # CPU: the waits on the server do not count
        prof.enable()
        asyncio.run(batch(opts.profile))
        prof.disable()
        stats = pstats.Stats(prof)
        print(f"{stats.total_calls / opts.profile:,.0f} Python function calls per start")  # type: ignore[attr-defined]
        stats.sort_stats(opts.sort).print_stats(opts.top)
        if opts.callers:
            stats.print_callers(opts.callers)
        return 0
    medians = [asyncio.run(batch(opts.per_batch)) for _ in range(opts.batches)]
    print("batch medians (ms CPU per start):", " ".join(f"{m:.2f}" for m in medians))
    print(f"median {statistics.median(medians):.2f} ms")
    n = opts.batches * opts.per_batch
    if opts.phases:
        for label, (spent, calls) in SPENT.items():
            if calls:
                print(f"  {label}: {spent / n * 1e3:.3f} ms per start ({calls / n:.1f} calls)")
    print("of which (medians):", ", ".join(f"{k} {statistics.median(v[-n:]):.2f} ms" for k, v in PARTS.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

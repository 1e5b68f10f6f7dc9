"""One repetition of a workload in a process of its own (W8's memory per server).

    python bench/fresh.py WORKLOAD SIDE TRANSPORT SIZES_JSON

Run by bench/run.py for a workload marked ``fresh_process``: the resident memory a side grows by
is only its own in a process that ran nothing else before (in one process after other workloads,
freed arenas are reused and the growth goes negative). Before the measured repetition, one of a
single server: the modules a side imports on its first use, and its per-process caches, are not
counted as memory per server. Prints the sample as one JSON line; the workspace is the run's one
(``KXEN_BENCH_WORKSPACE``: the servers' pins known after the first repetition, as in-process).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import attrs
from sides import maker
from workloads import WORKLOADS, Sizes


def main() -> int:
    key, side, transport, sizes_json = sys.argv[1:5]
    wl = WORKLOADS[key]
    sizes = Sizes(**json.loads(sizes_json))
    make = maker(wl.transport or transport, side, wl.pipelined)

    async def run() -> dict[str, float]:
        await wl.run(make, attrs.evolve(sizes, idle_servers=1))  # first use: imports, caches
        return await wl.run(make, sizes)

    print(json.dumps(asyncio.run(run())))
    return 0


if __name__ == "__main__":
    sys.exit(main())

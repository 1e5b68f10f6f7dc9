"""What a pause before the next request costs: the bench server's round trip after the client kept
its CPU busy for a given time since the previous answer (or slept through it).

    uv run python bench/pause.py [--reps 200]

Lock-step, one process, no event loop: write a ``ping`` line, read the answer line. On a machine
whose idle CPUs halt (a virtual machine's, a laptop's), the server's CPU goes to sleep while it
waits, and the round trip after a long enough pause pays its wake-up (docs/performance.md, the
fifth round). Informational: nothing here is a target.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

SERVER = Path(__file__).parent / "server.py"
GAPS_US = (0, 20, 50, 100, 150, 200, 300, 500, 1000, 3000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200, help="round trips per gap (median shown)")
    reps = max(1, min(ap.parse_args().reps, 10_000))
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
    )
    assert proc.stdin is not None and proc.stdout is not None
    write, readline = proc.stdin.write, proc.stdout.readline

    def ping(i: int) -> None:
        write(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i)
        if b'"result"' not in readline():
            raise SystemExit("the bench server did not answer the ping")

    try:
        for i in range(reps):  # warm-up
            ping(i)
        for how in ("busy", "sleep"):
            for gap in GAPS_US:
                rtts = []
                for i in range(reps):
                    start = time.perf_counter()
                    if how == "busy":
                        while time.perf_counter() - start < gap / 1e6:  # the client working
                            pass
                    elif gap:
                        time.sleep(gap / 1e6)
                    t0 = time.perf_counter()
                    ping(i)
                    rtts.append(time.perf_counter() - t0)
                print(f"{how:5} gap {gap:5} µs: round trip median {statistics.median(rtts) * 1e6:7.1f} µs")
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()

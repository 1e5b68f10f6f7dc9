"""Issue 30's workloads, beside the older ones (bench/workloads.py): each runs one repetition for
one side and checks every result it gets. Only the section each docstring names is timed.

- ``W7``: W3's 64 calls in flight over Streamable HTTP (``http_server.py``), throughput.
- ``W8``: 100 idle stdio servers in one Runtime: the time to start them all and the growth of the
  client's own resident memory (``/proc/self/status`` VmRSS) per server.
- ``W4r``: W4's 10,000 tools in 100 pages, with the real peers' tool definitions
  (``bench/real_tools.json``, recorded by ``bench/record_tools.py``) repeated under distinct names.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

from adapters import BenchError, ServerSpec
from workloads import Make, Sizes, _check_catalog, _check_echo, cpu, perf, w3_concurrent

REAL_TOOLS = Path(__file__).resolve().parent / "real_tools.json"


def rss_kib() -> int:
    """The client's own resident set (VmRSS), in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise BenchError("no VmRSS in /proc/self/status")


async def w7_http_concurrent(make: Make, sizes: Sizes) -> dict[str, float]:
    """W7: W3 over Streamable HTTP: ``calls`` echo calls by ``in_flight`` workers, calls/s."""
    return await w3_concurrent(make, sizes)


async def w8_idle(make: Make, sizes: Sizes) -> dict[str, float]:
    """W8: time until ``idle_servers`` stdio servers, started at once, have all initialized and
    listed (kxen: one Runtime holding them all; the others: one client per server), and the growth
    of this process's RSS from before the start to all ready, per server. Then one echo call per
    server (untimed): a call kxen refuses (``ApprovalDenied``, e.g. its pin store could not be
    used) is counted in ``refused``, shown in the table (it should be 0); any other error ends it."""
    n = sizes.idle_servers
    fleet = make.fleet([ServerSpec(name=f"idle{i}") for i in range(n)])  # type: ignore[attr-defined]
    gc.collect()
    rss0 = rss_kib()
    c0, t0 = cpu(), perf()
    await fleet.start()
    elapsed, cpu_used = perf() - t0, cpu() - c0
    gc.collect()
    rss1 = rss_kib()
    refused = 0
    try:
        for i in range(n):
            try:
                result = await fleet.call(i, "echo", {"text": f"w8-{i}"})
            except Exception as exc:  # kxen's refusal (ApprovalDenied) is counted and shown, others end the run
                if type(exc).__name__ != "ApprovalDenied":
                    raise
                refused += 1
                continue
            _check_echo(result, f"w8-{i}")
    finally:
        await fleet.close()
    return {
        "ms": elapsed * 1e3,
        "cpu_ms": cpu_used * 1e3,
        "rss_kib_per_server": (rss1 - rss0) / n,
        "refused": float(refused),
    }


def real_spec(sizes: Sizes) -> ServerSpec:
    return ServerSpec(tools=sizes.tools - 1, page_size=sizes.page_size, catalog=str(REAL_TOOLS))


def _check_real(items: list[dict[str, Any]], sizes: Sizes) -> None:
    """The names of W4's catalog, and (on the sides that keep more than the names: the SDK adapter
    keeps only names) the real definitions under them."""
    _check_catalog(items, sizes)
    if any("inputSchema" in t for t in items):
        real = json.loads(REAL_TOOLS.read_text())["tools"]
        by_name = {t["name"]: t for t in items}
        for i in (0, 1, len(real) - 1, sizes.tools - 2):
            got, want = by_name[f"tool_{i}"], real[i % len(real)]
            if got.get("inputSchema") != want["inputSchema"] or got.get("description") != want.get("description"):
                raise BenchError(f"W4r: tool_{i} is not the recorded definition {want['name']!r}")


async def w4_real(make: Make, sizes: Sizes) -> dict[str, float]:
    """W4r: time ``list_tools()`` of the real-schema catalog over ``tools / page_size`` pages."""
    client = make(real_spec(sizes))
    await client.start()
    try:
        gc.collect()
        c0, t0 = cpu(), perf()
        items = await client.list_tools()
        elapsed, cpu_used = perf() - t0, cpu() - c0
        _check_real(items, sizes)
    finally:
        await client.close()
    return {"ms": elapsed * 1e3, "cpu_ms": cpu_used * 1e3}

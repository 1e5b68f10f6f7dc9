"""The workloads. Each one runs one repetition for one side and returns its metrics.

A workload gets a ``make(spec, pipelined=...)`` factory for the side under test (raw or kxen; the
same code path for both) and verifies every result it gets: an unverified benchmark measures nothing.
Only the section named in each docstring is timed; spawning for W2-W4 and every close are not.
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
from adapters import BenchError, Client, ServerSpec, cold_start

Make = Callable[..., Client]
perf = time.perf_counter
cpu = time.process_time  # this process only: the client's own CPU, not the server's


@attrs.frozen(kw_only=True)
class Sizes:
    calls: int = 2000  # W2, W3
    in_flight: int = 64  # W3
    tools: int = 10_000  # W4, including the server's echo
    page_size: int = 100  # W4
    servers: int = 20  # W5
    http_calls: int = 1000  # W6
    idle_servers: int = 100  # W8
    auth_calls: int = 1000  # W9
    reads: int = 20  # W10
    resource_chars: int = 1 << 20  # W10: 1 MiB of ASCII text


def _check_echo(result: dict[str, Any], text: str) -> None:
    try:
        got = result["content"][0]["text"]
    except (KeyError, IndexError, TypeError):
        raise BenchError(f"malformed tools/call result: {str(result)[:200]}") from None
    if got != text:
        raise BenchError(f"echo mismatch: sent {text!r}, got {got!r}")


async def w1_spawn_init(make: Make, sizes: Sizes) -> dict[str, float]:
    """W1: time a cold start: spawn the stdio server, initialize, notifications/initialized, and the
    first tools/list (a Runtime lists while starting: its ``start()`` is entering it and
    ``wait_ready``; the other sides' ``list_tools()`` follows their ``start()`` on the clock)."""
    client = make(ServerSpec())
    gc.collect()
    c0, t0 = cpu(), perf()
    await cold_start(client)
    t1, c1 = perf(), cpu()
    try:
        _check_echo(await client.call("echo", {"text": "w1"}), "w1")
    finally:
        c2, t2 = cpu(), perf()
        await client.close()
        t3, c3 = perf(), cpu()
    return {
        "ms": (t1 - t0) * 1e3,
        "cpu_ms": (c1 - c0) * 1e3,
        "close_ms": (t3 - t2) * 1e3,
        # issue 30's cold start: the start and the close on the clock (the check call between is not)
        "with_close_ms": (t1 - t0 + t3 - t2) * 1e3,
        "with_close_cpu_ms": (c1 - c0 + c3 - c2) * 1e3,
    }


async def _sequential(
    make: Make,
    calls: int,
    label: str,
    spec: ServerSpec | None = None,
    after: Callable[[Client, int], Awaitable[None]] | None = None,
) -> dict[str, float]:
    """Time ``calls`` sequential echo calls on one session, after 100 untimed warm-up calls; then
    ``after(client, calls made)`` checks what it needs to (untimed, before the close)."""
    client = make(spec or ServerSpec())
    await client.start()
    try:
        call = client.call
        for i in range(100):
            _check_echo(await call("echo", {"text": f"warm-{i}"}), f"warm-{i}")
        texts = [f"{label}-{i}" for i in range(calls)]
        gc.collect()
        c0, t0 = cpu(), perf()
        for text in texts:
            result = await call("echo", {"text": text})
            if result["content"][0]["text"] != text:
                _check_echo(result, text)
        elapsed, cpu_used = perf() - t0, cpu() - c0
        if after is not None:
            await after(client, 100 + calls)
    finally:
        await client.close()
    return {"us_per_call": elapsed / calls * 1e6, "cpu_us_per_call": cpu_used / calls * 1e6}


async def w2_sequential(make: Make, sizes: Sizes) -> dict[str, float]:
    """W2: ``calls`` sequential echo calls on one stdio session."""
    return await _sequential(make, sizes.calls, "w2")


async def w6_http_sequential(make: Make, sizes: Sizes) -> dict[str, float]:
    """W6: ``http_calls`` sequential echo calls over Streamable HTTP on one session; the peer is
    ``http_server.py``, one keep-alive connection."""
    return await _sequential(make, sizes.http_calls, "w6")


async def w3_concurrent(make: Make, sizes: Sizes) -> dict[str, float]:
    """W3: time ``calls`` echo calls made by ``in_flight`` concurrent workers; report calls/s."""
    client = make(ServerSpec(), pipelined=True)
    await client.start()
    try:
        call = client.call
        texts = [f"w3-{i}" for i in range(sizes.calls)]
        nxt = 0

        async def worker() -> int:
            nonlocal nxt
            done = 0
            while nxt < len(texts):
                text = texts[nxt]
                nxt += 1
                result = await call("echo", {"text": text})
                if result["content"][0]["text"] != text:
                    _check_echo(result, text)
                done += 1
            return done

        # warm-up: one untimed round of in_flight calls
        await asyncio.gather(*(call("echo", {"text": "warm"}) for _ in range(sizes.in_flight)))
        gc.collect()
        c0, t0 = cpu(), perf()
        counts = await asyncio.gather(*(worker() for _ in range(sizes.in_flight)))
        elapsed, cpu_used = perf() - t0, cpu() - c0
        if sum(counts) != sizes.calls:
            raise BenchError(f"W3 made {sum(counts)} calls, expected {sizes.calls}")
    finally:
        await client.close()
    return {"calls_per_s": sizes.calls / elapsed, "cpu_us_per_call": cpu_used / sizes.calls * 1e6}


def _w4_spec(sizes: Sizes) -> ServerSpec:
    return ServerSpec(tools=sizes.tools - 1, page_size=sizes.page_size)  # + the server's echo


def _check_catalog(items: list[dict[str, Any]], sizes: Sizes) -> None:
    names = [t["name"] for t in items]
    expected = {"echo", *(f"tool_{i}" for i in range(sizes.tools - 1))}
    if len(names) != sizes.tools or len(set(names)) != len(names) or set(names) != expected:
        raise BenchError(f"catalog wrong: {len(names)} items, {len(set(names))} distinct, expected {sizes.tools}")


async def w4_catalog(make: Make, sizes: Sizes) -> dict[str, float]:
    """W4: time ``list_tools()`` over ``tools / page_size`` pages (validation and dedupe included)."""
    client = make(_w4_spec(sizes))
    await client.start()
    try:
        gc.collect()
        c0, t0 = cpu(), perf()
        items = await client.list_tools()
        elapsed, cpu_used = perf() - t0, cpu() - c0
        _check_catalog(items, sizes)
    finally:
        await client.close()
    return {"ms": elapsed * 1e3, "cpu_ms": cpu_used * 1e3}


async def w4_memory(make: Make, sizes: Sizes) -> dict[str, float]:
    """W4 memory: tracemalloc peak growth across ``list_tools()`` (the retained catalog included).

    Tracing starts after the session is up, so only the listing is counted, the same way for both.
    """
    client = make(_w4_spec(sizes))
    await client.start()
    try:
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            items = await client.list_tools()
            current, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        _check_catalog(items, sizes)
        del items
    finally:
        await client.close()
    return {"peak_kib": (peak - base) / 1024, "retained_kib": (current - base) / 1024}


async def w5_many(make: Make, sizes: Sizes) -> dict[str, float]:
    """W5, one runtime per server: time until ``servers`` one-server clients, started at once, have
    all initialized and listed; kxen: as many Runtimes, sharing one plugin manager."""
    clients = [make(ServerSpec(name=f"bench{i}")) for i in range(sizes.servers)]
    ready_at: list[float] = []
    all_ready = asyncio.Event()
    release = asyncio.Event()

    async def run(i: int, client: Client) -> None:
        try:
            await cold_start(client)
            ready_at.append(perf())
            if len(ready_at) == len(clients):
                all_ready.set()
            await release.wait()
            _check_echo(await client.call("echo", {"text": f"w5-{i}"}), f"w5-{i}")
        finally:
            await client.close()

    gc.collect()
    c0, t0 = cpu(), perf()
    tasks = [asyncio.ensure_future(run(i, c)) for i, c in enumerate(clients)]
    waiter = asyncio.ensure_future(all_ready.wait())
    done, _ = await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
    if waiter not in done:  # a start failed: surface its error
        release.set()
        await asyncio.gather(*tasks)
        raise BenchError("W5: a server task ended before all were ready")
    elapsed, cpu_used = max(ready_at) - t0, cpu() - c0
    release.set()
    await asyncio.gather(*tasks)
    return {"ms": elapsed * 1e3, "cpu_ms": cpu_used * 1e3}


async def w5_fleet(make: Make, sizes: Sizes) -> dict[str, float]:
    """W5, one runtime: time until ``servers`` stdio servers, started at once, have all initialized
    and listed; kxen: one Runtime with every server in its config (entered, ``wait_ready``), the
    others: one client per server, each started in its own task."""
    fleet = make.fleet([ServerSpec(name=f"bench{i}") for i in range(sizes.servers)])  # type: ignore[attr-defined]
    gc.collect()
    c0, t0 = cpu(), perf()
    await fleet.start()
    elapsed, cpu_used = perf() - t0, cpu() - c0
    try:
        for i in range(sizes.servers):
            _check_echo(await fleet.call(i, "echo", {"text": f"w5-{i}"}), f"w5-{i}")
    finally:
        await fleet.close()
    return {"ms": elapsed * 1e3, "cpu_ms": cpu_used * 1e3}


# --- import time (subprocesses, no adapters) -----------------------------------------------------

#: the frameworks of the adapters' extras (kxen-adapter-langchain, -openai-agents, -pydantic-ai)
FRAMEWORKS = ("langchain_core", "agents", "pydantic_ai")
IMPORT_CODE = (
    "import sys\n"
    "import kxen_core.runtime.workspace, kxen_core.plugins.manager\n"
    "pm = kxen_core.plugins.manager.make_plugin_manager()\n"
    "loaded = sorted(n for n, p in pm.list_name_plugin() if p is not None and n in pm.origins)\n"
    "failed = sorted(f.entry_point for f in pm.failures if not f.skipped)\n"
    f"frameworks = [m for m in {FRAMEWORKS!r} if m in sys.modules]\n"
    "print(','.join(loaded) + '|' + ','.join(failed) + '|' + ','.join(frameworks))\n"
)
#: before IMPORT_CODE: the frameworks cannot be imported, as where the extras are not installed
ABSENT_CODE = (
    "import sys\n"
    "class _Absent:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    f"        if name.partition('.')[0] in {FRAMEWORKS!r}:\n"
    "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
    "sys.meta_path.insert(0, _Absent())\n"
)


def _interpreter_env(cached: bool, prefix: str) -> dict[str, str]:
    """The environment of the import subprocesses.

    ``cached``: bytecode is written to and read from ``prefix`` (PYTHONPYCACHEPREFIX, so nothing is
    written into the project), as on any machine that has run kxen once. Not cached: bytecode is
    neither read nor written (an empty prefix and PYTHONDONTWRITEBYTECODE), every module compiles.
    """
    env = dict(os.environ)
    env["PYTHONPYCACHEPREFIX"] = prefix
    if cached:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def import_times(reps: int, *, cached: bool = True, absent: bool = False) -> dict[str, Any]:
    """Fresh-interpreter wall time of ``python -c pass`` and of IMPORT_CODE, alternating
    (``absent``: with the adapters' frameworks made unimportable, the same for ``pass``).

    The import cost is the difference of the two medians. Importing kxen loads none of the
    frameworks (a :class:`BenchError` otherwise), and the same plugins load either way.
    """
    prelude = ABSENT_CODE if absent else ""
    bare, full = [], []
    plugins: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="kxen-bench-pycache-") as prefix:
        env = _interpreter_env(cached, prefix)
        warm = 2 if cached else 1  # cached: the first runs write the bytecode; dropped
        for i in range(reps + warm):
            for which in (0, 1) if i % 2 == 0 else (1, 0):
                code = prelude + ("pass" if which == 0 else IMPORT_CODE)
                cmd = [sys.executable, "-c", code]
                t0 = perf()
                out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
                dt = (perf() - t0) * 1e3
                if which == 1:
                    loaded, failed, frameworks = out.stdout.strip().split("|")
                    if frameworks:
                        raise BenchError(f"importing kxen loaded the adapters' frameworks: {frameworks}")
                    plugins = {
                        "loaded": loaded.split(",") if loaded else [],
                        "failed": failed.split(",") if failed else [],
                    }
                if i >= warm:
                    (bare if which == 0 else full).append(dt)
    return {
        "bare_ms": bare,
        "full_ms": full,
        "plugins": plugins,
        "net_ms": statistics.median(full) - statistics.median(bare),
    }


@attrs.frozen(kw_only=True)
class Workload:
    key: str
    title: str
    run: Callable[[Make, Sizes], Awaitable[dict[str, float]]]
    pipelined: bool = False
    #: the transport whose adapters run it; None: the one chosen on the command line (stdio)
    transport: str | None = None
    reps: int = 7
    quick_reps: int = 3
    #: each repetition (and the warm-up) in a new process (bench/fresh.py): for a memory figure
    fresh_process: bool = False


def _issue30() -> tuple[Workload, ...]:
    from workloads30 import w4_real, w7_http_concurrent, w8_idle
    from workloads30b import w9_http_oauth, w10_read_bounded

    return (
        Workload(key="W4r", title="10,000 tools in 100 pages, the real peers' schemas", run=w4_real, reps=11),
        Workload(
            key="W7",
            title="2,000 tools/call, 64 in flight, Streamable HTTP",
            run=w7_http_concurrent,
            pipelined=True,
            transport="http",
            reps=11,
        ),
        Workload(
            key="W8",
            title="100 idle stdio servers in one runtime",
            run=w8_idle,
            reps=5,
            quick_reps=2,
            fresh_process=True,
        ),
        Workload(
            key="W9",
            title="1,000 sequential tools/call over Streamable HTTP, OAuth token stored and valid",
            run=w9_http_oauth,
            transport="http_auth",
            reps=11,
            quick_reps=3,
        ),
        Workload(
            key="W10",
            title="resources/read of a 1 MiB text resource through the output bound",
            run=w10_read_bounded,
            transport="stdio",
            reps=11,
            quick_reps=3,
        ),
    )


WORKLOADS: dict[str, Workload] = {
    w.key: w
    for w in (
        Workload(key="W1", title="spawn a stdio server + initialize", run=w1_spawn_init, reps=41, quick_reps=9),
        Workload(key="W2", title="2,000 sequential tools/call", run=w2_sequential, reps=21),
        Workload(key="W3", title="2,000 tools/call, 64 in flight", run=w3_concurrent, pipelined=True, reps=15),
        Workload(key="W4", title="10,000 tools in 100 pages", run=w4_catalog, reps=11),
        Workload(key="W4mem", title="10,000 tools, memory", run=w4_memory, reps=5, quick_reps=3),
        Workload(key="W5", title="20 stdio servers at once in one runtime", run=w5_fleet, reps=15),
        Workload(key="W5b", title="20 runtimes of one server each at once, one plugin manager", run=w5_many, reps=15),
        Workload(
            key="W6",
            title="1,000 sequential tools/call over Streamable HTTP",
            run=w6_http_sequential,
            transport="http",
            reps=21,
            quick_reps=5,
        ),
        *_issue30(),
    )
}

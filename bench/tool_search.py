"""Tool search, measured: recall@1 and recall@5 of the labelled queries, the context saved, the
index build time and the search latency, through a real Runtime's public calls.

    uv run python bench/tool_search.py [--reps N] [--json out.json]

Two catalogs (bench/tool_search_queries.json): the real peers' tools (the demo server,
server-everything over stdio, tests/peers/sdk_server.py and contents_server.py: a peer that cannot
start is left out and said so), and the 10,000 tools of bench/tool_catalog.py on 100 in-memory
servers (kxen-testing's memory transport). ``Runtime.search_tools`` ranks; a query counts as found
at k when one of its expected tools is among the first k. Context is the compact JSON of what
the model is shown, in tokens as ``toolTokens`` counts them (characters / 4): every tool, against
the list with search on (kxen's tools and ``kxen_search_tools``) and one search's answer.
See docs/config.md, "Tool search".
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from tool_catalog import generated_catalog  # noqa: E402

QUERIES = HERE / "tool_search_queries.json"
EVERYTHING = ROOT / "tests" / "peers" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"


def tokens(value: Any) -> int:
    return -(-len(json.dumps(value, ensure_ascii=False, separators=(",", ":"))) // 4)


def peer_servers() -> tuple[dict[str, Any], list[str]]:
    servers = {
        "demo": {"command": sys.executable, "args": [str(ROOT / "demo" / "server.py")]},
        "sdk": {"command": sys.executable, "args": [str(ROOT / "tests" / "peers" / "sdk_server.py"), "stdio"]},
        "contents": {"command": sys.executable, "args": [str(ROOT / "tests" / "peers" / "contents_server.py")]},
    }
    missing = []
    node, js = shutil.which("node"), EVERYTHING / "index.js"
    if node and js.exists():
        servers["ev"] = {"command": node, "args": [str(js), "stdio"]}
    else:
        missing.append("ev (server-everything: run npm ci in tests/peers)")
    return servers, missing


async def measure(rt: Any, queries: list[dict[str, Any]], reps: int) -> dict[str, Any]:
    """Recall, context and timings of ``queries`` over the tools of the running ``rt``."""
    from kxen_core.runtime import search_tools

    started = time.perf_counter()
    rt.search_tools("warm up the index")
    build_ms = (time.perf_counter() - started) * 1000
    at1 = at5 = 0
    misses = []
    for q in queries:
        found = [t["qualifiedName"] for t in rt.search_tools(q["query"], limit=5)]
        hit = [i for i, name in enumerate(found) if name in q["expect"]]
        at1 += bool(hit and hit[0] == 0)
        at5 += bool(hit)
        if not hit or hit[0]:
            misses.append({"query": q["query"], "expect": q["expect"][0], "got": found[:3]})
    latencies = []
    for _ in range(reps):
        for q in queries:
            t0 = time.perf_counter()
            rt.search_tools(q["query"], limit=5)
            latencies.append((time.perf_counter() - t0) * 1000)
    answers, agent_ms = [], []
    for q in queries:
        t0 = time.perf_counter()
        out = await rt.agent_call(search_tools.SEARCH_TOOL, {"query": q["query"]})
        agent_ms.append((time.perf_counter() - t0) * 1000)
        answers.append(-(-len(out.text) // 4))
    full = [{k: v for k, v in t.items() if k != "deferred"} for t in rt.tools(with_deferred=True)]
    shown = rt.tools()
    state = rt.tool_search_state()
    return {
        "tools": state["tools"],
        "queries": len(queries),
        "recall_at_1": at1 / len(queries),
        "recall_at_5": at5 / len(queries),
        "full_list_tokens": tokens(full),
        "search_on_list_tokens": tokens(shown),
        "search_answer_tokens_median": statistics.median(answers),
        "index_build_ms": build_ms,
        "search_ms_median": statistics.median(latencies),
        "search_ms_p95": sorted(latencies)[int(0.95 * (len(latencies) - 1))],
        "agent_call_ms_median": statistics.median(agent_ms),
        "misses": misses,
    }


async def peers_run(queries: list[dict[str, Any]], reps: int) -> dict[str, Any]:
    from kxen_core import Runtime
    from kxen_core.plugins import make_plugin_manager

    servers, missing = peer_servers()
    with tempfile.TemporaryDirectory() as home:
        pm = make_plugin_manager(allow=["stdio"])
        settings = {"tool_search": {"enabled": "on"}}
        async with Runtime(home=home, workspace=home, servers={"mcpServers": servers}, settings=settings, pm=pm) as rt:
            await rt.wait_ready(60)
            down = [s["name"] for s in rt.status() if s["state"] != "ready"]
            wanted = [q for q in queries if all(e.split("__")[0] in servers for e in q["expect"][:1])]
            out = await measure(rt, wanted, reps)
    out["left_out"] = missing + down
    return out


async def generated_run(queries: list[dict[str, Any]], reps: int) -> dict[str, Any]:
    from kxen_testing import FakeServer, clear_fakes, mem, register_fake

    from kxen_core import Runtime
    from kxen_core.plugins import make_plugin_manager

    by_server: dict[str, list[dict[str, Any]]] = {}
    for t in generated_catalog():
        by_server.setdefault(t["server"], []).append(
            {"name": t["name"], "description": t["description"], "inputSchema": t["inputSchema"]}
        )
    servers = {}
    for server, defs in by_server.items():
        register_fake(f"gen-{server}", FakeServer(tool_defs=defs))
        servers[server] = mem(f"gen-{server}", pinning="off")
    try:
        with tempfile.TemporaryDirectory() as home:
            pm = make_plugin_manager(allow=["memory"])
            async with Runtime(home=home, workspace=home, servers={"mcpServers": servers}, settings={}, pm=pm) as rt:
                await rt.wait_ready(120)
                return await measure(rt, queries, reps)
    finally:
        clear_fakes()


def run(reps: int = 20) -> dict[str, Any]:
    """Both catalogs measured: ``{"peers": {...}, "generated": {...}}``."""
    labelled = json.loads(QUERIES.read_text())

    async def both() -> dict[str, Any]:
        return {
            "peers": await peers_run(labelled["peers"], reps),
            "generated": await generated_run(labelled["generated"], reps),
        }

    return anyio.run(both)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=20, help="times each query is searched for the latency")
    ap.add_argument("--json", dest="json_out", help="write the figures here")
    opts = ap.parse_args(argv)
    figures = run(opts.reps)
    for name, f in figures.items():
        print(f"{name}: {f['tools']:,} tools, {f['queries']} queries")
        print(f"  recall@1 {f['recall_at_1']:.0%}   recall@5 {f['recall_at_5']:.0%}")
        print(
            f"  context: every tool {f['full_list_tokens']:,} tokens; search on: list {f['search_on_list_tokens']:,}"
            f" + {f['search_answer_tokens_median']:,.0f} per search (median)"
        )
        print(
            f"  index build {f['index_build_ms']:.1f} ms; search median {f['search_ms_median']:.2f} ms"
            f" (p95 {f['search_ms_p95']:.2f}); kxen_search_tools call median {f['agent_call_ms_median']:.2f} ms"
        )
        for m in f["misses"]:
            print(f"  not first: {m['query']!r} -> {m['got']} (expected {m['expect']})")
        if f.get("left_out"):
            print(f"  left out: {', '.join(f['left_out'])}")
    if opts.json_out:
        Path(opts.json_out).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

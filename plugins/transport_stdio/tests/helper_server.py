#!/usr/bin/env python3
"""A stdlib-only MCP server for the stdio transport tests.

Flags: ``--ignore-term`` (SIG_IGN for SIGTERM, inherited by children), ``--ignore-eof`` (keep running
after stdin closes), ``--stderr TEXT`` (written to stderr at start), ``--startup-noise`` (a non-JSON
stdout line before anything else), ``--deaf`` (after initialize, stop reading stdin).
Tools: environ, echo, spawn, spawn_marked, hang, die, noise, big, stderr_flood.

``spawn_marked`` starts a sleeper carrying this process's ``--owner`` mark (so the tests can find
and, if need be, kill it): ``mode`` "child" (stays in our group), "setsid" (its own session),
"doublefork" (its own session, then forked twice: an orphan that no longer descends from us);
``ignore_term`` makes it ignore SIGTERM; with ``hang`` no answer is sent (the call never ends);
``pidfile`` names a file the sleeper's pid is written to once it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

TOOLS = [
    {"name": n, "inputSchema": {"type": "object"}}
    for n in ("environ", "echo", "spawn", "spawn_marked", "hang", "die", "noise", "big", "stderr_flood")
]


SLEEPER = """
import os, signal, sys, time
mode, ignore = sys.argv[2], sys.argv[3] == "1"
if ignore:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode in ("setsid", "doublefork"):
    os.setsid()
if mode == "doublefork":
    if os.fork():
        os._exit(0)
    if os.fork():
        os._exit(0)
sys.stdout.write(f"{os.getpid()}\\n")
sys.stdout.flush()
os.close(1)
time.sleep(1000)
"""


def spawn_marked(owner: str, mode: str, ignore_term: bool) -> int:
    p = subprocess.Popen(
        [sys.executable, "-c", SLEEPER, f"--owner={owner}", mode, "1" if ignore_term else "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    pid = int(p.stdout.readline())
    p.stdout.close()
    if mode == "doublefork":
        p.wait()  # the first fork is gone: the sleeper is an orphan
    return pid


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ignore-term", action="store_true")
    ap.add_argument("--ignore-eof", action="store_true")
    ap.add_argument("--stderr", default="")
    ap.add_argument("--startup-noise", action="store_true")
    ap.add_argument("--deaf", action="store_true")
    ap.add_argument("--owner", help="ignored: marks the process as started by one test run")
    opts = ap.parse_args()
    if opts.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if opts.stderr:
        sys.stderr.write(opts.stderr)
        sys.stderr.flush()
    out = sys.stdout.buffer

    def raw(data: bytes) -> None:
        out.write(data)
        out.flush()

    def reply(rid, result) -> None:
        raw(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}, separators=(",", ":")).encode() + b"\n")

    def text(rid, value: str, structured=None) -> None:
        result = {"content": [{"type": "text", "text": value}]}
        if structured is not None:
            result["structuredContent"] = structured
        reply(rid, result)

    if opts.startup_noise:
        raw(b"starting up (not JSON)\n")

    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if rid is None:
            continue
        if method == "initialize":
            reply(
                rid,
                {
                    "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "helper", "version": "0"},
                },
            )
            if opts.deaf:
                time.sleep(3600)
        elif method == "tools/list":
            reply(rid, {"tools": TOOLS})
        elif method == "tools/call":
            name, args = params.get("name"), params.get("arguments") or {}
            if name == "environ":
                info = {
                    "env": dict(os.environ),
                    "cwd": os.getcwd(),
                    "executable": sys.executable,
                    "prefix": sys.prefix,
                    "pid": os.getpid(),
                    "pgid": os.getpgid(0),
                    "sid": os.getsid(0),
                }
                text(rid, "environ", info)
            elif name == "echo":
                text(rid, str(args.get("text", "")))
            elif name == "spawn":
                # two `sleep 1000` grandchildren through sh -c; they keep our stderr open
                p = subprocess.Popen(
                    ["sh", "-c", "sleep 1000 & echo $!; sleep 1000 & echo $!; wait"],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                )
                pids = [p.pid] + [int(p.stdout.readline()) for _ in range(2)]
                text(rid, "spawned", {"pids": pids})
            elif name == "spawn_marked":
                pid = spawn_marked(opts.owner or "", str(args.get("mode", "child")), bool(args.get("ignore_term")))
                if args.get("pidfile"):  # for a call that never answers: where the test finds the pid
                    with open(str(args["pidfile"]) + ".tmp", "w") as f:
                        f.write(str(pid))
                    os.replace(str(args["pidfile"]) + ".tmp", str(args["pidfile"]))
                if not args.get("hang"):
                    text(rid, "spawned", {"pid": pid})
            elif name == "hang":
                pass
            elif name == "die":
                sys.stderr.write(str(args.get("message", "dying")))
                sys.stderr.flush()
                os._exit(int(args.get("code", 3)))
            elif name == "noise":
                size = int(args.get("size", 5000))
                raw(b"print() debugging output\n")
                raw(b"{broken json\n")
                raw(b"x" * size + b"\n")
                raw(b"\r\n\n")
                if args.get("deep"):
                    raw(b"[" * 200000 + b"]" * 200000 + b"\n")
                text(rid, "after noise")
            elif name == "deep_reply":  # a reply too deeply nested to decode, its id first or last
                deep = b"[" * 200000 + b"]" * 200000
                head = b'{"jsonrpc":"2.0",'
                if args.get("id_last"):
                    raw(head + b'"result":' + deep + b',"id":' + str(rid).encode() + b"}\n")
                else:
                    raw(head + b'"id":' + str(rid).encode() + b',"result":' + deep + b"}\n")
            elif name == "big":
                text(rid, "y" * int(args.get("size", 1 << 20)))
            elif name == "stderr_flood":
                chunk = b"e" * 1023 + b"\n"
                for _ in range(int(args.get("kib", 100))):
                    sys.stderr.buffer.write(chunk)
                sys.stderr.flush()
                text(rid, "flooded")
            else:
                raw(
                    json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no tool"}}).encode()
                    + b"\n"
                )
        elif method == "ping":
            reply(rid, {})
        else:
            raw(
                json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no method"}}).encode()
                + b"\n"
            )
    if opts.ignore_eof:
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()

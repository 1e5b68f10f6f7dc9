"""A stdio MCP server (stdlib only) whose one tool runs as a 2025-11-25 task, well or badly
(tests/test_tasks_peers.py).

Tools: ``slow`` (``taskSupport: required``) and ``maybe`` (``optional``: at once without ``task``).

Usage: ``python task_peer.py MODE --state FILE`` with MODE one of

* ``finishes``: the task works for ``seconds`` (an argument, default 1) after it was created, then
  completes with ``done: <text>``;
* ``never``: the task never ends (``working`` at every ``tasks/get``);
* ``flood``: like ``finishes``, and each ``tasks/get`` is preceded by ``FLOOD`` status notifications;
* ``loses``: the task is created, then every ``tasks/get`` answers "task not found";
* ``fails``: the task fails once its time is up; ``tasks/result`` then gives the tool's ``isError``
  result when ``text`` is ``kept``, else an error;
* ``drops``: the server cancels the task itself once its time is up.

FILE (JSON, created when missing) keeps the tasks (id -> created, text), so a second process
started on the same FILE knows them (a restart), and ``requests``: every request method the peer
got, in order, with its ``taskId`` when it had one (what the tests read to see the wire).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

FLOOD = 2000
TOOL = {
    "name": "slow",
    "description": "Works for a while, as a task.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}, "seconds": {"type": "number"}}},
    "execution": {"taskSupport": "required"},
}

#: the same work, as a task only when the client asks for one
MAYBE = {**TOOL, "name": "maybe", "execution": {"taskSupport": "optional"}}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class Peer:
    def __init__(self, mode: str, state: Path) -> None:
        self.mode = mode
        self.path = state
        self.state = json.loads(state.read_text()) if state.exists() else {"tasks": {}, "requests": []}

    def save(self) -> None:
        self.path.write_text(json.dumps(self.state))

    def task(self, task_id: str) -> dict[str, Any]:
        known = self.state["tasks"][task_id]
        status, message = known.get("status", "working"), None
        if status == "working" and self.mode != "never":
            left = known["created"] + known["seconds"] - time.time()
            ended = {"fails": "failed", "drops": "cancelled"}.get(self.mode, "completed")
            status = ended if left <= 0 else "working"
            # a server that quotes its credential (API_TOKEN in its env) in a status message
            leak = f" with {os.environ['API_TOKEN']}" if os.environ.get("API_TOKEN") else ""
            message = None if left <= 0 else f"{known['text']}{leak}: {left:.1f} s to go"
        return {
            "taskId": task_id,
            "status": status,
            "statusMessage": message,
            "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:00Z",
            "ttl": 60000,
            "pollInterval": 100,  # below kxen's floor: it polls at its minimum
        }

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "initialize":
            return {
                "protocolVersion": "2025-11-25",
                "capabilities": {
                    "tools": {},
                    "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
                },
                "serverInfo": {"name": "kxen-task-peer", "version": "1"},
            }
        if method == "tools/list":
            return {"tools": [TOOL, MAYBE]}
        if method == "tools/call":
            if "task" not in params and params.get("name") == "maybe":
                return {"content": [{"type": "text", "text": f"now: {(params.get('arguments') or {}).get('text')}"}]}
            if "task" not in params:
                raise LookupError("slow requires task augmentation")
            task_id = uuid.uuid4().hex
            args = params.get("arguments") or {}
            self.state["tasks"][task_id] = {
                "created": time.time(),
                "seconds": float(args.get("seconds", 1)),
                "text": str(args.get("text", "")),
            }
            return {"task": self.task(task_id)}
        if method == "tasks/list":
            return {"tasks": [self.task(task_id) for task_id in self.state["tasks"]]}
        task_id = params.get("taskId")
        if task_id not in self.state["tasks"] or (self.mode == "loses" and method != "tasks/cancel"):
            raise KeyError(f"task not found: {task_id}")
        if method == "tasks/get":
            if self.mode == "flood":
                note = {**self.task(task_id), "statusMessage": "flooding"}
                for _ in range(FLOOD):
                    send({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": note})
            return self.task(task_id)
        if method == "tasks/cancel":
            self.state["tasks"][task_id]["status"] = "cancelled"
            return {**self.task(task_id), "statusMessage": "cancelled by the client"}
        if method == "tasks/result":
            task = self.task(task_id)
            if task["status"] == "failed" and self.state["tasks"][task_id]["text"] == "kept":
                return {"content": [{"type": "text", "text": "it broke"}], "isError": True}
            if task["status"] != "completed":
                raise KeyError(f"task {task_id} is {task['status']}")
            text = self.state["tasks"][task_id]["text"]
            return {"content": [{"type": "text", "text": f"done: {text}"}]}
        raise NotImplementedError(method)

    def serve(self) -> None:
        for line in sys.stdin:
            message = json.loads(line)
            method, rid = message.get("method"), message.get("id")
            if rid is None:  # a notification
                continue
            params = message.get("params") or {}
            self.state["requests"].append([method, params.get("taskId")])
            try:
                reply = {"jsonrpc": "2.0", "id": rid, "result": self.answer(method, params)}
            except NotImplementedError:
                reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}}
            except (KeyError, LookupError) as exc:
                reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": str(exc).strip("'\"")}}
            self.save()
            send(reply)


if __name__ == "__main__":
    args = sys.argv[1:]
    Peer(args[0], Path(args[args.index("--state") + 1])).serve()

"""A stdio MCP server of the 2026-07-28 era (stdlib only) that offers the tasks extension
(``io.modelcontextprotocol/tasks``, SEP-2663) as the conformance harness's ``tasks-*`` scenarios
state it (tests/test_tasks_modern_peers.py).

Usage: ``python tasks_ext_peer.py --state FILE``. No handshake: ``server/discover`` offers the
extension; every result carries ``resultType``. Tools (the harness's fixtures): ``greet`` (sync),
``slow_compute`` (``seconds``, ``label``: a task that completes after ``seconds``), ``confirm_delete``
(``filename``: a task that asks for an ``elicitation/create`` through ``tasks/get``'s
``inputRequests`` and resumes on ``tasks/update``), ``failing_job`` (completes with an ``isError``
result), ``protocol_error_job`` (fails with an inlined ``error``). A task tool called by a client
that did not declare the extension gets ``-32021``. ``tasks/result`` and ``tasks/list`` do not
exist (``-32601``). FILE (JSON) records every request: method, taskId, whether it carried a
``task`` hint, whether its ``_meta`` declared the extension.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

EXT = "io.modelcontextprotocol/tasks"
OBJECT = {"type": "object"}
TOOLS = [
    {"name": "greet", "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}}},
    {"name": "slow_compute", "inputSchema": OBJECT},
    {"name": "confirm_delete", "inputSchema": OBJECT},
    {"name": "failing_job", "inputSchema": OBJECT},
    {"name": "protocol_error_job", "inputSchema": OBJECT},
]
STAMP = "2026-01-01T00:00:00Z"


class Refused(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class Peer:
    def __init__(self, state: Path) -> None:
        self.path = state
        self.tasks: dict[str, dict[str, Any]] = {}
        self.requests: list[dict[str, Any]] = []

    def save(self) -> None:
        self.path.write_text(json.dumps({"requests": self.requests}))

    def detail(self, task_id: str) -> dict[str, Any]:
        task = self.tasks[task_id]
        out: dict[str, Any] = {
            "resultType": "complete",
            "taskId": task_id,
            "createdAt": STAMP,
            "lastUpdatedAt": STAMP,
            "ttlMs": 60000,
            "pollIntervalMs": 100,
        }
        tool, status = task["tool"], task.get("status")
        if status == "cancelled":
            return {**out, "status": "cancelled"}
        if tool == "confirm_delete" and "answer" not in task:
            request = {
                "method": "elicitation/create",
                "params": {
                    "message": f"Delete {task['args'].get('filename')}?",
                    "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}},
                },
            }
            return {**out, "status": "input_required", "inputRequests": {"confirm": request}}
        if time.time() < task["created"] + float(task["args"].get("seconds", 0.5)):
            return {**out, "status": "working", "statusMessage": "computing"}
        if tool == "protocol_error_job":
            return {**out, "status": "failed", "error": {"code": -32603, "message": "the job broke"}}
        if tool == "failing_job":
            result = {"content": [{"type": "text", "text": "the job reported an error"}], "isError": True}
        elif tool == "confirm_delete":
            answer = task["answer"]
            done = answer.get("action") == "accept" and (answer.get("content") or {}).get("confirm") is True
            text = f"deleted {task['args'].get('filename')}" if done else "kept"
            result = {"content": [{"type": "text", "text": text}]}
        else:
            result = {"content": [{"type": "text", "text": f"computed: {task['args'].get('label')}"}]}
        return {**out, "status": "completed", "result": {"resultType": "complete", **result}}

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        meta = params.get("_meta") or {}
        caps = meta.get("io.modelcontextprotocol/clientCapabilities") or {}
        declared = EXT in (caps.get("extensions") or {})
        if method == "server/discover":
            return {
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}, "extensions": {EXT: {}}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "kxen-tasks-ext-peer", "version": "1"}},
            }
        if method == "tools/list":
            return {"resultType": "complete", "tools": TOOLS, "ttlMs": 3600000, "cacheScope": "private"}
        if method == "tools/call":
            name, args = params.get("name"), params.get("arguments") or {}
            if name == "greet":
                return {"resultType": "complete", "content": [{"type": "text", "text": f"Hello, {args.get('name')}!"}]}
            if not declared:
                need = {"requiredCapabilities": {"extensions": {EXT: {}}}}
                raise Refused(-32021, f"{name} runs as a task: declare {EXT}", need)
            task_id = uuid.uuid4().hex
            self.tasks[task_id] = {"tool": name, "args": args, "created": time.time()}
            created = {k: v for k, v in self.detail(task_id).items() if k not in ("result", "error", "inputRequests")}
            return {**created, "resultType": "task", "status": "working"}
        if method in ("tasks/get", "tasks/update", "tasks/cancel"):
            task_id = params.get("taskId")
            if task_id not in self.tasks:
                raise Refused(-32602, f"unknown task {task_id}")
            if method == "tasks/update":
                responses = params.get("inputResponses") or {}
                if "confirm" in responses:
                    self.tasks[task_id]["answer"] = responses["confirm"]
                return {"resultType": "complete"}
            if method == "tasks/cancel":
                self.tasks[task_id]["status"] = "cancelled"
                return {"resultType": "complete"}
            return self.detail(task_id)
        raise Refused(-32601, f"Method not found: {method}")

    def serve(self) -> None:
        for line in sys.stdin:
            message = json.loads(line)
            method, rid = message.get("method"), message.get("id")
            if rid is None:
                continue
            params = message.get("params") or {}
            caps = (params.get("_meta") or {}).get("io.modelcontextprotocol/clientCapabilities") or {}
            self.requests.append(
                {
                    "method": method,
                    "taskId": params.get("taskId"),
                    "hint": "task" in params,
                    "declared": EXT in (caps.get("extensions") or {}),
                }
            )
            try:
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "result": self.answer(method, params)}
            except Refused as exc:
                error: dict[str, Any] = {"code": exc.code, "message": exc.message}
                if exc.data is not None:
                    error["data"] = exc.data
                reply = {"jsonrpc": "2.0", "id": rid, "error": error}
            self.save()
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    args = sys.argv[1:]
    Peer(Path(args[args.index("--state") + 1])).serve()

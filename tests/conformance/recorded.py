"""Runs tests/conformance/client.py and records how it ended, for the harness runs of
tests/test_conformance.py.

A suite run (``--suite``) of the harness judges each scenario by its checks alone and prints no
client exit code per scenario; the solo rule also fails a scenario whose client exited non-zero or
was cut off at ``--timeout``. So the harness runs ``recorded.py`` instead of ``client.py``; this
wrapper runs the client with the same argv, environment, stdin, stdout and stderr, then writes one
JSON record to ``$KXEN_CONFORMANCE_RECORDS/<scenario>.json``:

* ``exit``: the client's exit code (negative: the signal that ended it);
* ``cut_off``: whether the harness gave up on the client first. The harness kills the shell it
  started the command in only when ``--timeout`` passes, so the wrapper's parent is gone by then;
* ``context``: ``MCP_CONFORMANCE_CONTEXT`` as the harness handed it (the credentials no output may
  show).

It exits with the client's code, so the harness sees what it would have seen of the client.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CLIENT = Path(__file__).resolve().parent / "client.py"


def record_path(records: Path, scenario: str) -> Path:
    """Where the record of ``scenario`` goes (``auth/x`` -> ``auth__x.json``)."""
    return records / f"{scenario.replace('/', '__')}.json"


def main() -> int:
    parent = os.getppid()
    code = subprocess.call([sys.executable, str(CLIENT), *sys.argv[1:]])
    records = os.environ.get("KXEN_CONFORMANCE_RECORDS")
    if records:
        scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
        record = {
            "scenario": scenario,
            "exit": code,
            "cut_off": os.getppid() != parent,
            "context": os.environ.get("MCP_CONFORMANCE_CONTEXT"),
        }
        path = record_path(Path(records), scenario)
        path.write_text(json.dumps(record), encoding="utf-8")
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())

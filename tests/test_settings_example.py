"""examples/settings_host.py, the documented way a host serves the Settings page over its own
runtime, run as a person would: it prints the URL, the page and its live stream answer through
the secret's cookie with the real demo server ready, and Ctrl-C ends it with every server closed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from support import demo_entry

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "settings_host.py"
WAIT = 30


def _until(predicate, what: str):
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_host_example_serves_the_page_and_closes_its_servers(kxen_home, ws):
    kxen_home.write_servers({"demo": demo_entry()})
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--home", str(kxen_home.path), "--workspace", str(ws)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("Settings: http://127.0.0.1:"), line
        url = line.split()[1]
        with httpx.Client(timeout=WAIT) as client:
            assert client.get(url).status_code == 303  # the secret, exchanged for the cookie
            base = url.split("?")[0]

            def ready():
                snap = client.get(base + "api/snapshot").json()["snapshot"]
                return snap["servers"] and snap["servers"][0]["state"] == "ready" and snap

            snap = _until(ready, "the demo server to be ready")
            pid = snap["servers"][0]["transportInfo"]["pid"]
            page = client.get(base)
            assert page.status_code == 200 and "demo" in page.text and "Ready" in page.text
            with client.stream("GET", base + "events") as events:
                assert next(events.iter_lines()) == "event: render"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=WAIT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=WAIT)
        proc.stdout.close()
    _until(lambda: not _alive(pid), "the demo server to be closed")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True

"""``kxen -v`` logs each phase of each server's start and each call with its time; ``-vv`` adds the
JSON-RPC traffic, secrets scrubbed and bodies bounded; ``--log-file`` gets the same; and with
logging off nothing is added to the call path."""

from __future__ import annotations

import json
import logging
import re
import shutil

import pytest
from kxen_testing import mem, text_result
from support import demo_entry

from kxen_core.protocol import traffic

SECRET = "sk-live-logtest-0123456789"
PHASES = [
    r"d: gate passed: user server, stdio, runs \S+",
    r"d: connecting at [\d.]+ ms",
    r"d: transport stdio open in [\d.]+ ms \(pid \d+\)",
    r"d: initializing at [\d.]+ ms",
    r"d: protocol era: ",
    r"d: initialized in [\d.]+ ms: protocol \S+ \(handshake era\), server kxen-demo ",
    r"d: listing at [\d.]+ ms",
    r"d: listed 4 tools in [\d.]+ ms",
    r"d: ready at [\d.]+ ms",
    r"call d/add: ok in [\d.]+ ms",
]


@pytest.fixture
def demo(kxen_home, monkeypatch, tmp_path):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    monkeypatch.chdir(tmp_path)
    # egressGuard off: the test sends the secret on purpose (the guard itself: tests/test_argument_guard.py)
    kxen_home.write_servers({"d": demo_entry(env={"API_TOKEN": SECRET}, defaultToolPolicy="allow", egressGuard="off")})


def in_order(text: str, patterns: list[str]) -> None:
    at = 0
    for pattern in patterns:
        found = re.compile(pattern).search(text, at)
        assert found, f"{pattern!r} not logged after position {at}:\n{text}"
        at = found.end()


def test_v_logs_every_phase_and_the_call_with_times(kx, demo):
    code, out, err = kx("-v", "mcp", "call", "d", "add", "--args", '{"a": 1, "b": 2}')
    assert code == 0, err
    assert json.loads(out) == {"sum": 3}
    in_order(err, PHASES)
    assert " kxen.server INFO " in err and " kxen.calls INFO " in err
    assert "kxen.traffic" not in err, "-v logs the steps, not the messages"
    assert SECRET not in err


def test_vv_adds_the_traffic_scrubbed_and_bounded(kx, demo):
    long_text = "x" * 5000
    code, _, err = kx("-vv", "mcp", "call", "d", "echo", "--args", json.dumps({"text": f"{SECRET} {long_text}"}))
    assert code in (0, 1), err
    sent = [line for line in err.splitlines() if "kxen.traffic DEBUG d -> " in line]
    received = [line for line in err.splitlines() if "kxen.traffic DEBUG d <- " in line]
    assert any('"method":"initialize"' in line for line in sent) and any('"serverInfo"' in line for line in received)
    [call] = [line for line in sent if '"method":"tools/call"' in line]
    assert "***" in call and SECRET not in err, "a configured secret never reaches the log"
    assert re.search(r"\.\.\. \(cut: \d+ characters\)$", call) and len(call) < traffic.MAX_BODY_CHARS + 200


def test_a_log_file_holds_the_steps_not_only_hook_lines(kx, demo, tmp_path):
    log_file = tmp_path / "kxen.log"
    code, _, err = kx("--log-file", str(log_file), "mcp", "call", "d", "add", "--args", '{"a": 1, "b": 2}')
    assert code == 0, err
    text = log_file.read_text()
    in_order(text, PHASES)
    assert "kxen.traffic DEBUG d -> " in text and SECRET not in text
    assert "kxen.server" not in err, "without -v nothing is logged to the terminal"


def test_with_logging_off_the_call_path_is_the_plain_one(kxen_home, ws, fakes):
    """No traffic wrapper around the stream, no timed call: the hot path has nothing added."""
    import anyio

    from kxen_core import Runtime

    async def main() -> None:
        fakes.add("f", tools={"echo": lambda a: text_result("hi")})
        kxen_home.write_servers({"m": mem("f", toolPolicies={"echo": "allow"})})
        async with Runtime(home=kxen_home.path, workspace=ws) as rt:
            with anyio.fail_after(10):
                assert await rt.wait_ready()
            session = rt.servers["m"].session
            assert session is not None and not isinstance(session._stream, traffic.TrafficLog)

            async def refuse(*a, **k):
                raise AssertionError("the timed call path was taken with logging off")

            rt._timed_call_tool = refuse
            result = await rt.call_tool("m__echo", {})
            assert result["content"][0]["text"] == "hi"

    assert not logging.getLogger("kxen").isEnabledFor(logging.INFO)
    anyio.run(main)


def test_traffic_body_is_bounded_scrubbed_and_never_raises():
    assert traffic.body({"a": "tok-1234"}, lambda t: t.replace("tok-1234", "***")) == '{"a":"***"}'
    cut = traffic.body({"a": "y" * 10_000})
    assert len(cut) < traffic.MAX_BODY_CHARS + 40 and cut.endswith("(cut: 10008 characters)")
    nested: list = []
    for _ in range(100_000):
        nested = [nested]
    assert "not shown" in traffic.body(nested)
    assert traffic.body({"b": b"raw"}) == '{"b":"<bytes>"}'


def test_v_logs_the_phases_of_a_real_server(kx, kxen_home, monkeypatch, everything_js, tmp_path):
    """The twin against server-everything: each listing it declares is logged with its count."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "stdio")
    kxen_home.write_servers({"ev": {"command": node, "args": [everything_js, "stdio"], "defaultToolPolicy": "allow"}})
    code, _, err = kx("-v", "mcp", "call", "ev", "echo", "--args", '{"message": "hi"}', "--wait", "60")
    assert code == 0, err
    in_order(
        err,
        [
            r"ev: transport stdio open in [\d.]+ ms \(pid \d+\)",
            r"ev: initialized in [\d.]+ ms: protocol \S+ \(\w+ era\), server \S+",
            r"ev: listed \d+ tools in [\d.]+ ms",
            r"ev: ready at [\d.]+ ms",
            r"call ev/echo: ok in [\d.]+ ms",
        ],
    )
    assert re.search(r"ev: listed \d+ resources in [\d.]+ ms", err) and re.search(r"ev: listed \d+ prompts", err)

"""A hostile server over stdio (tests/hostile/contents_server.py): whatever it sends, no output over
the bound and no binary payload reaches the agent, and a failing prompt check sends nothing."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import anyio
import pytest
from kxen_testing import running

from kxen_core.runtime.kxen_tools import GET_PROMPT, LIST_PROMPTS, LIST_RESOURCES, LIST_TEMPLATES, READ_RESOURCE

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).parent / "hostile" / "contents_server.py"
LIMIT = 50_000
CALL_SECONDS = 60
#: the base64 of every payload the server sends (bytes 0x89, 0x01, 0xfe, 0x7f, 0x02, 0x03 repeated)
PAYLOADS = ("iYmJ", "AQEB", "/v7+", "f39/", "AgIC", "AwMD")
BASE64_RUN = re.compile("|".join(f"(?:{re.escape(p)}){{20}}" for p in PAYLOADS))


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "received.jsonl"


def received(log: Path) -> list[str]:
    return [json.loads(line).get("method", "") for line in log.read_text().splitlines()]


@pytest.fixture
async def rt(kxen_home, tmp_path, log):
    entry = {
        "command": sys.executable,
        "args": [str(SERVER), "--log", str(log)],
        "defaultToolPolicy": "allow",
        "timeouts": {"requestSeconds": CALL_SECONDS},
    }
    async with running(kxen_home, tmp_path, servers={"h": entry}, allow=("stdio",), wait=30) as runtime:
        assert runtime.status()[0]["state"] == "ready", runtime.status()
        yield runtime


def check(text: str) -> None:
    assert len(text) <= LIMIT
    assert not BASE64_RUN.search(text), "a binary payload reached the agent"


@pytest.mark.parametrize("tool", ["huge", "blocks", "media", "structured", "error"])
async def test_no_tool_result_over_the_bound_and_no_binary(rt, tool):
    with anyio.fail_after(CALL_SECONDS):
        out = await rt.agent_call(f"h__{tool}", {})
    check(out.text)
    assert out.is_error is (tool == "error")
    if tool == "media":
        assert [(r.kind, r.size) for r in out.binary] == [("image", 2 << 20), ("audio", 1 << 20), ("blob", 3 << 20)]
        assert not out.truncated and len(out.binary_data(2)) == 3 << 20
    else:
        assert out.truncated and out.original_chars > LIMIT


@pytest.mark.parametrize("uri", ["huge://text", "huge://blob", "huge://many"])
async def test_no_read_over_the_bound_and_no_binary(rt, uri):
    with anyio.fail_after(CALL_SECONDS):
        out = await rt.agent_call(READ_RESOURCE, {"server": "h", "uri": uri})
    check(out.text)
    assert not out.is_error
    if uri == "huge://blob":
        assert out.binary[0].size == 12 << 20 and out.binary[0].mime_type == "text/plain" and not out.truncated


async def test_listings_and_a_huge_prompt_stay_bounded(rt, log):
    for tool in (LIST_RESOURCES, LIST_TEMPLATES, LIST_PROMPTS):
        out = await rt.agent_call(tool, {})
        check(out.text)
        assert not out.is_error and json.loads(out.text)["nextCursor"] is None
    with anyio.fail_after(CALL_SECONDS):
        out = await rt.agent_call(GET_PROMPT, {"server": "h", "name": "big", "arguments": {"topic": "x"}})
    check(out.text)
    assert out.truncated and out.binary[0].size == 2 << 20
    assert received(log).count("prompts/get") == 1


@pytest.mark.parametrize(
    "arguments",
    [{}, {"topic": "x", "extra": "y"}, {"topic": 1}, {"topic": ["x"]}],
    ids=["missing", "unknown", "number", "list"],
)
async def test_a_failing_prompt_check_never_reaches_the_server(rt, log, arguments):
    out = await rt.agent_call(GET_PROMPT, {"server": "h", "name": "big", "arguments": arguments})
    assert out.is_error and out.text.startswith("InvalidArguments: ")
    await rt.agent_call("h__blocks", {})  # a later request: the log has caught up with what was sent
    methods = received(log)
    assert "tools/call" in methods and "prompts/get" not in methods

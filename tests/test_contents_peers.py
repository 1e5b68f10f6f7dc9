"""Resources, templates, prompts and binary contents against real peers: server-everything in both
pinned versions (stdio, and the current one over Streamable HTTP) and a server on the official
Python SDK (tests/peers/contents_server.py). Twins of tests/test_contents.py."""

from __future__ import annotations

import base64
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from kxen_testing import running
from remote_support import remote_on

from kxen_core.runtime.kxen_tools import GET_PROMPT, LIST_PROMPTS, LIST_RESOURCES, LIST_TEMPLATES, READ_RESOURCE

pytestmark = [pytest.mark.anyio, pytest.mark.peer]

CONTENTS_SERVER = Path(__file__).parent / "peers" / "contents_server.py"
WAIT = 30
CALL_SECONDS = 20
#: the tools server-everything 2026.8.31 always registers (more come after initialize)
EVERYTHING_TOOLS = {
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
}


def node() -> str:
    path = shutil.which("node")
    if path is None:
        pytest.skip("node is not on PATH")
    return path


def stdio_entry(*argv: str) -> dict[str, Any]:
    return {
        "command": argv[0],
        "args": list(argv[1:]),
        "defaultToolPolicy": "allow",
        "timeouts": {"requestSeconds": CALL_SECONDS},
    }


def agent_json(out: Any) -> Any:
    assert not out.is_error, out.text
    return json.loads(out.text)


async def page_all(rt: Any, tool: str, field: str, **args: Any) -> tuple[list[dict[str, Any]], int]:
    items: list[dict[str, Any]] = []
    cursor = None
    for pages in range(1, 101):  # bounded
        page = agent_json(await rt.agent_call(tool, {**args, **({"cursor": cursor} if cursor else {})}))
        items.extend(page[field])
        cursor = page["nextCursor"]
        if cursor is None:
            return items, pages
    raise AssertionError("the cursor never ended")


def no_payload(text: str, payload: str) -> None:
    assert payload[:40] not in text, "a binary payload reached the agent"


# --- server-everything 2025.9.25: 100 resources in pages of 10 -----------------------------------


async def test_old_everything_every_resource_is_found_and_read(kxen_home, tmp_path, everything_old_js):
    entry = stdio_entry(node(), everything_old_js, "stdio")
    async with running(kxen_home, tmp_path, servers={"ev": entry}, allow=("stdio",), wait=WAIT) as rt:
        server = rt.servers["ev"]
        assert server.state == "ready", server.snapshot()
        assert server.catalogs["resources"].pages == 10 and server.catalogs["resources"].complete
        items, pages = await page_all(rt, LIST_RESOURCES, "resources")
        assert pages == 5  # 20 per page by default
        assert [r["uri"] for r in items] == [f"test://static/resource/{i}" for i in range(1, 101)]
        assert all(set(r) <= {"server", "uri", "name", "mimeType", "description"} for r in items)  # no listed blob
        with anyio.fail_after(CALL_SECONDS):
            for i in (1, 2, 57, 100):  # odd ids are text, even ids blobs
                out = await rt.agent_call(READ_RESOURCE, {"server": "ev", "uri": f"test://static/resource/{i}"})
                assert not out.is_error, out.text
                if i % 2:
                    assert out.text == f"Resource {i}: This is a plaintext resource" and not out.binary
                else:
                    (ref,) = out.binary
                    assert ref.kind == "blob" and ref.uri == f"test://static/resource/{i}"
                    data = out.binary_data(ref)
                    assert data == f"Resource {i}: This is a base64 blob".encode() and ref.size == len(data)
                    no_payload(out.text, base64.b64encode(data).decode())
            (template,) = agent_json(await rt.agent_call(LIST_TEMPLATES, {}))["resourceTemplates"]
            assert template["uriTemplate"] == "test://static/resource/{id}"
            image = await rt.agent_call("ev__getTinyImage", {})
            assert [r.kind for r in image.binary] == ["image"] and image.binary[0].mime_type == "image/png"
            no_payload(image.text, base64.b64encode(image.binary_data(0)).decode())


async def test_old_everything_prompt_with_a_required_argument(kxen_home, tmp_path, everything_old_js):
    entry = stdio_entry(node(), everything_old_js, "stdio")
    async with running(kxen_home, tmp_path, servers={"ev": entry}, allow=("stdio",), wait=WAIT) as rt:
        prompts = {p["name"]: p for p in agent_json(await rt.agent_call(LIST_PROMPTS, {}))["prompts"]}
        assert prompts["complex_prompt"]["arguments"][0] == {
            "name": "temperature",
            "description": "Temperature setting",
            "required": True,
        }
        refused = await rt.agent_call(
            GET_PROMPT, {"server": "ev", "name": "complex_prompt", "arguments": {"style": "x"}}
        )
        assert refused.is_error and "missing required argument(s): 'temperature'" in refused.text
        with anyio.fail_after(CALL_SECONDS):
            got = agent_json(
                await rt.agent_call(
                    GET_PROMPT, {"server": "ev", "name": "complex_prompt", "arguments": {"temperature": "0.5"}}
                )
            )
        assert "0.5" in json.dumps(got["messages"])


# --- server-everything 2026.8.31 -----------------------------------------------------------------


async def everything_runtime(kxen_home: Any, tmp_path: Path, transport: str, everything_js: str, peers: Any):
    if transport == "stdio":
        return running(
            kxen_home,
            tmp_path,
            servers={"ev": stdio_entry(node(), everything_js, "stdio")},
            allow=("stdio",),
            wait=WAIT,
        )
    url, kind = peers.everything("streamableHttp")
    kxen_home.write_settings(remote_on(url))
    entry = {"url": url, "transport": kind, "defaultToolPolicy": "allow"}
    return running(kxen_home, tmp_path, servers={"ev": entry}, allow=("http",), wait=WAIT)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_everything_resources_templates_prompts_and_binary(kxen_home, tmp_path, everything_js, peers, transport):
    async with await everything_runtime(kxen_home, tmp_path, transport, everything_js, peers) as rt:
        assert rt.servers["ev"].state == "ready", rt.servers["ev"].snapshot()
        # the tools/list_changed burst after initialize: the catalog ends with the full tool set
        with anyio.fail_after(10):
            while not EVERYTHING_TOOLS <= {t["name"] for t in rt.tools("ev")}:
                await anyio.sleep(0.05)
        items, _ = await page_all(rt, LIST_RESOURCES, "resources", server="ev", limit=3)
        assert len(items) >= 7 and all(r["uri"].startswith("demo://resource/") for r in items)
        templates = {t["uriTemplate"] for t in agent_json(await rt.agent_call(LIST_TEMPLATES, {}))["resourceTemplates"]}
        assert {"demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/blob/{resourceId}"} <= templates
        with anyio.fail_after(CALL_SECONDS):
            doc = await rt.agent_call(READ_RESOURCE, {"server": "ev", "uri": items[0]["uri"]})
            assert not doc.is_error and doc.text and not doc.binary
            blob = await rt.agent_call(READ_RESOURCE, {"server": "ev", "uri": "demo://resource/dynamic/blob/3"})
            (ref,) = blob.binary
            assert ref.kind == "blob" and ref.size == len(blob.binary_data(ref))
            no_payload(blob.text, base64.b64encode(blob.binary_data(ref)).decode())
            (fetched,) = await rt.fetch_resource("ev", "demo://resource/dynamic/blob/3")
            # the server writes the time of each read (to the second) into the blob: two reads may differ there
            stamp = b"Resource 3: This is a base64 blob created at "
            assert fetched.data.startswith(stamp) and blob.binary_data(ref).startswith(stamp)
            image = await rt.agent_call("ev__get-tiny-image", {})
            assert [r.kind for r in image.binary] == ["image"]
            no_payload(image.text, base64.b64encode(image.binary_data(0)).decode())
            embedded = await rt.agent_call("ev__get-resource-reference", {"resourceType": "Blob", "resourceId": 2})
            assert [(r.kind, r.uri) for r in embedded.binary] == [("blob", "demo://resource/dynamic/blob/2")]
            no_payload(embedded.text, base64.b64encode(embedded.binary_data(0)).decode())
            prompts = {p["name"]: p for p in agent_json(await rt.agent_call(LIST_PROMPTS, {}))["prompts"]}
            assert {"name": "city", "description": "Name of the city", "required": True} in prompts["args-prompt"][
                "arguments"
            ]
            missing = await rt.agent_call(
                GET_PROMPT, {"server": "ev", "name": "args-prompt", "arguments": {"state": "CA"}}
            )
            assert missing.is_error and "'city'" in missing.text
            got = agent_json(
                await rt.agent_call(GET_PROMPT, {"server": "ev", "name": "args-prompt", "arguments": {"city": "Oslo"}})
            )
            assert "Oslo" in got["messages"][0]["content"]["text"]
            with_blob = await rt.agent_call(
                GET_PROMPT,
                {"server": "ev", "name": "resource-prompt", "arguments": {"resourceType": "Blob", "resourceId": "2"}},
            )
            assert [r.kind for r in with_blob.binary] == ["blob"] and json.loads(with_blob.text)["messages"][1][
                "content"
            ]["binary"]
            no_payload(with_blob.text, base64.b64encode(with_blob.binary_data(0)).decode())


# --- the official Python SDK --------------------------------------------------------------------


async def test_sdk_server_text_and_binary_resources_and_a_prompt(kxen_home, tmp_path):
    pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK (a dev dependency) is not installed")
    entry = stdio_entry(sys.executable, str(CONTENTS_SERVER))
    async with running(kxen_home, tmp_path, servers={"sdk": entry}, allow=("stdio",), wait=WAIT) as rt:
        assert rt.servers["sdk"].state == "ready", rt.servers["sdk"].snapshot()
        listed = {r["uri"]: r for r in rt.resources()["resources"]}
        assert set(listed) == {"note://hello", "bin://pixel"} and listed["bin://pixel"]["mimeType"] == "image/png"
        assert [t["uriTemplate"] for t in rt.resource_templates()] == ["note://{name}"]
        with anyio.fail_after(CALL_SECONDS):
            text = await rt.agent_call(READ_RESOURCE, {"server": "sdk", "uri": "note://hello"})
            assert (text.text, text.is_error) == ("hello from the SDK", False)
            templated = await rt.agent_call(READ_RESOURCE, {"server": "sdk", "uri": "note://kxen"})
            assert templated.text == "note kxen"
            pixel = await rt.agent_call(READ_RESOURCE, {"server": "sdk", "uri": "bin://pixel"})
            assert [(r.kind, r.mime_type, r.size) for r in pixel.binary] == [("blob", "image/png", 16)]
            assert pixel.binary_data(0) == bytes(range(16))
            (fetched,) = await rt.fetch_resource("sdk", "bin://pixel")
            assert fetched.data == bytes(range(16))
            picture = await rt.agent_call("sdk__picture", {})
            assert [(r.kind, r.size) for r in picture.binary] == [("image", 16)]
            prompts = {p["name"]: p for p in rt.prompts("sdk")}
            assert {a["name"]: a.get("required") for a in prompts["review"]["arguments"]} == {
                "code": True,
                "language": False,
            }
            for bad in ({"language": "go"}, {"code": "x", "extra": "y"}, {"code": 1}):
                refused = await rt.agent_call(GET_PROMPT, {"server": "sdk", "name": "review", "arguments": bad})
                assert refused.is_error and refused.text.startswith("InvalidArguments: ")
            got = agent_json(
                await rt.agent_call(GET_PROMPT, {"server": "sdk", "name": "review", "arguments": {"code": "x = 1"}})
            )
            assert "Review this python code:\nx = 1" in json.dumps(got["messages"], ensure_ascii=False).replace(
                "\\n", "\n"
            )

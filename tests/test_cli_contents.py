"""``kxen mcp resources | templates | read | prompts | get-prompt`` and ``call``'s agent view: JSON
shapes, tables with escaped server text, exit codes (0 ok, 1 failed, 2 usage)."""

from __future__ import annotations

import argparse
import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
from kxen_testing import FakeServer, mem, text_result

from kxen_core.cli import command as cli

ROOT = Path(__file__).resolve().parents[1]
RESOURCES = [{"uri": f"file:///r/{i}", "name": f"r{i}", "mimeType": "text/plain"} for i in range(25)]
BLOB = b"\x00\x01binary\xff" * 100
PROMPTS = [{"name": "weather", "description": "w", "arguments": [{"name": "city", "required": True}]}]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


def read(params: dict[str, Any]) -> dict[str, Any]:
    uri = params["uri"]
    if uri.endswith(".bin"):
        return {"contents": [{"uri": uri, "blob": base64.b64encode(BLOB).decode(), "mimeType": "image/png"}]}
    return {"contents": [{"uri": uri, "text": "x" * 70_000 if uri.endswith("big") else f"body of {uri}"}]}


def fake(**extra: Any) -> FakeServer:
    return FakeServer(
        tools={
            "echo": lambda a: text_result(str(a.get("text"))),
            "image": lambda a: {
                "content": [{"type": "image", "data": base64.b64encode(BLOB).decode(), "mimeType": "image/png"}]
            },
        },
        resources=extra.pop("resources", RESOURCES),
        prompts=PROMPTS,
        page_size=10,
        methods={
            "resources/read": read,
            "resources/templates/list": lambda p: {
                "resourceTemplates": [{"uriTemplate": "file:///t/{id}", "name": "t"}]
            },
            "prompts/get": lambda p: {
                "messages": [{"role": "user", "content": {"type": "text", "text": str(p["arguments"])}}]
            },
        },
        **extra,
    )


def view_text(out: str) -> tuple[str, bool]:
    data = json.loads(out)
    assert set(data) == {"content", "isError"}
    (block,) = data["content"]
    return block["text"], data["isError"]


def test_resources_json_all_and_paged(kx, kxen_home, fakes):
    fakes.add("f", fake())
    kxen_home.write_servers({"s": mem("f")})
    code, out, _ = kx("mcp", "resources", "--json", "--wait", "10")
    assert code == 0
    data = json.loads(out)
    assert data["nextCursor"] is None and [r["uri"] for r in data["resources"]] == [r["uri"] for r in RESOURCES]
    assert data["resources"][0] == {"server": "s", "uri": "file:///r/0", "name": "r0", "mimeType": "text/plain"}
    code, out, _ = kx("mcp", "resources", "s", "--limit", "10", "--json", "--wait", "10")
    first = json.loads(out)
    assert code == 0 and len(first["resources"]) == 10 and first["nextCursor"]
    code, out, _ = kx("mcp", "resources", "--cursor", first["nextCursor"], "--limit", "100", "--json", "--wait", "10")
    rest = json.loads(out)
    assert [r["name"] for r in rest["resources"]] == [f"r{i}" for i in range(10, 25)] and rest["nextCursor"] is None


def test_a_bad_cursor_exits_2(kx, kxen_home, fakes):
    fakes.add("f", fake())
    kxen_home.write_servers({"s": mem("f")})
    code, _, err = kx("mcp", "resources", "--cursor", "nope", "--json", "--wait", "10")
    assert code == 2 and "invalid cursor 'nope'" in err


@pytest.mark.parametrize("limit", ["0", "-3", "x", "1.5"])
def test_a_bad_limit_is_a_usage_error(kx, limit, capsys):
    with pytest.raises(SystemExit) as info:
        kx("mcp", "resources", "--limit", limit)
    assert info.value.code == 2 and "--limit" in capsys.readouterr().err


def test_templates_and_prompts_json(kx, kxen_home, fakes):
    fakes.add("f", fake())
    kxen_home.write_servers({"s": mem("f")})
    code, out, _ = kx("mcp", "templates", "--json", "--wait", "10")
    assert code == 0 and json.loads(out) == {
        "resourceTemplates": [{"server": "s", "uriTemplate": "file:///t/{id}", "name": "t"}]
    }
    code, out, _ = kx("mcp", "prompts", "s", "--json", "--wait", "10")
    assert code == 0
    assert json.loads(out) == {
        "prompts": [
            {"server": "s", "name": "weather", "description": "w", "arguments": [{"name": "city", "required": True}]}
        ]
    }


def test_read_prints_what_the_agent_gets(kx, kxen_home, fakes):
    fakes.add("f", fake())
    kxen_home.write_servers({"s": mem("f")})
    code, out, _ = kx("mcp", "read", "s", "file:///r/1", "--json", "--wait", "10")
    assert code == 0 and view_text(out) == ("body of file:///r/1", False)
    code, out, _ = kx("mcp", "read", "s", "file:///r/1", "--wait", "10")
    assert code == 0 and out.strip() == "body of file:///r/1"
    code, out, _ = kx("mcp", "read", "s", "file:///big", "--json", "--wait", "10")
    text, _ = view_text(out)
    assert code == 0 and len(text) == 50_000 and "70000 characters" in text
    code, out, _ = kx("mcp", "read", "s", "file:///x.bin", "--json", "--wait", "10")
    text, _ = view_text(out)
    assert code == 0 and base64.b64encode(BLOB).decode()[:40] not in text and f'"bytes": {len(BLOB)}' in text


def test_read_denied_by_policy_exits_1_and_sends_nothing(kx, kxen_home, fakes):
    server = fakes.add("f", fake())
    kxen_home.write_servers({"s": mem("f", toolPolicies={"resources/read": "deny"})})
    code, out, _ = kx("mcp", "read", "s", "file:///r/1", "--json", "--wait", "10")
    text, is_error = view_text(out)
    assert code == 1 and is_error and text.startswith("PolicyDenied: ")
    code, _, err = kx("mcp", "read", "s", "file:///r/1", "--wait", "10")
    assert code == 1 and "denied by policy" in err
    assert not [m for m in server.received if m.get("method") == "resources/read"]


def test_get_prompt_checks_before_sending(kx, kxen_home, fakes):
    server = fakes.add("f", fake())
    kxen_home.write_servers({"s": mem("f")})
    for args in ("{}", '{"city": 1}', '{"city": "x", "other": "y"}'):
        code, out, _ = kx("mcp", "get-prompt", "s", "weather", "--args", args, "--json", "--wait", "10")
        text, is_error = view_text(out)
        assert code == 1 and is_error and text.startswith("InvalidArguments: ")
    code, _, err = kx("mcp", "get-prompt", "s", "nope", "--wait", "10")
    assert code == 1 and "no prompt named 'nope'" in err
    assert not [m for m in server.received if m.get("method") == "prompts/get"]
    code, out, _ = kx("mcp", "get-prompt", "s", "weather", "--args", '{"city": "Oslo"}', "--json", "--wait", "10")
    text, is_error = view_text(out)
    assert code == 0 and not is_error and json.loads(text)["messages"][0]["content"]["text"] == "{'city': 'Oslo'}"


@pytest.mark.parametrize("args", ["{bad", "[1]", '"x"'])
def test_get_prompt_with_bad_args_json_exits_2_before_starting(kx, kxen_home, fakes, args):
    server = fakes.add("f", fake())
    kxen_home.write_servers({"s": mem("f")})
    code, _, err = kx("mcp", "get-prompt", "s", "weather", "--args", args, "--json")
    assert code == 2 and "--args" in err and server.connections == 0


def test_call_json_describes_binary_and_is_bounded(kx, kxen_home, fakes):
    fakes.add("f", fake())
    kxen_home.write_servers({"s": mem("f", defaultToolPolicy="allow")})
    code, out, _ = kx("mcp", "call", "s", "image", "--json", "--wait", "10")
    text, is_error = view_text(out)
    assert code == 0 and not is_error
    assert json.loads(text[len("[binary content not shown: ") : -1]) == {
        "server": "s",
        "tool": "image",
        "content": 0,
        "type": "image",
        "mimeType": "image/png",
        "bytes": len(BLOB),
    }
    code, out, _ = kx(
        "mcp", "call", "s", "echo", "--args", json.dumps({"text": "z" * 60_000}), "--json", "--wait", "10"
    )
    text, _ = view_text(out)
    assert code == 0 and len(text) == 50_000


def test_tables_escape_what_servers_send(kx, kxen_home, fakes):
    hostile = [{"uri": "file:///\x1b[31mred", "name": "[bold]x[/bold]\u202e", "description": "line1\nline2"}]
    fakes.add("f", fake(resources=hostile))
    kxen_home.write_servers({"s": mem("f")})
    code, out, _ = kx("mcp", "resources", "--wait", "10")
    assert code == 0
    assert "\x1b" not in out and "\u202e" not in out and "\\x1b[31mred" in out and "[bold]x[/bold]" in out
    for command in ("templates", "prompts"):
        code, out, _ = kx("mcp", command, "--wait", "10")
        assert code == 0 and ("file:///t/{id}" in out or "city" in out)


def test_a_listing_with_a_failed_server_exits_1(kx, kxen_home, fakes):
    fakes.add("f", fake())
    kxen_home.write_servers({"ok": mem("f"), "bad": mem("not-registered")})
    code, out, err = kx("mcp", "prompts", "--json", "--wait", "10")
    assert code == 1 and [p["server"] for p in json.loads(out)["prompts"]] == ["ok"] and "bad" in err


def test_docs_cli_md_names_every_command():
    docs = (ROOT / "docs" / "cli.md").read_text()
    parser = cli._parser()
    (top,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    (mcp,) = [a for a in top.choices["mcp"]._actions if isinstance(a, argparse._SubParsersAction)]
    for name in mcp.choices:
        assert re.search(rf"`kxen mcp {re.escape(name)}\b", docs), f"docs/cli.md does not document kxen mcp {name}"
    for name in top.choices:
        assert f"`kxen {name}" in docs, f"docs/cli.md does not document kxen {name}"

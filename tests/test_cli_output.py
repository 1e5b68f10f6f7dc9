"""Untrusted text reaches the terminal literally: every print site of the ``kxen`` command, attacked
with terminal escapes, rich markup, bidi overrides and lone surrogates; ``--json`` is strict JSON."""

from __future__ import annotations

import importlib.metadata
import json
import math
import types
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from kxen_testing import FakeError, FakeServer, mem, text_result
from remote_support import remote_on

import kxen_core.plugins.manager as plugins_mod
from kxen_core.agent.qualified import qualified_name
from kxen_core.cli import command as cli
from kxen_core.config.trust import trust
from kxen_core.safe_text import finite, json_text, safe_text

#: what a hostile server, repository or plugin puts in any text kxen prints
HOSTILE = [
    "\x1b[2J\x1b[31mred",  # clear screen, colour
    "\x1b]8;;http://127.0.0.1/\x07click\x1b]8;;\x07",  # OSC 8 hyperlink
    "\x9b31m",  # C1 CSI
    "a[/]b",  # closes no rich tag: MarkupError
    "[link=http://127.0.0.1/]x[/link]",
    "[conceal]hidden[/conceal]",
    "\u202egnp.exe\u202c \u2066iso\u2069",  # bidi override and isolate
    "lone \udc80 \ud800 surrogates",
    "nul \x00 bel \x07 del \x7f line\u2028sep",
]
ATTACK = " | ".join(HOSTILE)
#: ATTACK as the agent gets it: a lone surrogate cannot be sent to a model, it is U+FFFD there
AGENT_ATTACK = ATTACK.replace("\udc80", "\ufffd").replace("\ud800", "\ufffd")


def unsafe_chars(text: str) -> list[str]:
    """Every character in ``text`` a terminal could act on (newlines between lines are fine)."""
    return [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")]


def assert_clean(out: str, err: str) -> None:
    assert unsafe_chars(out) == [], out
    assert unsafe_chars(err) == [], err
    out.encode("utf-8")  # no lone surrogate made it out
    err.encode("utf-8")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


@pytest.fixture
def kx(kx, monkeypatch):
    """The shared ``kx`` runner, with a terminal wide enough that rich folds nothing: the literal
    text stays on one line."""
    monkeypatch.setenv("COLUMNS", "400")
    return kx


def hostile_fake() -> FakeServer:
    def fail(args: dict[str, Any]) -> Any:
        raise FakeError(-32000, ATTACK, data=ATTACK)

    return FakeServer(
        tools={"ok": lambda a: text_result(ATTACK), "fail": fail, "bad\x1b[2Jname": lambda a: text_result("x")},
        tool_defs=[
            {"name": "ok", "description": ATTACK, "inputSchema": {"type": "object"}},
            {"name": "fail", "description": "\n".join(HOSTILE), "inputSchema": {"type": "object"}},
            {"name": "bad\x1b[2Jname", "description": "[/]", "inputSchema": {"type": "object"}},
            {"name": "dotted.name", "description": "[/]", "inputSchema": {"type": "object"}},
        ],
    )


# --- the function itself ------------------------------------------------------------------------


@pytest.mark.parametrize("text", HOSTILE)
def test_safe_text_escapes_every_unsafe_character(text):
    shown = safe_text(text)
    assert unsafe_chars(shown) == [] and "\n" not in shown
    shown.encode("utf-8")


def test_safe_text_is_visible_and_keeps_ordinary_text():
    assert safe_text("\x1b[31m") == "\\x1b[31m"
    assert safe_text("\u202e") == "\\u202e"
    assert safe_text("\udc80") == "\\udc80"
    assert safe_text("a\nb\tc") == "a\\x0ab\\x09c"
    assert safe_text("a\nb\tc\x1b", multiline=True) == "a\nb\tc\\x1b"
    assert safe_text("größe 大きい ✓ [b]x[/b]") == "größe 大きい ✓ [b]x[/b]"
    assert safe_text(None) == ""


def test_json_text_is_strict_and_round_trips_every_string():
    data = {"t": HOSTILE, "k\x1b": "\U000e0041 tag", "n": [1e999, -1e999, math.nan, 1.5]}
    text = json_text(data)
    assert unsafe_chars(text) == []
    back = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict constant {c}"))
    assert back["t"] == HOSTILE and back["k\x1b"] == "\U000e0041 tag"  # the same strings, escaped
    assert back["n"] == ["Infinity", "-Infinity", "NaN", 1.5]
    assert finite({"a": (math.inf,)}) == {"a": ["Infinity"]}


# --- every print site ---------------------------------------------------------------------------


def test_status_table_and_error_lines(kx, kxen_home, fakes):
    fakes.add("f", hostile_fake())

    def refuse(params: dict[str, Any]) -> Any:
        raise FakeError(-32603, ATTACK)

    fakes.add("g", FakeServer(methods={"initialize": refuse}))
    kxen_home.write_servers({"ok": mem("f"), "bad": mem("g")})
    code, out, err = kx("mcp", "status", "--wait", "10")
    assert code == 1  # one failed server, as before
    assert_clean(out, err)
    assert "[conceal]hidden[/conceal]" in out and "a[/]b" in out and "\\x1b[2J" in out
    code, out, err = kx("mcp", "status", "--json", "--wait", "10")
    assert code == 1
    assert_clean(out, err)
    bad = {s["name"]: s for s in json.loads(out)["servers"]}["bad"]
    # a reason is kxen's text quoting the server: it comes escaped to every host, JSON included
    assert "\\x1b[2J" in bad["error"] and "\\udc80" in bad["error"] and bad["error"].isprintable()


def test_transport_name_with_markup_in_the_status_table(kx, kxen_home, fakes, monkeypatch):
    # a kind nobody registered is allowed when a plugin failed to load: its name reaches the table
    (memory,) = [ep for ep in importlib.metadata.entry_points(group="kxen") if ep.name == "memory"]

    class Broken:
        name = "evil"
        group = "kxen"
        value = "evil:plugin"
        dist = types.SimpleNamespace(metadata={"Name": "kxen-evil\x1b[2J"}, version="0")

        def load(self):
            raise ImportError(ATTACK)

    def distributions(*, path):
        # the one metadata seam: the real memory plugin's distribution and a hostile one beside it
        return [
            types.SimpleNamespace(_normalized_name="kxen_testing", entry_points=[memory]),
            types.SimpleNamespace(_normalized_name="kxen_evil", entry_points=[Broken()]),
        ]

    monkeypatch.setattr(plugins_mod, "importlib_metadata", types.SimpleNamespace(distributions=distributions))
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory,evil")
    fakes.add("f", hostile_fake())
    kxen_home.write_servers(
        {"ok": mem("f"), "odd": {"transport": "x[/]y[link=z][conceal]\x1b[2J", "url": "https://127.0.0.1/"}}
    )
    code, out, err = kx("mcp", "status", "--wait", "10")
    assert_clean(out, err)
    assert code in (0, 1)
    assert "x[/]y[link=z][conceal]\\x1b[2J" in out
    code, out, err = kx("plugins")
    assert code == 1  # a load failure, as before
    assert_clean(out, err)
    assert "[conceal]hidden[/conceal]" in err


def test_tools_table_and_json(kx, kxen_home, fakes):
    fakes.add("f", hostile_fake())
    kxen_home.write_servers({"h": mem("f")})
    code, out, err = kx("mcp", "tools", "--wait", "10")
    assert code == 0
    assert_clean(out, err)
    # a name with an escape breaks MCP's name rule: the tool is rejected, never shown or called
    assert "bad" not in out and "[link=http://127.0.0.1/]x[/link]" in out
    # a dotted name is shown twice: as the model sees it and as the server named it
    assert qualified_name("h", "dotted.name") in out and "dotted.name" in out
    code, out, err = kx("mcp", "tools", "--json", "--wait", "10")
    assert code == 0
    assert_clean(out, err)
    by_name = {t["name"]: t for t in json.loads(out)["tools"]}
    assert by_name["ok"]["description"] == ATTACK and set(by_name) == {"ok", "fail", "dotted.name"}
    assert by_name["dotted.name"]["qualifiedName"] == qualified_name("h", "dotted.name")
    assert by_name["ok"]["qualifiedName"] == "h__ok" and by_name["ok"]["server"] == "h"


def test_call_error_result_and_json(kx, kxen_home, fakes):
    fakes.add("f", hostile_fake())
    kxen_home.write_servers({"h": mem("f", defaultToolPolicy="allow")})
    code, out, err = kx("mcp", "call", "h", "fail", "--wait", "10")
    assert code == 1
    assert_clean(out, err)
    assert "[conceal]hidden[/conceal]" in err
    code, out, err = kx("mcp", "call", "h", "fail", "--json", "--wait", "10")
    assert code == 1
    assert_clean(out, err)
    view = json.loads(out)
    assert view["isError"] is True and AGENT_ATTACK in view["content"][0]["text"]
    code, out, err = kx("mcp", "call", "h", "ok", "--wait", "10")
    assert code == 0
    assert_clean(out, err)
    code, out, err = kx("mcp", "call", "h", "ok", "--json", "--wait", "10")
    assert code == 0
    assert_clean(out, err)
    assert json.loads(out)["content"][0]["text"] == AGENT_ATTACK


def test_call_output_multiline_keeps_lines_but_no_escapes(kx, kxen_home, fakes):
    fakes.add("f", tools={"t": lambda a: text_result("line 1\n\x1b[1Aline 2\tend")})
    kxen_home.write_servers({"h": mem("f", defaultToolPolicy="allow")})
    code, out, err = kx("mcp", "call", "h", "t", "--wait", "10")
    assert code == 0
    assert out == "line 1\n\\x1b[1Aline 2\tend\n"


@pytest.mark.parametrize("value", [1e999, -1e999, math.nan])
def test_call_json_with_non_finite_numbers_is_strict_json(kx, kxen_home, fakes, value):
    fakes.add(
        "f",
        tools={"n": lambda a: {"content": [], "structuredContent": {"v": value, "deep": [[{"x": value}]]}}},
    )
    kxen_home.write_servers({"h": mem("f", defaultToolPolicy="allow")})
    code, out, err = kx("mcp", "call", "h", "n", "--json", "--wait", "10")
    assert code == 0
    assert "Infinity\n" not in out and "NaN\n" not in out and ": NaN" not in out and ": Infinity" not in out
    data = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-strict constant {c}"))
    expected = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    # the agent's view: structuredContent as strict JSON text (no text block carried the result)
    shown = json.loads(data["content"][0]["text"], parse_constant=lambda c: pytest.fail(f"non-strict constant {c}"))
    assert shown == {"v": expected, "deep": [[{"x": expected}]]}
    code, out, err = kx("mcp", "call", "h", "n", "--wait", "10")  # text output does not crash
    assert code == 0
    assert_clean(out, err)


def write_project(ws: Path, servers: dict[str, Any]) -> None:
    (ws / ".kxen").mkdir(exist_ok=True)
    (ws / ".kxen" / "mcp.json").write_text(json.dumps({"mcpServers": servers}))


def test_project_problems_in_config_check_status_and_approvals(kx, kxen_home, ws, fakes):
    fakes.add("f", tools={"echo": lambda a: text_result("x")})
    kxen_home.write_servers({"u": mem("f")})
    write_project(ws, {"\x1b[2J[/]\u202e\udc80": {"command": "x"}, "p": {"command": "x", "env": {"LD_\x1b[31m": "1"}}})
    for argv, expected in (
        (("config", "check"), 2),
        (("mcp", "status", "--wait", "10"), 0),
        (("mcp", "approvals"), 0),
        (("config", "check", "--json"), 2),
        (("mcp", "approvals", "--json"), 0),
    ):
        code, out, err = kx(*argv)
        assert code == expected, argv
        assert_clean(out, err)
        assert "\\x1b[2J" in out + err or "\\u001b[2J" in out + err


def test_approvals_launch_error_and_display(kx, kxen_home, ws, monkeypatch):
    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory,stdio")
    # a lone surrogate in a config string is a config problem of its own (tests/test_odd_input.py):
    # here every other hostile piece reaches the launch display
    attack = " | ".join(h for h in HOSTILE if "surrogates" not in h)
    trust(kxen_home.path, ws)  # what an approval shows: the file of a trusted workspace
    write_project(
        ws, {"p": {"command": "no-such-\x1b[2J[/]\u202e", "args": [attack]}, "q": {"command": "sh", "args": [attack]}}
    )
    code, out, err = kx("mcp", "approvals")
    assert code == 0
    assert_clean(out, err)
    assert "no-such-\\x1b[2J[/]\\u202e" in out, (out, err)
    assert '"command": "/usr/bin/sh"' in out or '"command": "/bin/sh"' in out


def test_broken_user_config_message(kx, kxen_home):
    (kxen_home.path / "mcp.json").write_text(json.dumps({"mcpServers": {"\x1b[2J\u202e": {"command": "x"}}}))
    code, out, err = kx("mcp", "status")
    assert code == 2
    assert_clean(out, err)


def test_text_output_survives_a_narrow_terminal_encoding(kxen_home, ws, fakes, monkeypatch):
    import io
    import sys

    monkeypatch.setenv("KXEN_LOAD_PLUGINS", "memory")
    fakes.add("f", tools={"u": lambda a: text_result("größe \udc80 ✓")})
    kxen_home.write_servers({"h": mem("f", defaultToolPolicy="allow")})
    buffer = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(buffer, encoding="ascii", errors="strict"))
    argv = ["--home", str(kxen_home.path), "--workspace", str(ws), "mcp"]
    assert cli.main([*argv, "call", "h", "u", "--wait", "10"]) == 0
    assert cli.main([*argv, "tools", "--wait", "10"]) == 0
    sys.stdout.flush()
    # the call prints the agent's text, where a lone surrogate is U+FFFD
    assert b"gr\\xf6\\xdfe \\ufffd \\u2713" in buffer.getvalue()


# --- secrets the user configured never come back in clear -----------------------------------------

KEY = "k3y-from-the-url-51"
TOKEN = "t0ken-from-a-header-77"


def test_a_server_echoing_configured_secrets_is_printed_redacted(kx, kxen_home, fakes):
    echo = f"api_key={KEY} auth=Bearer {TOKEN} again {KEY}"

    def fail(args: dict[str, Any]) -> Any:
        raise FakeError(-32000, f"denied: {echo}", data=echo)

    def refuse(params: dict[str, Any]) -> Any:
        raise FakeError(-32603, f"cannot start: {echo}")

    fakes.add(
        "f",
        FakeServer(
            tools={"ok": lambda a: text_result(echo), "fail": fail},
            tool_defs=[
                {"name": "ok", "description": echo, "inputSchema": {"type": "object"}},
                {"name": "fail", "description": "x", "inputSchema": {"type": "object"}},
            ],
        ),
    )
    fakes.add("g", FakeServer(methods={"initialize": refuse}))
    url = f"https://127.0.0.1/mcp?api_key={KEY}&v=1"
    kxen_home.write_settings(remote_on(url, settings=""))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    kxen_home.write_servers(
        {
            "r": mem("f", url=url, headers=headers, defaultToolPolicy="allow"),
            "bad": mem("g", url=url),
        }
    )
    runs = [
        kx("mcp", "status", "--wait", "10"),
        kx("mcp", "status", "--json", "--wait", "10"),
        kx("mcp", "tools", "r", "--wait", "10"),
        kx("mcp", "tools", "r", "--json", "--wait", "10"),
        kx("mcp", "call", "r", "ok", "--wait", "10"),
        kx("mcp", "call", "r", "ok", "--json", "--wait", "10"),
        kx("mcp", "call", "r", "fail", "--wait", "10"),
        kx("mcp", "call", "r", "fail", "--json", "--wait", "10"),
    ]
    assert [code for code, _, _ in runs] == [1, 1, 0, 0, 0, 0, 1, 1]
    for _code, out, err in runs:
        assert KEY not in out + err and TOKEN not in out + err
        assert_clean(out, err)
    assert "***" in runs[4][1] and "***" in runs[6][2]
    assert json.loads(runs[5][1])["content"][0]["text"] == "api_key=*** auth=*** again ***"


@pytest.mark.anyio
async def test_a_failing_approval_channel_is_logged_without_raw_escapes(caplog):
    import logging

    from kxen_core import hookimpl
    from kxen_core.plugins.manager import make_plugin_manager
    from kxen_core.policy import ApprovalRequest
    from kxen_core.policy.approvals import Approvals

    class Broken:
        __name__ = "broken-channel"

        @hookimpl
        async def kxen_approval_prompt(self, request):
            raise RuntimeError(ATTACK)

    approvals = Approvals(make_plugin_manager(allow=[], extra=[Broken()]))
    with caplog.at_level(logging.WARNING, logger="kxen.approvals"):
        decision = await approvals.ask(ApprovalRequest(kind="tool_call", server="s", summary="x", fingerprint="f"))
    assert decision.approved is False
    logged = [r.getMessage() for r in caplog.records if r.name == "kxen.approvals"]
    assert logged and all(unsafe_chars(m) == [] for m in logged)
    assert "\\x1b[2J" in logged[0]

"""Every text a server sends goes through the one escape-and-scrub path before a person or the agent
sees it: the result, the error, a tool description, a log message, a progress message, the server's
stderr and its failure reason -- printed by ``kxen mcp status | tools | call`` (text and ``--json``),
handed to the agent by ``Runtime.agent_call``, shown in ``Runtime.status()`` and written to the log.

Each of them is attacked with terminal escapes (an OSC 52 clipboard write, a screen clear, a bidi
override) and with every kind of value kxen holds as secret: a URL's query value, a credential
header, a sensitive env value, a value a ``${VAR}`` supplied, the OAuth client secret, and what a
plugin holds (``kxen_register_secrets``: the tokens of a sign-in). The stdio cases run the ``kxen``
command as a process of its own, as a person does: there Python's last-resort log handler is not
hidden behind pytest's. Real-peer twins: tests/test_server_text_scrub_peers.py.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from kxen_testing import FakeError, FakeServer, mem, running
from remote_support import remote_on

import kxen_core.plugins.manager as plugins_mod
from kxen_core import hookimpl
from kxen_core.cli import contents as cli_contents

HERE = Path(__file__).resolve().parent
ECHO_SERVER = HERE / "hostile" / "echo_server.py"

#: what a hostile server puts around the secrets it echoes
ATTACK = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[H\u202egnp.exe"
KEY = "k3y-in-the-url-5150"
TOKEN = "t0ken-in-a-header-7788"
ENV_SECRET = "env-pa55word-value-31"
VAR_SECRET = "expanded-var-secret-4242"
CLIENT_SECRET = "cl1ent-secret-of-oauth-99"
PLUGIN_TOKEN = "plugin-held-access-token-123"
SECRETS = {
    "url query": KEY,
    "header": TOKEN,
    "env": ENV_SECRET,
    "${VAR}": VAR_SECRET,
    "client secret": CLIENT_SECRET,
    "plugin": PLUGIN_TOKEN,
}
ECHO = " ".join([ATTACK, *SECRETS.values(), ATTACK])
#: what the echoing fake adds to its result (a token the plugin got later)
LATER: list[str] = []

#: characters a terminal acts on: ESC, BEL, C1, the bidi override
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def assert_safe(text: str, where: str, *, escaped: bool = True) -> None:
    """No secret in ``text``; and no raw escape (unless ``escaped`` is False: the agent gets the text
    as the server sent it, lone surrogates aside -- a model is no terminal)."""
    for ch in RAW if escaped else ():
        assert ch not in text, f"{where}: a raw {ch!r} got through: {text[:2000]!r}"
    for kind, secret in SECRETS.items():
        assert secret not in text, f"{where}: the {kind} secret got through: {text[:2000]!r}"


class Holder:
    """A plugin that holds a token, as a sign-in plugin does."""

    __name__ = "token-holder"

    def __init__(self) -> None:
        self.held: frozenset[str] = frozenset()

    @hookimpl
    def kxen_register_secrets(self, register: Any) -> None:
        register(lambda: self.held)


def echoing_fake() -> FakeServer:
    fake: FakeServer

    async def call(params: dict[str, Any]) -> Any:
        token = (params.get("_meta") or {}).get("progressToken")
        if token is not None:
            await fake.notify(
                "notifications/progress", {"progressToken": token, "progress": 1, "total": 2, "message": ECHO}
            )
        await fake.notify("notifications/message", {"level": "warning", "logger": ECHO, "data": ECHO})
        await fake.notify("notifications/message", {"level": "error", "data": {"echo": ECHO}})
        if params.get("name") == "fail":
            raise FakeError(-32000, f"failed: {ECHO}", data={"echo": ECHO})
        text = " ".join(["result:", ECHO, *LATER])
        return {"content": [{"type": "text", "text": text}], "structuredContent": {"echo": ECHO}}

    fake = FakeServer(
        tool_defs=[
            {"name": "ok", "description": f"says {ECHO}", "inputSchema": {"type": "object"}},
            {"name": "fail", "description": "fails", "inputSchema": {"type": "object"}},
        ],
        methods={"tools/call": call},
        capabilities={"tools": {}, "logging": {}},
    )
    return fake


def refusing_fake() -> FakeServer:
    def refuse(params: dict[str, Any]) -> Any:
        raise FakeError(-32603, f"cannot start: {ECHO}")

    return FakeServer(methods={"initialize": refuse})


def entries() -> dict[str, Any]:
    url = f"https://127.0.0.1/mcp?api_key={KEY}"
    common = {
        "url": url,
        "headers": {"Authorization": f"Bearer {TOKEN}", "X-Var": "${KXEN_TEST_VAR_SECRET}"},
        "env": {"SERVICE_PASSWORD": ENV_SECRET},
        "oauth": {"clientId": "kxen-test", "clientSecret": CLIENT_SECRET},
    }
    return {
        "r": mem("f", defaultToolPolicy="allow", **common),
        "bad": mem("g", **common),
    }


@pytest.fixture
def hostile(kxen_home, fakes, monkeypatch) -> Holder:
    """Servers ``r`` (echoes everything) and ``bad`` (fails at initialize), a plugin holding a token."""
    monkeypatch.setenv("KXEN_TEST_VAR_SECRET", VAR_SECRET)
    monkeypatch.setenv("COLUMNS", "400")
    fakes.add("f", echoing_fake())
    fakes.add("g", refusing_fake())
    kxen_home.write_settings(remote_on(*entries().values(), settings=""))
    kxen_home.write_servers(entries())
    LATER.clear()
    holder = Holder()
    holder.held = frozenset({PLUGIN_TOKEN})
    real = plugins_mod.make_plugin_manager

    def with_holder(*args: Any, **kwargs: Any) -> Any:
        kwargs["extra"] = [*kwargs.get("extra", ()), holder]
        return real(*args, **kwargs)

    monkeypatch.setattr(plugins_mod, "make_plugin_manager", with_holder)
    return holder


def test_every_server_text_the_command_prints_is_escaped_and_scrubbed(kx, hostile, monkeypatch, caplog):
    monkeypatch.setattr(cli_contents, "_on_terminal", lambda: True)  # the call asks for progress
    caplog.set_level(logging.DEBUG, logger="kxen")
    runs = {
        "status": kx("mcp", "status", "--wait", "10"),
        "status --json": kx("mcp", "status", "--json", "--wait", "10"),
        "tools": kx("mcp", "tools", "r", "--wait", "10"),
        "tools --json": kx("mcp", "tools", "r", "--json", "--wait", "10"),
        "call": kx("mcp", "call", "r", "ok", "--wait", "10"),
        "call --json": kx("mcp", "call", "r", "ok", "--json", "--wait", "10"),
        "call fail": kx("mcp", "call", "r", "fail", "--wait", "10"),
        "call fail --json": kx("mcp", "call", "r", "fail", "--json", "--wait", "10"),
        "call -v": kx("-v", "mcp", "call", "r", "ok", "--wait", "10"),
    }
    assert {k: code for k, (code, _, _) in runs.items()} == {
        "status": 1,
        "status --json": 1,
        "tools": 0,
        "tools --json": 0,
        "call": 0,
        "call --json": 0,
        "call fail": 1,
        "call fail --json": 1,
        "call -v": 0,
    }
    for name, (_code, out, err) in runs.items():
        assert_safe(out, f"{name} stdout")
        assert_safe(err, f"{name} stderr")
    # each field was printed (escaped, secrets as ***), not merely left out
    assert "\\x1b]52;c;" in runs["call"][1] and "*** *** *** *** *** ***" in runs["call"][1]  # result
    assert "progress 1/2: \\x1b]52" in runs["call"][2]  # progress message
    assert "r [\\x1b]52;c;" in runs["call"][2] and "r: {" in runs["call"][2]  # log messages (warning, error)
    assert "failed: \\x1b]52" in runs["call fail"][2]  # error
    assert "says \\x1b]52" in runs["tools"][1]  # description
    assert "cannot start: \\x1b]52" in runs["status"][1] + runs["status"][2]  # failure reason
    view = json.loads(runs["call fail --json"][1])
    assert "failed: " in view["content"][0]["text"] and "***" in view["content"][0]["text"]
    status = {s["name"]: s for s in json.loads(runs["status --json"][1])["servers"]}
    assert "cannot start" in status["bad"]["error"]
    assert_safe("\n".join(r.getMessage() for r in caplog.records), "log records")


@pytest.mark.anyio
async def test_the_agent_and_the_status_get_no_secret(kxen_home, ws, hostile):
    async with running(kxen_home, ws, hostile) as rt:
        texts = []
        for name in ("r__ok", "r__fail", "bad__ok"):
            out = await rt.agent_call(name, {})
            texts.append(out.text)
            assert_safe(out.text, f"agent_call {name}", escaped=False)
        assert "***" in texts[0] and "failed: " in texts[1] and "cannot start: " in texts[2]
        # a token the plugin got later (a refresh) is scrubbed from then on
        later = "refreshed-access-token-456"
        LATER.append(later)
        assert later in (await rt.agent_call("r__ok", {})).text  # nobody holds it yet: it is no secret
        hostile.held = frozenset({PLUGIN_TOKEN, later})
        out = await rt.agent_call("r__ok", {})
        assert later not in out.text and out.text.endswith("***")
        rt.servers["r"].server_log.notify({"level": "info", "data": f"log {later}"})
        status = rt.status()
        assert_safe(json.dumps(status, ensure_ascii=False), "status")
        assert later not in json.dumps(status)
        assert any(e["text"] == "log ***" for s in status for e in s["log"])


def test_a_secret_cut_by_the_output_bound_shows_no_first_characters():
    from kxen_core.agent.output import render_tool_result, scrubbed
    from kxen_core.safe_text import Secrets

    secret = "abcdefghijklmnopqrstuvwxyz0123456789"
    secrets = Secrets([secret])
    for keep in range(1, len(secret)):
        filler = "x" * (200 - 60 - keep)
        raw = {"content": [{"type": "text", "text": filler + secret + "y" * 500}]}
        out = render_tool_result(raw, server="s", tool="t", limit=200)
        assert out.truncated
        text = scrubbed(out, secrets).text
        head = text[: text.index("\n[output cut")]
        assert not any(head.endswith(secret[:n]) for n in range(4, len(secret))), (keep, head[-40:])
        assert len(text) <= 200


# --- the kxen command as a process: a stdio server echoing what kxen passed it ----------------------


def _kxen(home: Path, ws: Path, *argv: str) -> tuple[int, str, str]:
    import subprocess

    env = {**os.environ, "KXEN_TEST_VAR_SECRET": VAR_SECRET}
    env.pop("KXEN_LOAD_PLUGINS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "kxen_core.cli", "--home", str(home), "--workspace", str(ws), *argv],
        capture_output=True,
        env=env,
        timeout=120,
    )
    out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    return proc.returncode, out, err


def test_a_stdio_server_echoing_its_secrets_as_a_process(kxen_home, ws):
    stdio = {
        "command": sys.executable,
        "args": [str(ECHO_SERVER), "SERVICE_PASSWORD", "API_TOKEN"],
        "env": {"SERVICE_PASSWORD": ENV_SECRET, "API_TOKEN": "${KXEN_TEST_VAR_SECRET}"},
        "defaultToolPolicy": "allow",
    }
    failing = {**stdio, "args": [str(ECHO_SERVER), "--fail-init", "SERVICE_PASSWORD", "API_TOKEN"]}
    kxen_home.write_servers({"h": stdio, "broken": failing})
    runs = {
        "status": _kxen(kxen_home.path, ws, "mcp", "status", "--wait", "20"),
        "status --json": _kxen(kxen_home.path, ws, "mcp", "status", "--json", "--wait", "20"),
        "tools": _kxen(kxen_home.path, ws, "mcp", "tools", "h", "--wait", "20"),
        "call": _kxen(kxen_home.path, ws, "mcp", "call", "h", "echo", "--wait", "20"),
        "call --json": _kxen(kxen_home.path, ws, "mcp", "call", "h", "echo", "--json", "--wait", "20"),
        "call fail --json": _kxen(kxen_home.path, ws, "mcp", "call", "h", "fail", "--json", "--wait", "20"),
    }
    for name, (_code, out, err) in runs.items():
        assert_safe(out, f"{name} stdout")
        assert_safe(err, f"{name} stderr")
    code, out, err = runs["call"]
    assert code == 0 and "result: \\x1b]52;c;" in out and "*** ***" in out, (out, err)
    # the server's log messages (warning at start, error in the call) reach stderr escaped, scrubbed
    assert "h: started: \\x1b]52;c;" in err and "*** ***" in err, err
    status = {s["name"]: s for s in json.loads(runs["status --json"][1])["servers"]}
    broken = status["broken"]
    assert broken["state"] == "failed" and "cannot start: " in broken["error"], broken  # the stderr tail
    assert "***" in broken["error"]
    assert "failed: " in json.loads(runs["call fail --json"][1])["content"][0]["text"]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


# --- the kxen_register_secrets contract (docs/hooks.md) ---------------------------------------------


def test_secret_sources_broken_and_mutable(caplog):
    from kxen_core.plugins.manager import make_plugin_manager
    from kxen_core.plugins.secrets import secret_sources
    from kxen_core.safe_text import Secrets

    live: set[str] = {"first-held-value"}

    class Good:
        __name__ = "good-holder"

        @hookimpl
        def kxen_register_secrets(self, register: Any) -> None:
            register(lambda: live)  # a mutable set: compared by value

    class Raising:
        __name__ = "raising-holder"

        @hookimpl
        def kxen_register_secrets(self, register: Any) -> None:
            raise RuntimeError("cannot register")

    class BrokenSource:
        __name__ = "broken-source"

        @hookimpl
        def kxen_register_secrets(self, register: Any) -> None:
            register(lambda: 1 / 0)

    with caplog.at_level(logging.WARNING, logger="kxen.plugins"):
        sources = secret_sources(make_plugin_manager(allow=[], extra=[Good(), Raising(), BrokenSource()]))
    assert len(sources) == 2  # the raising registration lost its own sources only
    assert any("raising-holder" in r.getMessage() and "cannot register" in r.getMessage() for r in caplog.records)
    scrub = Secrets(["config-secret-1"], sources=sources)
    assert scrub.text("first-held-value config-secret-1") == "*** ***"  # the broken source counts as none
    live.add("added-in-place-2")  # changed in place: still seen
    assert scrub.text("added-in-place-2") == "***"
    live.clear()
    assert scrub.text("first-held-value") == "first-held-value"  # no longer held, no longer a secret


def test_an_equal_answer_in_a_new_object_is_not_a_rebuild(monkeypatch):
    from kxen_core.safe_text import Secrets

    answers = iter([frozenset({"held-value-1"}), frozenset({"held-value-1"}), ("held-value-1",)])
    current = [frozenset()]

    def source() -> object:
        return current[0]

    scrub = Secrets(sources=[source])
    current[0] = next(answers)
    assert scrub.text("a held-value-1") == "a ***"
    built = []
    monkeypatch.setattr(Secrets, "_forms", classmethod(lambda cls, values: built.append(1) or set()))
    current[0] = next(answers)  # equal, another object: compared by value, nothing rebuilt
    assert scrub.text("b held-value-1") == "b ***"
    assert built == []
    current[0] = next(answers)  # a tuple now: another answer, rebuilt (to the same values)
    assert scrub.values == []  # (the patched _forms builds no values)
    assert built == [1]
    current[0] = frozenset({"another-value-2"})
    assert scrub.values == []
    assert built == [1, 1]  # a changed answer is always rebuilt

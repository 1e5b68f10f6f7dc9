"""The example allowlist channel: passes when not configured, approves exactly the listed
fingerprints, refuses everything when its file is not private, and drives a real Runtime when
registered as an extra plugin."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from kxen_approval_allowlist import hooks

from kxen_core.config import load_config
from kxen_core.config.trust import trust
from kxen_core.errors import ApprovalDenied
from kxen_core.launch.resolve import resolve_launch
from kxen_core.plugins.manager import make_plugin_manager
from kxen_core.policy import ApprovalDecision, ApprovalRequest, fingerprint
from kxen_core.policy.pins import tool_digest
from kxen_core.runtime.workspace import Runtime

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[1]
DEMO = EXAMPLE.parents[1] / "demo" / "server.py"
FP = "a" * 64
OTHER = "b" * 64


def request(fp: str = FP, kind: str = "stdio_launch") -> ApprovalRequest:
    return ApprovalRequest(kind=kind, server="s", summary="start s", fingerprint=fp)  # type: ignore[arg-type]


@pytest.fixture
def allowlist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write the allowlist (mode 0600 unless told) and point the channel at it."""

    def write(*lines: str, mode: int = 0o600) -> Path:
        path = tmp_path / "approvals.allow"
        path.write_text("".join(line + "\n" for line in lines))
        os.chmod(path, mode)
        monkeypatch.setenv(hooks.ENV_VAR, str(path))
        return path

    return write


async def ask(req: ApprovalRequest) -> ApprovalDecision | None:
    with anyio.fail_after(10):
        return await hooks.kxen_approval_prompt(req)


# --- the channel on its own -----------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, "", "   "])
async def test_not_configured_passes(monkeypatch, value):
    if value is None:
        monkeypatch.delenv(hooks.ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(hooks.ENV_VAR, value)
    assert await ask(request()) is None


async def test_a_listed_fingerprint_is_approved(allowlist):
    path = allowlist("# approved launches", f"{FP}  # repo-tools, reviewed 2025-01-02", "", OTHER.upper())
    decision = await ask(request(FP))
    assert decision == ApprovalDecision(approved=True, reason=f"listed in {path}", channel="allowlist")
    assert (await ask(request(OTHER))).approved  # case does not matter


async def test_an_unlisted_fingerprint_is_refused(allowlist):
    allowlist(OTHER)
    decision = await ask(request(FP))
    assert decision is not None and decision.approved is False
    assert FP in decision.reason and decision.channel == "allowlist"


async def test_a_request_without_fingerprint_is_refused(allowlist):
    allowlist(FP)
    decision = await ask(request("", kind="remote_enable"))
    assert decision is not None and not decision.approved
    assert "no fingerprint" in decision.reason


async def test_an_empty_allowlist_refuses(allowlist):
    allowlist()
    assert (await ask(request())).approved is False


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o602, 0o620, 0o777])
async def test_a_file_others_can_access_refuses_even_listed_fingerprints(allowlist, mode):
    allowlist(FP, mode=mode)
    decision = await ask(request(FP))
    assert decision is not None and decision.approved is False
    assert f"mode {mode:04o}" in decision.reason and "0600" in decision.reason


async def test_a_read_only_private_file_is_fine(allowlist):
    allowlist(FP, mode=0o400)
    assert (await ask(request(FP))).approved


async def test_a_symlink_is_refused(allowlist, tmp_path, monkeypatch):
    real = allowlist(FP)
    link = tmp_path / "link.allow"
    link.symlink_to(real)
    monkeypatch.setenv(hooks.ENV_VAR, str(link))
    decision = await ask(request(FP))
    assert not decision.approved and "symlink" in decision.reason


async def test_a_missing_file_or_a_directory_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(hooks.ENV_VAR, str(tmp_path / "missing"))
    decision = await ask(request())
    assert not decision.approved and "cannot be opened" in decision.reason
    monkeypatch.setenv(hooks.ENV_VAR, str(tmp_path))
    decision = await ask(request())
    assert not decision.approved


async def test_a_file_owned_by_someone_else_is_refused(allowlist, monkeypatch):
    allowlist(FP)
    me = os.geteuid()
    monkeypatch.setattr(hooks.os, "geteuid", lambda: me + 1)
    decision = await ask(request(FP))
    assert not decision.approved and "not owned by you" in decision.reason


@pytest.mark.parametrize(
    "line",
    ["a" * 63, "a" * 65, "g" * 64, f"{FP} {OTHER}", "approve-everything", "*"],
    ids=["63-digits", "65-digits", "not-hex", "two-on-one-line", "a-word", "a-star"],
)
async def test_a_malformed_line_refuses_everything(allowlist, line):
    allowlist(FP, line)
    decision = await ask(request(FP))
    assert not decision.approved and "line 2" in decision.reason


async def test_an_oversized_file_is_refused(allowlist):
    allowlist(*([FP] * 2000))
    decision = await ask(request(FP))
    assert not decision.approved and "larger than" in decision.reason


async def test_the_reason_never_quotes_the_file(allowlist):
    allowlist(FP, "secret-looking-line")
    decision = await ask(request(FP))
    assert "secret-looking-line" not in decision.reason


# --- packaging --------------------------------------------------------------------------------------


def test_the_distribution_declares_its_entry_point():
    meta = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["kxen"] == {"allowlist": "kxen_approval_allowlist.hooks"}
    assert any(dep.startswith("kxen") for dep in meta["project"]["dependencies"])


def test_it_loads_as_a_plugin():
    pm = make_plugin_manager(load_entrypoints=False, extra=[hooks])  # check_pending: no misspelled hook
    [impl] = pm.hook.kxen_approval_prompt.get_hookimpls()
    assert impl.plugin is hooks


# --- driving a Runtime ------------------------------------------------------------------------------


def channel_pm():
    """The installed plugins (transports) with this channel as the only approval channel."""
    pm = make_plugin_manager(extra=[hooks])
    for impl in list(pm.hook.kxen_approval_prompt.get_hookimpls()):
        if impl.plugin is not hooks:
            pm.unregister(impl.plugin)
    return pm


def write_project(ws: Path, servers: dict[str, Any]) -> None:
    (ws / ".kxen").mkdir(exist_ok=True)
    (ws / ".kxen" / "mcp.json").write_text(json.dumps({"mcpServers": servers}))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path.resolve()


@pytest.mark.parametrize("listed", [True, False])
async def test_it_decides_project_server_launches(kxen_home, ws, tmp_path, allowlist, listed):
    log = tmp_path / "server.log"
    write_project(ws, {"p": {"command": sys.executable, "args": [str(DEMO), "--log", str(log)]}})
    trust(kxen_home.path, ws)
    fp = resolve_launch(load_config(None, ws).servers["p"], ws).fingerprint
    allowlist(fp if listed else OTHER)
    async with Runtime(workspace=ws, pm=channel_pm()) as rt:
        with anyio.fail_after(30):
            assert await rt.wait_ready()
        p = rt.status()[0]
        if listed:
            assert p["state"] == "ready"
        else:
            assert p["state"] == "awaiting_approval"
            assert "is not in" in p["error"] and fp in p["error"]
    assert log.exists() is listed


async def test_it_decides_ask_policy_tool_calls(kxen_home, fakes, allowlist):
    from kxen_testing.fake import text_result

    kxen_home.write_servers({"srv": {"transport": "memory", "toolPolicies": {"echo": "ask"}}})
    fake = fakes.add("srv", tools={"echo": lambda a: text_result(a.get("text", ""))})
    # a call's fingerprint covers the server's name and identity (scope, kind, launch), tool, the
    # digest of the tool's definition (kxen_core.policy.pins) and the arguments
    launch = resolve_launch(load_config(None, Path.cwd()).servers["srv"], Path.cwd().resolve())
    identity = {"scope": "user", "kind": "memory", "launch": launch.fingerprint}
    pin = tool_digest(fake.tool_defs[0])
    allowlist(
        fingerprint(
            {"server": "srv", "identity": identity, "tool": "echo", "arguments": {"text": "listed"}, "pin": pin}
        )
    )
    async with Runtime(pm=channel_pm()) as rt:
        with anyio.fail_after(30):
            assert await rt.wait_ready()
            await rt.call_tool("srv__echo", {"text": "listed"})
            with pytest.raises(ApprovalDenied, match="is not in"):
                await rt.call_tool("srv__echo", {"text": "not listed"})
    sent = [m["params"]["arguments"] for m in fake.received if m.get("method") == "tools/call"]
    assert sent == [{"text": "listed"}]


async def test_not_configured_it_leaves_kxen_failing_closed(kxen_home, ws, tmp_path, monkeypatch):
    monkeypatch.delenv(hooks.ENV_VAR, raising=False)
    log = tmp_path / "server.log"
    write_project(ws, {"p": {"command": sys.executable, "args": [str(DEMO), "--log", str(log)]}})
    trust(kxen_home.path, ws)
    async with Runtime(workspace=ws, pm=channel_pm()) as rt:
        with anyio.fail_after(30):
            assert await rt.wait_ready()
        assert rt.status()[0]["state"] == "awaiting_approval"
        assert "no approval channel" in rt.status()[0]["error"]
    assert not log.exists()

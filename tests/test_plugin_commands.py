"""A plugin's own ``kxen`` command (``kxen_register_commands``): parsed with the global options,
run with a Runtime the command enters itself, under the core's guards; names the core or another
plugin holds are refused with a warning; the core's commands never load the plugins for it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import types

import pytest
from support import demo_entry

import kxen_core.plugins.manager as manager
from kxen_core import hookimpl
from kxen_core.cli import main
from kxen_core.commands import Command
from kxen_core.plugins.commands import plugin_commands

WAIT = 30


def _plugin(name: str, *commands: object, raises: bool = False) -> types.ModuleType:
    mod = types.ModuleType(name)

    @hookimpl
    def kxen_register_commands(register):
        for command in commands:
            register(command)
        if raises:
            raise RuntimeError("broken registration")

    mod.kxen_register_commands = kxen_register_commands
    return mod


def _command(name: str, seen: dict, code: int = 0) -> Command:
    def configure(parser):
        parser.add_argument("--shout", action="store_true")

    async def run(runtime, args):
        seen["entered before"] = runtime.config is not None  # not entered: the command decides
        seen["home"], seen["shout"] = runtime.home, args.shout
        async with runtime:
            seen["ready"] = await runtime.wait_ready(WAIT)
            seen["states"] = {s["name"]: s["state"] for s in runtime.status()}
        return code

    return Command(name=name, help=f"the {name} command", configure=configure, run=run)


@pytest.fixture
def with_plugins(monkeypatch):
    """The CLI's plugin manager gets these in-process plugins too (beside the installed ones)."""
    extra: list[types.ModuleType] = []
    real = manager.make_plugin_manager

    def make(*args, **kwargs):
        kwargs.setdefault("extra", [])
        kwargs["extra"] = [*kwargs["extra"], *extra]
        return real(*args, **kwargs)

    monkeypatch.setattr(manager, "make_plugin_manager", make)
    return extra


def test_a_plugin_command_runs_with_the_global_options_and_a_runtime_it_enters(kxen_home, ws, with_plugins):
    """Real demo server over stdio: ``kxen hello --shout --home H`` (the global option after the
    command is hoisted) runs the plugin's command with that home, its own option parsed, and the
    runtime the command entered; its exit code is kxen's."""
    kxen_home.write_servers({"demo": demo_entry()})
    seen: dict = {}
    with_plugins.append(_plugin("hello_plugin", _command("hello", seen, code=3)))
    code = main(["hello", "--shout", "--home", str(kxen_home.path), "--workspace", str(ws)])
    assert code == 3
    assert seen == {
        "entered before": False,
        "home": kxen_home.path,
        "shout": True,
        "ready": True,
        "states": {"demo": "ready"},
    }


def test_what_a_plugin_command_prints_and_logs_has_the_runtimes_secrets_scrubbed(kxen_home, ws, with_plugins, capsys):
    """As for ``kxen mcp``: a configured secret (a header value here) in a line the command prints
    or logs after it entered its runtime is shown as ``***`` (``kxen settings -v`` once logged a
    header value a server echoed in its error)."""
    import logging

    from kxen_core.cli.output import say

    secret = "hdr-5ecret-EEEE-5555"
    kxen_home.write_settings("[mcp]\nallow_loopback_http = true\n")  # remote MCP off: nothing is dialled
    kxen_home.write_servers(
        {"r": {"url": "http://127.0.0.1:9/mcp", "transport": "http", "headers": {"X-Api-Key": secret}}}
    )

    async def run(runtime, args):
        async with runtime:
            say(f"printed {secret}")
            logging.getLogger("kxen.test").warning("logged %s", secret)
        return 0

    command = Command(name="leaky", help="prints a secret", configure=lambda parser: None, run=run)
    with_plugins.append(_plugin("leaky_plugin", command))
    assert main(["-v", "--home", str(kxen_home.path), "--workspace", str(ws), "leaky"]) == 0
    out, err = capsys.readouterr()
    assert "printed ***" in out and "logged ***" in err, (out, err)
    assert secret not in out + err


def test_names_the_core_holds_or_another_plugin_took_are_refused_with_a_warning():
    seen: dict = {}
    pm = manager.make_plugin_manager(
        load_entrypoints=False,
        extra=[
            _plugin("first", _command("hello", seen)),
            _plugin("second", _command("hello", seen), _command("mcp", seen), _command("mine", seen)),
            _plugin("third", _command("other", seen), raises=True),
            _plugin("fourth", _command("fourth", seen), "not a command"),
        ],
    )
    found, warnings = plugin_commands(pm, {"mcp", "remote"})
    assert set(found) == {"hello", "mine"}
    text = "\n".join(warnings)
    assert "plugin second: command 'hello' is already added by plugin first: not added" in text
    assert "command 'mcp' is one of kxen's own: not added" in text
    assert (
        "plugin fourth: kxen_register_commands raised TypeError: register() takes a kxen_core.commands.Command, not str"
        in text
    )
    assert "plugin third: kxen_register_commands raised RuntimeError: broken registration" in text


@pytest.mark.parametrize("name", ["", "Hello", "1st", "a b", "x" * 33, "--flag"])
def test_a_command_name_is_a_lowercase_word(name):
    with pytest.raises(ValueError, match="a command name is a lowercase word"):
        _command(name, {})


def test_the_core_commands_do_not_load_plugins_for_commands(kxen_home, monkeypatch, capsys):
    """``kxen plugins``, ``kxen --version`` and ``kxen mcp ...`` never ask kxen_register_commands."""
    asked: list[int] = []
    monkeypatch.setattr("kxen_core.plugins.commands.plugin_commands", lambda *a: asked.append(1) or ({}, []))
    assert main(["--home", str(kxen_home.path), "plugins"]) == 0
    assert main(["--home", str(kxen_home.path), "remote", "off"]) == 0
    assert asked == []


def test_settings_without_its_plugin_names_what_to_install(kxen_home, monkeypatch, capsys):
    monkeypatch.setenv("KXEN_DISABLE_PLUGINS", "settings")
    with pytest.raises(SystemExit) as exc:
        main(["--home", str(kxen_home.path), "settings"])
    assert exc.value.code == 2
    assert "kxen settings is a plugin's command: install kxen-settings-web" in capsys.readouterr().err


def test_an_unknown_command_is_still_a_usage_error(kxen_home, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--home", str(kxen_home.path), "no-such-command"])
    assert exc.value.code == 2
    assert "invalid choice: 'no-such-command'" in capsys.readouterr().err


def test_a_signal_cancels_a_plugin_command_and_closes_its_servers(kxen_home, ws, tmp_path):
    """A real ``kxen`` process with a plugin command (registered by a sitecustomize on its path)
    that serves the demo server until SIGTERM: kxen exits 143 and the server's process is gone."""
    kxen_home.write_servers({"demo": demo_entry()})
    pidfile = tmp_path / "pid"
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        textwrap.dedent(
            f"""
            import anyio
            import kxen_core.plugins.manager as manager
            from kxen_core import hookimpl
            from kxen_core.commands import Command

            async def run(runtime, args):
                async with runtime:
                    await runtime.wait_ready(30)
                    pid = runtime.status()[0]["transportInfo"]["pid"]
                    open({str(pidfile)!r}, "w").write(str(pid))
                    await anyio.sleep_forever()

            class Plugin:
                @hookimpl
                def kxen_register_commands(self, register):
                    register(Command(name="hold", help="hold", configure=lambda p: None, run=run))

            real = manager.make_plugin_manager
            def make(*a, **k):
                k["extra"] = [*k.get("extra", []), Plugin()]
                return real(*a, **k)
            manager.make_plugin_manager = make
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(site), "KXEN_HOME": str(kxen_home.path)}
    proc = subprocess.Popen([sys.executable, "-m", "kxen_core.cli", "--workspace", str(ws), "hold"], env=env)
    try:
        pid = _wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=WAIT) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=WAIT)
    assert _wait_for(lambda: not _alive(int(pid)), None)


def _wait_for(predicate, proc):
    for _ in range(WAIT * 20):
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"kxen exited early: {proc.returncode}")
        time.sleep(0.05)
    raise AssertionError("timed out")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_kxen_help_lists_the_plugins_commands(capsys):
    """The installed Settings page's command is in ``kxen --help`` beside the core's."""
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "settings" in out and "open the Settings page" in out and "mcp" in out

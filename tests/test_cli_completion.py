"""``kxen completion bash|zsh``: the script completes exactly the parser's commands and options
(checked by running it in bash)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kxen_core.cli import command as cli
from kxen_core.cli.completion import script

BASH = shutil.which("bash")


def complete(words: list[str]) -> list[str]:
    """What the bash script offers for the last word of ``kxen <words>``."""
    if BASH is None:
        pytest.skip("bash is not installed")
    body = script(cli._parser(), "bash")
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in ["kxen", *words])
    run = (
        f"{body}\nCOMP_WORDS=({quoted}); COMP_CWORD={len(words)}; _kxen_complete; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    )
    proc = subprocess.run([BASH, "--noprofile", "--norc", "-c", run], capture_output=True, text=True, timeout=20)
    assert proc.returncode == 0, proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


def test_commands_subcommands_options_and_choices():
    assert {"mcp", "trust", "config", "completion", "--home", "--version"} <= set(complete([""]))
    assert complete(["mcp", "st"]) == ["status"]
    assert set(complete(["mcp", "status", "--"])) == {"--help", "--json", "--wait"}
    assert complete(["--home", "somewhere", "mcp", "pl"]) == ["plan"]  # a global option's value is skipped
    assert complete(["remote", ""]) == ["--help", "--yes", "-h", "off", "on"]
    assert complete(["config", "ch"]) == ["check"]


def test_every_subcommand_of_the_parser_is_offered():
    import argparse

    def subcommands(parser: argparse.ArgumentParser) -> list[str]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                return sorted(action.choices)
        return []

    parser = cli._parser()
    assert set(subcommands(parser)) <= set(complete([""]))
    mcp = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["mcp"]
    assert set(subcommands(mcp)) <= set(complete(["mcp", ""]))


def test_zsh_goes_through_bash_completion_and_a_bad_shell_is_a_usage_error(capsys):
    assert script(cli._parser(), "zsh").startswith("autoload -U +X bashcompinit && bashcompinit\n")
    with pytest.raises(SystemExit) as info:
        cli.main(["completion", "fish"])
    assert info.value.code == 2
    assert cli.main(["completion", "bash"]) == 0
    assert "complete -o default -F _kxen_complete kxen" in capsys.readouterr().out


def test_the_verbs_that_change_one_setting_complete():
    assert complete(["mcp", "po"]) == ["policy"]
    assert {"enable", "disable"} <= set(complete(["mcp", ""]))
    assert set(complete(["mcp", "policy", "--"])) == {"--default", "--help", "--json", "--scope"}
    assert set(complete(["config", ""])) >= {"check", "set"}
    assert {"--cwd", "--timeout", "--policy"} <= set(complete(["mcp", "add", "--"]))

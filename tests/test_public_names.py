"""The names hosts and plugin authors import keep working, wherever their code lives inside the core:
every name ``kxen_core`` exports, the module paths the docs and the plugins use, the ``kxen`` script
and ``python -m kxen_core.cli``, and every ``from kxen_core... import ...`` line in the docs."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kxen_core

ROOT = Path(__file__).resolve().parents[1]

#: module paths outside code imports: in the docs, in the plugins' sources, in hosts written against them
DOCUMENTED = {
    "kxen_core.policy": ["ApprovalDecision", "ApprovalRequest", "ToolCall", "Vote", "combine"],
    "kxen_core.policy.egress": ["EgressPolicy", "classify", "current_egress", "egress_for", "using_egress"],
    "kxen_core.plugins": ["KxenPluginManager", "LoadFailure", "PluginInfo", "make_plugin_manager"],
    "kxen_core.runtime": ["Runtime"],
    "kxen_core.safe_text": ["safe_text", "json_text", "Secrets", "redacted_url"],
    "kxen_core.auth": ["AuthFlow", "LoginRequest"],
    "kxen_core.asks": ["ElicitationRequest", "SamplingRequest", "apply_schema_defaults"],
    "kxen_core.config": ["Config", "ServerConfig", "Settings", "OAuthConfig", "Timeouts", "load_config"],
    "kxen_core.config.models": [
        "ServerConfig",
        "Settings",
        "OAuthConfig",
        "RemoteCatalogLimits",
        "UNREAD",
        "check_server_key",
        "is_loopback_host",
    ],
    "kxen_core.transport": ["MessageStream", "Transport", "TransportContext", "RequestFailed", "CredentialRequest"],
    "kxen_core.errors": ["KxenError", "ConfigError", "AuthRequired", "PluginHookError", "printable"],
    "kxen_core.hookspecs": ["hookimpl"],
    "kxen_core.agent.model_formats": ["FORMATS", "ModelTools", "model_tools"],
    "kxen_core.agent.model_calls": ["ModelCall", "parse_call", "tool_result"],
    "kxen_core.cli": ["main"],
}


def test_every_exported_name_loads_and_all_lists_exactly_them():
    lazy = set(kxen_core._LAZY)
    assert set(kxen_core.__all__) == lazy | {"__version__", "hookimpl"}
    for name in kxen_core.__all__:
        assert getattr(kxen_core, name) is not None, name
    with pytest.raises(AttributeError):
        kxen_core.NoSuchName  # noqa: B018


def test_the_testing_plugin_lists_exactly_what_it_loads():
    import kxen_testing

    assert set(kxen_testing.__all__) == set(kxen_testing._LAZY)
    for name in kxen_testing.__all__:
        assert getattr(kxen_testing, name) is not None, name


@pytest.mark.parametrize("module", sorted(DOCUMENTED))
def test_documented_module_paths_keep_their_names(module):
    loaded = importlib.import_module(module)
    missing = [name for name in DOCUMENTED[module] if not hasattr(loaded, name)]
    assert missing == []


def test_the_public_classes_are_one_object_whichever_path_names_them():
    from kxen_core.config.models import Settings as from_models
    from kxen_core.plugins import make_plugin_manager
    from kxen_core.runtime import Runtime

    assert kxen_core.Runtime is Runtime
    assert kxen_core.Settings is from_models
    assert kxen_core.plugins.manager.make_plugin_manager is make_plugin_manager


def _doc_imports() -> list[str]:
    found = set()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("plugins/*/README.md"))]:
        for match in re.finditer(r"^\s*(from kxen_core[\w.]* import [\w, ]+)$", path.read_text(), re.M):
            found.add(match.group(1).strip())
    return sorted(found)


def test_the_docs_import_lines_all_work():
    lines = _doc_imports()
    assert len(lines) >= 5  # the docs show imports; if none are found the pattern is wrong
    failed = []
    for line in lines:
        try:
            exec(line, {})
        except ImportError as exc:
            failed.append(f"{line}: {exc}")
    assert failed == []


def test_the_console_script_and_python_dash_m_run_the_command():
    (script,) = [ep for ep in importlib.metadata.entry_points(group="console_scripts") if ep.name == "kxen"]
    assert script.value == "kxen_core.cli:main" and script.load() is kxen_core.cli.main
    proc = subprocess.run(
        [sys.executable, "-m", "kxen_core.cli", "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.startswith("kxen "), proc.stdout + proc.stderr

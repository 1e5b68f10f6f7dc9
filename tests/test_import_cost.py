"""What importing kxen loads (the import target of docs/performance.md): a fresh interpreter imports
``kxen_core.runtime.workspace`` and ``kxen_core.plugins.manager`` and makes the plugin manager, and none of what a
Runtime loads only when it is made, entered or used is loaded yet.

Module lists, not timings: a timed assertion would be flaky on a shared machine.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

IMPORT = (
    "import kxen_core.runtime.workspace, kxen_core.plugins.manager; "
    "pm = kxen_core.plugins.manager.make_plugin_manager()"
)

#: loaded only when a Runtime is made, entered or used (or never, for a host that does not use it);
#: plugin discovery is importlib.metadata's, which loads pathlib, shutil, email, zipfile... itself
NOT_ON_IMPORT = (
    # the standard library
    "asyncio",  # the session's fast path takes it from a running loop
    "ssl",
    "subprocess",
    "secrets",  # a sign-in's flow id
    "hashlib",  # fingerprints and digests
    "logging",  # hook tracing takes its logger once something loaded logging
    "cattrs",  # the config loader
    # kxen's own modules a Runtime loads when it is made, entered or used
    "kxen_core.config",
    "kxen_core.config.converter",
    "kxen_core.runtime.server",
    "kxen_core.protocol.session",
    "kxen_core.transport",
    "kxen_core.protocol.era",
    "kxen_core.runtime.admission",
    "kxen_core.policy.approvals",
    "kxen_core.policy.votes",
    "kxen_core.runtime.calls",
    "kxen_core.runtime.contents",
    "kxen_core.runtime.kxen_tools",
    "kxen_core.runtime.search_tools",
    "kxen_core.agent.tool_search",
    "kxen_core.agent.output",
    "kxen_core.runtime.logins",
    "kxen_core.auth",
    "kxen_core.launch.resolve",
    "kxen_core.protocol.catalog",
    "kxen_core.plugins.kinds",
    # the plugins' own code beyond their entry points
    "kxen_transport_http.streamable",
    "kxen_transport_stdio.transport",
    "kxen_oauth.flow",
    "kxen_testing.fake",
    "httpx",
    # the agent-framework adapters and their frameworks: libraries a host imports, never the core
    "kxen_adapter_pydantic_ai",
    "kxen_adapter_langchain",
    "kxen_adapter_openai_agents",
    "pydantic_ai",
    "langchain_core",
    "agents",
    "pydantic",
)


def run(code: str, *env: str) -> dict[str, object]:
    import os

    environ = {k: v for k, v in os.environ.items() if not k.startswith("KXEN_")}
    environ.update(e.split("=", 1) for e in env)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=environ, check=False
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_importing_kxen_and_making_the_plugin_manager_loads_only_what_that_needs():
    got = run(
        IMPORT + "\nimport json, sys\n"
        "print(json.dumps({'modules': sorted(sys.modules), 'plugins': sorted(n for n, _ in pm.list_name_plugin()),"
        " 'failures': [f.entry_point for f in pm.entry_failures]}))"
    )
    modules = set(got["modules"])  # type: ignore[arg-type]
    # it did its job: the runtime module and every installed plugin's entry point are loaded
    assert {"kxen_core.runtime.workspace", "kxen_core.plugins.manager", "kxen_core.policy.defaults"} <= modules
    assert {"memory", "stdio", "http", "sse", "oauth", "tty"} <= set(got["plugins"])  # type: ignore[arg-type]
    assert got["failures"] == []
    loaded = sorted(m for m in NOT_ON_IMPORT if m in modules or any(k.startswith(m + ".") for k in modules))
    assert loaded == []


def test_what_was_left_out_loads_when_a_runtime_is_made_and_used(tmp_path):
    """The other side of the list above: the deferred modules are there when needed."""
    code = (
        IMPORT + "\nimport json, sys\n"
        "from kxen_core import Runtime\n"
        f"rt = Runtime(home={str(tmp_path)!r}, workspace={str(tmp_path)!r}, pm=pm)\n"
        "rt.load()\n"
        "print(json.dumps({'modules': sorted(sys.modules)}))"
    )
    modules = set(run(code)["modules"])  # type: ignore[arg-type]
    assert {
        "pathlib",
        "cattrs",
        "kxen_core.config",
        "kxen_core.policy.approvals",
        "kxen_core.policy.votes",
        "kxen_core.protocol.era",
    } <= modules


@pytest.mark.parametrize("how", ["basicConfig", "setLevel"])
def test_hook_tracing_follows_logging_loaded_after_kxen(how):
    """kxen does not load logging; a host that loads and configures it later still turns tracing on."""
    turn_on = (
        "logging.basicConfig(level=logging.DEBUG)"
        if how == "basicConfig"
        else "logging.getLogger('kxen.hooks').setLevel(logging.DEBUG)"
    )
    code = (
        "import json, sys\nfrom kxen_core import hookcall\n"
        "before = ('logging' in sys.modules, hookcall.tracing())\n"
        f"import logging\nquiet = hookcall.tracing()\n{turn_on}\n"
        "print(json.dumps([*before, quiet, hookcall.tracing()]))"
    )
    assert run(code) == [False, False, False, True]  # type: ignore[comparison-overlap]


def test_an_installed_plugin_named_in_the_allowlist_still_loads_with_its_distribution_name():
    """Reading a distribution's name (for the allow/block lists, messages) works: plugin discovery
    is importlib.metadata's (it costs about a sixth of the import: kxen does not find distributions
    itself, see docs/performance.md)."""
    code = (
        "import json, sys\nfrom kxen_core.plugins.manager import make_plugin_manager\n"
        "pm = make_plugin_manager()\n"
        "print(json.dumps({'plugins': sorted(n for n, _ in pm.list_name_plugin()), 'dists': sorted(p.dist or '' "
        "for p in pm.infos()),"
        " 'metadata': 'importlib.metadata' in sys.modules}))"
    )
    got = run(code, "KXEN_LOAD_PLUGINS=kxen-transport-stdio,memory")
    assert {"stdio", "memory"} <= set(got["plugins"]) and "http" not in got["plugins"]  # type: ignore[operator]
    assert {"kxen-transport-stdio", "kxen-testing"} <= set(got["dists"])  # type: ignore[arg-type]
    assert got["metadata"] is True

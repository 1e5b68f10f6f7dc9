"""The layer contract (import-linter, in pyproject.toml) holds, and it can fail: a copy of the core
with one forbidden import added breaks the contract that names it.

The contracts: each subpackage of ``kxen_core`` uses only those below it (docs/architecture.md), the
core never imports a plugin, and no package of the core has an import circle. Imports under
``if TYPE_CHECKING:`` are annotations only and do not count.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_SECONDS = 120


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    lint = Path(sys.executable).parent / "lint-imports"
    if not lint.exists():
        pytest.skip("import-linter is not installed (it is in the dev group)")
    return subprocess.run(
        [str(lint), "--no-cache"],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd)},
        capture_output=True,
        text=True,
        timeout=LINT_SECONDS,
    )


def _copy(tmp_path: Path) -> Path:
    """The core and the contract, alone in ``tmp_path`` (the plugins' packages as empty stand-ins,
    so the forbidden contract can name them)."""
    shutil.copytree(ROOT / "kxen_core", tmp_path / "kxen_core", ignore=shutil.ignore_patterns("__pycache__"))
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    lines = ["[importlinter]", f"root_package = {config['root_package']}", "include_external_packages = True"]
    lines.append("exclude_type_checking_imports = True")
    for i, contract in enumerate(config["contracts"]):
        lines.append(f"[importlinter:contract:{i}]")
        for key, value in contract.items():
            if isinstance(value, list):
                lines.append(f"{key} =\n" + "\n".join(f"    {v}" for v in value))
            else:
                lines.append(f"{key} = {value}")
    (tmp_path / ".importlinter").write_text("\n".join(lines) + "\n")
    return tmp_path


def _add_import(root: Path, module: str, statement: str) -> None:
    path = root / (module.replace(".", "/") + ".py")
    text = path.read_text()
    path.write_text(text + f"\n\ndef _added():  # a lazy import counts too\n    {statement}\n")


def test_the_layer_contract_holds():
    proc = _lint(ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "BROKEN" not in proc.stdout and proc.stdout.count("KEPT") >= 3, proc.stdout[-2000:]


@pytest.mark.parametrize(
    "module, statement, broken",
    [
        # config is below the runtime: an import back up breaks the layers
        ("kxen_core.config.models", "import kxen_core.runtime.workspace", "layers"),
        # the protocol may not use policy, even lazily
        ("kxen_core.protocol.session", "from kxen_core.policy import votes", "layers"),
        # the hook contract at the top imports no subpackage
        ("kxen_core.safe_text", "from kxen_core.config import project", "layers"),
        # the core never imports a plugin
        ("kxen_core.runtime.server", "import kxen_oauth", "the core never imports a plugin"),
        # two modules of one package importing each other: a circle
        ("kxen_core.runtime.states", "from kxen_core.runtime import server", "no import circle"),
    ],
)
def test_a_forbidden_import_breaks_the_contract_that_names_it(tmp_path, module, statement, broken):
    root = _copy(tmp_path)
    (root / "kxen_oauth").mkdir()
    (root / "kxen_oauth" / "__init__.py").write_text("")
    assert _lint(root).returncode == 0  # the copy as it is keeps every contract
    _add_import(root, module, statement)
    proc = _lint(root)
    assert proc.returncode != 0, proc.stdout[-3000:]
    broken_lines = [line for line in proc.stdout.splitlines() if line.endswith("BROKEN")]
    assert len(broken_lines) >= 1 and any(line.startswith(broken) for line in broken_lines), proc.stdout[-3000:]
    # the report names the importer: whole, or relative to its package in a circle's report
    leaf = module.rsplit(".", 1)[1]
    assert module in proc.stdout or f".{leaf} -> " in proc.stdout, proc.stdout[-3000:]


#: DESIGN: "Modules stay 50-400 lines" (the upper bound is the one a growing module meets)
MAX_MODULE_LINES = 400


def test_no_module_of_the_core_or_a_plugin_is_over_400_lines():
    sources = [*ROOT.glob("kxen_core/**/*.py"), *ROOT.glob("plugins/*/src/**/*.py")]
    assert len(sources) > 100  # the glob found the tree
    long = {str(p.relative_to(ROOT)): n for p in sources if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}

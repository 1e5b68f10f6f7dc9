"""kxen installs like a real package: build every wheel with ``uv build --all-packages``, install
them with plain pip into a fresh virtual environment, and run the installed ``kxen`` command.

One environment serves every scenario, growing step by step: ``kxen`` alone (no transport plugin),
then ``kxen[stdio]`` (the demo call works), then ``kxen[all]`` (every transport and the tty channel);
neither ``kxen`` nor ``kxen[all]`` brings an agent framework (the adapters' extras do).
Third-party dependencies come from the package index pip is configured with; the kxen dists come
only from the freshly built wheels (pinned to their version, so nothing else can stand in for them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import venv
import zipfile
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[1]
DISTS = {
    "kxen",
    "kxen_transport_stdio",
    "kxen_transport_http",
    "kxen_transport_sse",
    "kxen_approval_tty",
    "kxen_testing",
    "kxen_oauth",
    "kxen_settings_web",
    "kxen_adapter_pydantic_ai",
    "kxen_adapter_langchain",
    "kxen_adapter_openai_agents",
}
#: the agent-framework adapters: libraries over a Runtime, not kxen plugins (no entry point), each
#: pulling its framework -- which neither ``kxen`` nor ``kxen[all]`` brings
ADAPTERS = {
    "kxen_adapter_pydantic_ai": "pydantic-ai-slim",
    "kxen_adapter_langchain": "langchain-core",
    "kxen_adapter_openai_agents": "openai-agents",
}
#: the frameworks' import names
FRAMEWORKS = ("pydantic_ai", "langchain_core", "agents")
#: what each plugin dist registers in the ``kxen`` entry-point group
ENTRY_POINTS = {
    "kxen_transport_stdio": "stdio = kxen_transport_stdio.hooks",
    "kxen_transport_http": "http = kxen_transport_http.hooks",
    "kxen_transport_sse": "sse = kxen_transport_sse.hooks",
    "kxen_approval_tty": "tty = kxen_approval_tty.hooks",
    "kxen_testing": "memory = kxen_testing.hooks",
    "kxen_oauth": "oauth = kxen_oauth.hooks",
    "kxen_settings_web": "settings = kxen_settings_web.hooks",
}
PLUGINS = {"stdio", "http", "sse", "tty", "oauth", "settings"}  # what kxen[all] brings (kxen-testing is not in it)
#: what the root dist may require: exactly what kxen_core imports
CORE_DEPENDENCIES = {
    *("pluggy", "attrs", "cattrs", "anyio", "tomli", "rich", "tomlkit", "filelock", "jsonschema", "orjson"),
}
COMPATIBLE = SpecifierSet(">=0.1,<0.2")
BUILD_TIMEOUT = 300
PIP_TIMEOUT = 600
RUN_TIMEOUT = 60


def _unavailable(reason: str) -> None:
    """Skip, but fail in CI (as the root conftest does for missing tools)."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _env() -> dict[str, str]:
    """The environment for the installed kxen: this test run's virtualenv and settings left out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KXEN_")}
    for key in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(key, None)
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def _run(argv: list[str], *, timeout: float, cwd: Path = ROOT) -> str:
    proc = subprocess.run(
        argv, cwd=cwd, env=_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every dist's wheel, built once for this module: ``{distribution: wheel path}``."""
    uv = shutil.which("uv")
    if uv is None:
        _unavailable("uv is not on PATH, so the wheels cannot be built")
    out = tmp_path_factory.mktemp("wheels")
    _run([uv, "build", "--all-packages", "--quiet", "-o", str(out)], timeout=BUILD_TIMEOUT)
    built = {p.name.split("-")[0]: p for p in out.glob("*.whl")}
    assert set(built) == DISTS, sorted(p.name for p in out.iterdir())
    return built


@pytest.fixture(scope="module")
def env_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with pip and nothing else."""
    path = tmp_path_factory.mktemp("venv") / "env"
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return path


def _pip_install(env_dir: Path, wheels: dict[str, Path], requirement: str) -> None:
    _run(
        [
            str(env_dir / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--timeout",
            "60",
            "--retries",
            "2",
            "--find-links",
            str(wheels["kxen"].parent),
            requirement,
        ],
        timeout=PIP_TIMEOUT,
    )


def _plugins(env_dir: Path) -> dict[str, str]:
    """``kxen plugins --json`` of the installed kxen: entry-point plugin name -> its dist (exit 0)."""
    report = json.loads(_run([str(env_dir / "bin" / "kxen"), "plugins", "--json"], timeout=RUN_TIMEOUT))
    assert report["failures"] == [], report
    return {p["name"]: p["dist"] for p in report["plugins"] if p["source"] == "entry point"}


def _installed(env_dir: Path, modules: tuple[str, ...], cwd: Path) -> list[str]:
    """Which of ``modules`` the environment can import (found, not imported)."""
    code = (
        f"import importlib.util, json; print(json.dumps([m for m in {list(modules)!r} if importlib.util.find_spec(m)]))"
    )
    return json.loads(_run([str(env_dir / "bin" / "python"), "-c", code], timeout=RUN_TIMEOUT, cwd=cwd))


def _dist_info(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as zf:
        (member,) = [n for n in zf.namelist() if n.endswith(f".dist-info/{name}")]
        return zf.read(member).decode()


def _metadata(wheel: Path) -> Message:
    return HeaderParser().parsestr(_dist_info(wheel, "METADATA"))


def _requires(wheel: Path, extra: str | None = None) -> dict[str, Requirement]:
    """The wheel's Requires-Dist for ``extra`` (None: the unconditional ones), by name."""
    out = {}
    for line in _metadata(wheel).get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is None or "extra" not in str(req.marker):
            if extra is None:
                out[req.name] = req
        elif extra is not None and req.marker.evaluate({"extra": extra}):
            out[req.name] = req
    return out


def test_wheels_carry_entry_points_dependencies_and_extras(wheels):
    with zipfile.ZipFile(wheels["kxen"]) as zf:
        names = zf.namelist()
    assert "kxen_core/cli/command.py" in names and "kxen_core/config/trust.py" in names
    assert not [n for n in names if not n.startswith(("kxen_core/", "kxen-"))], names
    assert "kxen = kxen_core.cli:main" in _dist_info(wheels["kxen"], "entry_points.txt").splitlines()

    assert set(_requires(wheels["kxen"])) == CORE_DEPENDENCIES
    assert set(_metadata(wheels["kxen"]).get_all("Provides-Extra")) == {
        "stdio",
        "http",
        "sse",
        "tty",
        "testing",
        "oauth",
        "settings",
        "pydantic-ai",
        "langchain",
        "openai-agents",
        "all",
    }
    pulls = {
        "stdio": {"kxen-transport-stdio"},
        "http": {"kxen-transport-http"},
        "sse": {"kxen-transport-sse"},
        "tty": {"kxen-approval-tty"},
        "testing": {"kxen-testing"},
        "oauth": {"kxen-oauth"},
        "settings": {"kxen-settings-web"},
        "pydantic-ai": {"kxen-adapter-pydantic-ai"},
        "langchain": {"kxen-adapter-langchain"},
        "openai-agents": {"kxen-adapter-openai-agents"},
        "all": {
            "kxen-transport-stdio",
            "kxen-transport-http",
            "kxen-transport-sse",
            "kxen-approval-tty",
            "kxen-oauth",
            "kxen-settings-web",
        },
    }
    for extra, dists in pulls.items():
        reqs = _requires(wheels["kxen"], extra)
        assert set(reqs) == dists, (extra, reqs)
        assert all(r.specifier == COMPATIBLE for r in reqs.values()), (extra, reqs)

    for dist, entry_point in ENTRY_POINTS.items():
        text = _dist_info(wheels[dist], "entry_points.txt")
        assert text.splitlines()[0] == "[kxen]" and entry_point in text.splitlines(), (dist, text)
        assert _requires(wheels[dist])["kxen"].specifier == COMPATIBLE, dist
    assert _requires(wheels["kxen_transport_sse"])["kxen-transport-http"].specifier == COMPATIBLE
    for dist, framework in ADAPTERS.items():
        assert set(_requires(wheels[dist])) == {"kxen", framework}, dist
        assert _requires(wheels[dist])["kxen"].specifier == COMPATIBLE, dist
        with zipfile.ZipFile(wheels[dist]) as zf:
            assert not [n for n in zf.namelist() if n.endswith("entry_points.txt")], dist
    with zipfile.ZipFile(wheels["kxen_settings_web"]) as zf:  # the page's templates and assets travel with it
        names = set(zf.namelist())
    for part in ("templates/page.html", "templates/servers.html", "static/settings.js", "static/settings.css"):
        assert f"kxen_settings_web/{part}" in names, part


def test_pip_installs_kxen_and_its_extras_pull_the_plugins(wheels, env_dir, tmp_path):
    version = wheels["kxen"].name.split("-")[1]

    _pip_install(env_dir, wheels, f"kxen=={version}")
    where = _run(
        [str(env_dir / "bin" / "python"), "-c", "import kxen_core; print(kxen_core.__file__)"],
        timeout=RUN_TIMEOUT,
        cwd=tmp_path,
    )
    assert Path(where.strip()).is_relative_to(env_dir), where
    assert _plugins(env_dir) == {}, "kxen without extras brought a plugin"
    assert _installed(env_dir, FRAMEWORKS, tmp_path) == [], "kxen without extras brought an agent framework"

    _pip_install(env_dir, wheels, f"kxen[stdio]=={version}")
    assert _plugins(env_dir) == {"stdio": "kxen-transport-stdio"}
    out = _run(
        [
            str(env_dir / "bin" / "kxen"),
            "--home",
            "demo/home",
            "mcp",
            "call",
            "demo",
            "add",
            "--args",
            '{"a": 2, "b": 40}',
        ],
        timeout=RUN_TIMEOUT,
    )
    assert out.strip() == '{"sum": 42}'

    _pip_install(env_dir, wheels, f"kxen[all]=={version}")
    assert set(_plugins(env_dir)) == PLUGINS
    assert _installed(env_dir, FRAMEWORKS, tmp_path) == [], "kxen[all] brought an agent framework"

"""Launchers that look into their working directory: one small table of rules.

A stdio server starts with the workspace as its cwd (or a directory in it). Many launchers then
prefer what that directory holds over what the user meant: ``npx pkg`` runs
``./node_modules/.bin/<bin>`` and reads ``./.npmrc``, ``python -m mod`` and ``python -c`` import
``./mod/`` or any module the cwd holds before an installed one (:mod:`.python_cli`), ``uv run`` runs
the project of ``./pyproject.toml``, ``deno`` reads ``./deno.json``, an interpreter given
``server.py`` runs the repository's file. The repository controls all of these.

Each :class:`Rule` names the commands it applies to (by basename; an optional subcommand), the
option that takes the thing it runs (``-m``), and the paths in the cwd -- and each of its parents up
to the workspace root -- that the launcher would pick up. :func:`picked_up` returns the ones that
exist; a launch that has any is held for workspace trust and approval of its fingerprint, whoever
configured it (:mod:`.launch`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

import attrs

from kxen_core.config.paths import real, under
from kxen_core.launch.python_cli import cwd_import, importable, module_name

#: the most of a config file read to see whether it configures a launcher (e.g. ``[tool.uv`` in pyproject.toml)
MAX_SNIFF_BYTES = 1024 * 1024
#: how many positional arguments are looked at as scripts
MAX_SCRIPT_ARGS = 32
#: how many arguments are looked at as workspace paths
MAX_PATH_ARGS = 256

# patterns as text: each is compiled (and cached by ``re``) when a launch is first checked, not on import
_PYTHON = r"python(\d+(\.\d+)?)?[a-z]?(\.exe)?|pypy\d*(\.\d+)?"
_SCRIPT_RUNNERS = (
    r"node(js)?|tsx|ts-node|bun|deno|ruby|perl|php|bash|sh|zsh|dash|ksh|fish|lua|Rscript|osascript|java|" + _PYTHON
)


@attrs.frozen
class Rule:
    """One launcher. ``commands``: a regex the command's basename must match in full;
    ``subcommands``: when not empty, the first argument must be one of them; ``module_option``: the
    option whose value names what runs (``{module}`` in ``paths`` is its top-level name);
    ``{package}`` is the first positional argument with any version stripped; ``{script}`` is any
    positional argument that names a workspace file. ``sniff``: path -> a text that must be in that
    file for it to count (for config files that only sometimes configure the launcher).
    ``imports_cwd``: the rule applies only to a Python launch that puts its cwd first on the import
    path (``-m``, ``-c``, stdin; not with ``-I``/``-P``); ``{cwd}`` is then every module and package
    the cwd holds, when the cwd is in the workspace."""

    name: str
    commands: str
    paths: tuple[str, ...]
    subcommands: tuple[str, ...] = ()
    module_option: str | None = None
    sniff: dict[str, str] = attrs.field(factory=dict)
    #: when not empty, the rule applies only when one of these options is given (``--opt`` or ``--opt=x``)
    when_options: tuple[str, ...] = ()
    imports_cwd: bool = False
    how: str = ""


_NPM_FILES = ("package.json", ".npmrc", "node_modules/{package}", "node_modules/.bin")

RULES: tuple[Rule, ...] = (
    Rule("npx", r"npx|pnpx", _NPM_FILES, how="npx prefers the workspace's node_modules and reads its .npmrc"),
    Rule(
        "npm exec",
        r"npm",
        _NPM_FILES,
        subcommands=("exec", "x", "run", "run-script", "start", "test", "restart", "stop"),
        how="npm runs the workspace's packages and scripts",
    ),
    Rule(
        "yarn/pnpm",
        r"yarn|pnpm",
        (*_NPM_FILES, ".yarnrc.yml", ".yarnrc", ".pnpmfile.cjs", ".yarn"),
        how="yarn and pnpm run the workspace's packages and scripts (any word can name a script)",
    ),
    Rule("bunx", r"bunx", (*_NPM_FILES, "bunfig.toml"), how="bunx prefers the workspace's node_modules"),
    Rule(
        "bun",
        r"bun",
        (*_NPM_FILES, "bunfig.toml", "{script}"),
        how="bun reads the workspace's bunfig.toml (preloads) and runs its packages and scripts",
    ),
    Rule(
        "node preload",
        r"node(js)?|tsx|ts-node",
        ("node_modules", "package.json"),
        when_options=("-r", "--require", "--import", "--loader", "--experimental-loader"),
        how="node resolves a bare --require/--import/--loader name in the workspace's node_modules",
    ),
    Rule("pipx run", r"pipx", ("{script}",), subcommands=("run",), how="pipx runs a workspace path it is given"),
    Rule(
        "deno",
        r"deno",
        ("deno.json", "deno.jsonc", "package.json", "node_modules", ".npmrc", "{script}"),
        how="deno reads the workspace's deno.json, package.json and node_modules",
    ),
    Rule(
        "python -m",
        _PYTHON,
        ("{module}", "{module}.py"),
        module_option="-m",
        imports_cwd=True,
        how="python -m imports the module it runs from the cwd first",
    ),
    Rule(
        "python -m/-c",
        _PYTHON,
        ("{cwd}",),
        imports_cwd=True,
        how="python -m and -c import from the cwd before anything installed (unless -I or -P is given)",
    ),
    Rule(
        "uvx",
        r"uvx",
        ("uv.toml", "pyproject.toml"),
        sniff={"pyproject.toml": "[tool.uv"},
        how="uvx reads the workspace's uv settings (indexes, sources)",
    ),  # fmt: skip
    Rule(
        "uv run",
        r"uv",
        ("pyproject.toml", "uv.lock", "uv.toml", ".venv", "{script}"),
        subcommands=("run",),
        how="uv run runs the workspace's project and its environment",
    ),
    Rule(
        "uv tool run",
        r"uv",
        ("uv.toml", "pyproject.toml"),
        subcommands=("tool",),
        sniff={"pyproject.toml": "[tool.uv"},
        how="uv tool reads the workspace's uv settings",
    ),  # fmt: skip
    Rule(
        "project runner",
        r"poetry|pdm|hatch|pipenv|cargo|go|make|just|rake|bundle|gradle|mvn",
        (
            "pyproject.toml",
            "Pipfile",
            "Cargo.toml",
            "go.mod",
            "Makefile",
            "makefile",
            "GNUmakefile",
            "justfile",
            "Rakefile",
            "Gemfile",
            "build.gradle",
            "build.gradle.kts",
            "pom.xml",
            "{script}",
        ),
        how="a project runner runs what the workspace's project file says",
    ),  # fmt: skip
    Rule("script", _SCRIPT_RUNNERS, ("{script}",), how="the interpreter runs the workspace's script"),
)


def _positional(args: Sequence[str], start: int = 0) -> str | None:
    """The first argument from ``start`` that is not an option (``--`` ends the options)."""
    skip_next = False
    for i in range(start, len(args)):
        arg = args[i]
        if skip_next:
            skip_next = False
            continue
        if arg == "--":
            return args[i + 1] if i + 1 < len(args) else None
        if arg in (
            "-p",
            "--package",
            "-m",
            "-c",
            "--call",
            "--from",
            "--with",
            "-e",
            "--eval",
            "--directory",
            "--project",
        ):
            skip_next = True  # the option's value is not what runs (npx -p pkg bin, uvx --from pkg bin)
            continue
        if arg.startswith("-"):
            continue
        return arg
    return None


def _package(spec: str | None) -> str | None:
    """``@scope/name@1.2`` -> ``@scope/name``; ``name@latest`` -> ``name``; None for a spec that
    does not name a package (a path, a URL, a git spec)."""
    if not spec or "://" in spec or spec.startswith((".", "/", "~")) or ":" in spec:
        return None
    scoped = spec.startswith("@")
    name = spec[1:] if scoped else spec
    name = name.split("@", 1)[0]
    if not re.fullmatch(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)?", name) or ".." in name.split("/"):
        return None
    return ("@" if scoped else "") + name


def _sniffed(path: str, needle: str) -> bool:
    try:
        with open(path, "rb") as f:
            return needle.encode() in f.read(MAX_SNIFF_BYTES)
    except OSError:
        return False


def _directories(cwd: str, workspace: str) -> list[str]:
    """cwd and its parents up to the workspace root (just cwd when it is outside the workspace)."""
    out = [cwd]
    if not under(cwd, workspace):
        return out
    current = cwd
    while current != workspace and len(out) < 64:
        parent = os.path.dirname(current)
        if parent == current:
            break
        out.append(parent)
        current = parent
    return out


def inside(path: str, root: str) -> bool:
    """Whether the (already canonical) ``path`` is ``root`` or under it."""
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:
        return False


#: compiled patterns and template fields, made on first use (not on import)
_PATTERNS: dict[str, re.Pattern[str]] = {}
_FIELDS: dict[str, list[str]] = {}


def _pattern(text: str) -> re.Pattern[str]:
    compiled = _PATTERNS.get(text)
    if compiled is None:
        compiled = _PATTERNS[text] = re.compile(text)
    return compiled


#: the rules whose commands match a basename, by basename (a host starts the same few commands again)
_RULES_FOR: dict[str, tuple[Rule, ...]] = {}
_RULES_FOR_MAX = 256


def _rules_for(base: str) -> tuple[Rule, ...]:
    """The :data:`RULES` whose ``commands`` match ``base`` in full, in their order."""
    rules = _RULES_FOR.get(base)
    if rules is None:
        rules = tuple(rule for rule in RULES if _pattern(rule.commands).fullmatch(base))
        if len(_RULES_FOR) < _RULES_FOR_MAX:
            _RULES_FOR[base] = rules
    return rules


def _fields(template: str) -> list[str]:
    fields = _FIELDS.get(template)
    if fields is None:
        fields = _FIELDS[template] = re.findall(r"\{(\w+)\}", template)
    return fields


def picked_up(
    command: str,
    args: Sequence[str],
    cwd: str,
    workspace: str,
    *,
    realpath: Callable[[str], str] = real,
    lexists: Callable[[str], bool] = os.path.lexists,
) -> list[tuple[Rule, str]]:
    """``(rule, path)`` for every workspace path a launcher would pick up from ``cwd``: ``cwd`` and
    ``workspace`` are canonical (realpath). ``realpath`` and ``lexists`` may be a caller's memos of
    them (one launch looks at the same arguments several times)."""
    base = os.path.basename(command)
    found: list[tuple[Rule, str]] = []
    scripts: dict[int, list[str]] = {}  # the workspace files among the positional arguments, by start
    named: list[str] | None = None  # the workspace paths the arguments name (the same for every rule)
    for rule in _rules_for(base):
        if rule.when_options and not any(a.split("=", 1)[0] in rule.when_options for a in args):
            continue
        if rule.imports_cwd and cwd_import(args) is None:
            continue
        start = 0
        if rule.subcommands:
            if not args or args[0] not in rule.subcommands:
                continue
            start = 1
        first = _positional(args, start)
        values = {
            "module": module_name(args, rule.module_option) if rule.module_option else None,
            "package": _package(first),
        }
        for template in rule.paths:
            if template == "{cwd}":
                if under(cwd, workspace):
                    found.extend((rule, path) for path in importable(cwd, lexists))
                continue
            if template == "{script}":
                if start not in scripts:
                    scripts[start] = _script_files(args[start:], cwd, workspace, realpath, lexists)
                found.extend((rule, path) for path in scripts[start])
                continue
            fields = _fields(template)
            if any(values.get(f) is None for f in fields):
                continue
            relative = template.format(**{f: values[f] for f in fields})
            for directory in _directories(cwd, workspace):
                path = os.path.join(directory, relative)
                if not lexists(path):
                    continue
                needle = rule.sniff.get(relative)
                if needle is not None and not _sniffed(path, needle):
                    continue
                found.append((rule, path))
        if named is None:
            named = _named_paths(args, cwd, workspace, realpath, lexists)
        found.extend((rule, path) for path in named)
    seen: set[str] = set()
    unique = []
    for rule, path in found:
        if path not in seen:
            seen.add(path)
            unique.append((rule, path))
    return unique


def _joined(cwd: str, arg: str) -> str:
    """``os.path.join(cwd, os.path.expanduser(arg))``, without the calls for the common case."""
    if arg.startswith("~"):
        arg = os.path.expanduser(arg)
    if arg.startswith(os.sep):
        return arg
    return (cwd if cwd.endswith(os.sep) else cwd + os.sep) + arg


def _script_files(
    args: Sequence[str], cwd: str, workspace: str, realpath: Callable[[str], str], lexists: Callable[[str], bool]
) -> list[str]:
    """Every positional argument that is a workspace file (relative to the cwd or absolute)."""
    found = []
    for arg in [a for a in args if a and not a.startswith("-") and "\0" not in a][:MAX_SCRIPT_ARGS]:
        joined = _joined(cwd, arg)
        if not lexists(joined):
            continue  # nothing there: no file (one lstat instead of resolving each part)
        path = realpath(joined)
        if os.path.isfile(path) and under(path, workspace):
            found.append(path)
    return found


def _named_paths(
    args: Sequence[str], cwd: str, workspace: str, realpath: Callable[[str], str], lexists: Callable[[str], bool]
) -> list[str]:
    """Any argument (or --option=value) that names a workspace path: npx ./pkg, uvx --from ./dir x."""
    found = []
    for arg in args[:MAX_PATH_ARGS]:
        for value in (arg, arg.partition("=")[2] if arg.startswith("-") else ""):
            if not value or "\0" in value or not (value.startswith((".", "~")) or "/" in value):
                continue
            joined = _joined(cwd, value)
            if not lexists(joined):
                continue
            path = realpath(joined)
            if under(path, workspace) and lexists(path):
                found.append(path)
    return found


__all__ = ["MAX_PATH_ARGS", "MAX_SCRIPT_ARGS", "MAX_SNIFF_BYTES", "RULES", "Rule", "inside", "picked_up"]

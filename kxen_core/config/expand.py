"""``${VAR}`` in user config: values taken from the host environment when the config is loaded.

In the user's own ``mcp.json``, ``${NAME}`` and ``${NAME:-default}`` in ``env`` values, ``headers``
values, ``url``, ``command`` and ``args`` (``${HOME}/bin/tool``) are replaced by the host's variable
``NAME`` (the default when it is unset or empty), so a token lives in the environment (or a secret
manager that sets it) rather than in the file. ``NAME`` is a letter or ``_``, then letters, digits
and ``_``; the default is any text without ``}``; ``$${`` writes a literal ``${``. A ``$`` not
followed by ``{`` is kept as it is. A value is expanded once: text that came from a variable is
never scanned again.

The values of variables that name places (``HOME``, ``USER``, ``TMPDIR``, ``XDG_*_HOME``...:
:data:`PUBLIC_VARIABLES`) are not secrets; every other value a variable supplies is.

A malformed reference is a config problem naming the key path -- never a value. An unset variable
without a default is not a malformed definition: the entry is kept as written, marked with the
variable and key path (:class:`~kxen_core.config.models.Unset`), and that one server fails in phase
``config`` with the variable's name and the next step while the others run; ``kxen config check``
still reports it (:func:`unset_problems`). Whatever else a variable supplied is a secret: it is remembered
on the entry (:class:`~kxen_core.config.models.Expanded`) and scrubbed from everything kxen prints.

Project config (a repository's ``.kxen/mcp.json``) may not reference host variables at all: a
repository must not pull the user's secrets into a server it ships. Any ``${`` in those fields of a
project entry is refused with that rule.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import attrs

from kxen_core.config.models import Expanded, ServerConfig, Unset

#: the fields whose values are expanded (in user config) or refused (in project config)
EXPANDED_FIELDS = ("env", "headers", "url", "command", "args")
PROJECT_RULE = (
    "project config must not reference host variables (${...}): a repository must not pull the user's "
    "secrets into a server it ships (set the value in user config, where ${VAR} is expanded)"
)

#: variables that name where things are, not secrets: their values are not scrubbed from output
#: (a home directory shown as ``***`` in every path would help nobody)
PUBLIC_VARIABLES = frozenset(
    ("HOME", "USER", "LOGNAME", "PWD", "TMPDIR", "USERPROFILE", "APPDATA", "LOCALAPPDATA")
    + tuple(f"XDG_{k}" for k in ("CONFIG_HOME", "DATA_HOME", "CACHE_HOME", "STATE_HOME", "RUNTIME_DIR"))
)
_START = re.compile(r"\$\$\{|\$\{")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class BadReference(ValueError):
    """A reference that cannot be expanded; the message is the rule (it names no value)."""


class UnsetVariable(BadReference):
    """``${NAME}`` of a variable that is not set, without a default: ``name`` is the variable."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"${{{name}}} is not set in the environment (set it, or give a default: ${{{name}:-value}})")


def expand(value: str, environ: Mapping[str, str]) -> tuple[str, list[str]]:
    """``value`` with every reference replaced, and the non-empty values the environment supplied.

    Raises :class:`BadReference` for an unset variable without a default or a malformed reference."""
    out: list[str] = []
    supplied: list[str] = []
    i = 0
    while True:
        m = _START.search(value, i)
        if m is None:
            out.append(value[i:])
            return "".join(out), supplied
        out.append(value[i : m.start()])
        if m.group() == "$${":  # an escaped, literal "${"
            out.append("${")
            i = m.end()
            continue
        end = value.find("}", m.end())
        if end < 0:
            raise BadReference(f"an unclosed '${{' at character {m.start()} (write '$${{' for a literal '${{')")
        name, sep, default = value[m.end() : end].partition(":-")
        if not _NAME.fullmatch(name):
            hint = " (write ${NAME}, not ${env:NAME})" if name.startswith("env:") else ""
            raise BadReference(
                f"a malformed reference at character {m.start()}: references are ${{NAME}} or "
                f"${{NAME:-default}}, NAME a letter or '_' then letters, digits and '_'{hint} "
                "(write '$${' for a literal '${')"
            )
        found = environ.get(name)
        if found:
            out.append(found)
            if name not in PUBLIC_VARIABLES:
                supplied.append(found)
        elif sep:
            out.append(default)
        elif found is None:
            raise UnsetVariable(name)
        # set but empty, without a default: it expands to the empty string
        i = end + 1


def _fields(server: ServerConfig) -> list[tuple[str, str, str]]:
    """``(key path suffix, key path as messages show it, value)`` of the fields that may reference variables."""
    from kxen_core.config.project import shown_key

    found = [(f"env.{k}", f"env.{shown_key(k)}", v) for k, v in server.env.items()]
    found += [(f"headers.{k}", f"headers.{shown_key(k)}", v) for k, v in server.headers.items()]
    if server.url is not None:
        found.append(("url", "url", server.url))
    if server.envFile is not None:
        found.append(("envFile", "envFile", server.envFile))
    if server.command is not None:
        found.append(("command", "command", server.command))
    found += [(f"args[{i}]", f"args[{i}]", a) for i, a in enumerate(server.args)]
    return found


def expand_server(
    server: ServerConfig, scope: str, environ: Mapping[str, str] | None = None
) -> tuple[ServerConfig, list[tuple[str, str]]]:
    """The entry with its references expanded (user scope), and ``(key path suffix, rule)`` problems.

    A reference to an unset variable (without a default) is no problem here: when it is the only kind
    of trouble, the entry comes back as written (nothing applied; what the set variables supplied is
    still remembered in ``expanded``, as secrets) with ``unset`` naming each such variable and key
    path; the runtime fails that server in phase ``config``. In project scope nothing is expanded:
    every field holding ``${`` is a problem (:data:`PROJECT_RULE`)."""
    fields = [f for f in _fields(server) if "${" in f[2]]
    if scope != "user":
        refused = [(shown, PROJECT_RULE) for _path, shown, _value in fields]
        if server.envFile is not None:
            from kxen_core.config.envfile import PROJECT_RULE as ENV_FILE_RULE

            refused.append(("envFile", ENV_FILE_RULE))
        return server, refused
    if server.envFile is not None:
        return _with_env_file(server, environ)
    if not fields:
        return server, []
    env = os.environ if environ is None else environ
    problems: list[tuple[str, str]] = []
    unset: list[Unset] = []
    expanded: list[Expanded] = []
    values: dict[str, str] = {}
    for path, shown, value in fields:
        try:
            new, supplied = expand(value, env)
        except UnsetVariable as exc:
            unset.append(Unset(path=shown, variable=exc.name))
            problems.append((shown, str(exc)))
            continue
        except BadReference as exc:
            problems.append((shown, str(exc)))
            continue
        values[path] = new
        expanded.append(Expanded(path=path, written=value, values=tuple(supplied)))
    if problems and len(unset) == len(problems):  # only unset variables: kept, failed when it would start
        # the values the set variables supplied are remembered (still secrets to scrub), not applied
        return attrs.evolve(server, unset=tuple(unset), expanded=tuple(expanded)), []
    if problems:
        return server, problems
    return attrs.evolve(
        server,
        expanded=tuple(expanded),
        env={k: values.get(f"env.{k}", v) for k, v in server.env.items()},
        headers={k: values.get(f"headers.{k}", v) for k, v in server.headers.items()},
        url=values.get("url", server.url),
        envFile=values.get("envFile", server.envFile),
        command=values.get("command", server.command),
        args=[values.get(f"args[{i}]", a) for i, a in enumerate(server.args)],
    ), []


#: what ``kxen mcp get`` shows for a value read from the entry's env file
FROM_ENV_FILE = "(from envFile)"


def _with_env_file(
    server: ServerConfig, environ: Mapping[str, str] | None
) -> tuple[ServerConfig, list[tuple[str, str]]]:
    """The entry expanded, then the variables of its ``envFile`` under its own ``env`` (the entry's
    win), each remembered as a secret (:mod:`.envfile`)."""
    from kxen_core.config.envfile import read_env_file

    expanded, problems = expand_server(attrs.evolve(server, envFile=None), "user", environ)
    path, path_problems = server.envFile or "", []
    if "${" in path:
        try:
            path, _supplied = expand(path, os.environ if environ is None else environ)
        except BadReference as exc:
            path_problems.append(("envFile", str(exc)))
    if problems or path_problems:
        return server, problems + path_problems
    try:
        found = read_env_file(path)
    except ValueError as exc:
        return server, [("envFile", f"{server.envFile}: {exc}")]  # the path as written: never a secret
    added = {k: v for k, v in found.items() if k not in expanded.env}
    marks = tuple(Expanded(path=f"env.{k}", written=FROM_ENV_FILE, values=(v,)) for k, v in added.items())
    return attrs.evolve(
        expanded, envFile=server.envFile, env={**added, **expanded.env}, expanded=(*expanded.expanded, *marks)
    ), []


def unset_rule(item: Unset) -> str:
    """The rule an unset variable breaks, as ``kxen config check`` lists it."""
    return str(UnsetVariable(item.variable))


def unset_problems(server: ServerConfig) -> list[str]:
    """``file: key path: rule`` for each unset variable of ``server`` (what ``kxen config check`` reports)."""
    return [f"{server.source}: mcpServers.{server.name}.{u.path}: {unset_rule(u)}" for u in server.unset]


def unset_reason(server: ServerConfig) -> str:
    """Why ``server`` cannot start, and the next step: the variables it needs, never a value."""
    names = list(dict.fromkeys(u.variable for u in server.unset))
    where = ", ".join(dict.fromkeys(u.path for u in server.unset))
    shown = ", ".join(f"${{{n}}}" for n in names)
    verb = "is" if len(names) == 1 else "are"
    return (
        f"{shown} {verb} not set in the environment ({where} in {server.source}): set "
        f"{'it' if len(names) == 1 else 'them'} where kxen runs and start again, or give a default "
        f"in the file (${{{names[0]}:-value}})"
    )


def unset_warnings(servers: Mapping[str, ServerConfig]) -> list[str]:
    """What ``kxen mcp add``/``import`` say of entries written while a variable they use is not set
    yet: allowed, but each such server fails (phase ``config``) until it is set."""
    return [
        f"server {name!r}: {', '.join(dict.fromkeys(f'${{{u.variable}}}' for u in s.unset))} not set in the "
        f"environment yet ({', '.join(u.path for u in s.unset)}): the server fails (phase config) until it is set "
        "where kxen runs"
        for name, s in servers.items()
        if s.unset
    ]


def references(server: ServerConfig) -> dict[str, Expanded]:
    """The entry's expanded values by key path suffix (``env.TOKEN``): what ``kxen mcp get`` shows as written."""
    return {e.path: e for e in server.expanded}


__all__ = [
    "EXPANDED_FIELDS",
    "FROM_ENV_FILE",
    "PROJECT_RULE",
    "PUBLIC_VARIABLES",
    "BadReference",
    "expand",
    "expand_server",
    "references",
    "unset_problems",
    "unset_reason",
    "unset_rule",
    "unset_warnings",
    "UnsetVariable",
]

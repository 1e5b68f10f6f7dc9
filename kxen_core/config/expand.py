"""``${VAR}`` in user config: values taken from the host environment when the config is loaded.

In the user's own ``mcp.json``, ``${NAME}`` and ``${NAME:-default}`` in ``env`` values, ``headers``
values and ``url`` are replaced by the host's variable ``NAME`` (the default when it is unset or
empty), so a token lives in the environment (or a secret manager that sets it) rather than in the
file. ``NAME`` is a letter or ``_``, then letters, digits and ``_``; the default is any text without
``}``; ``$${`` writes a literal ``${``. A ``$`` not followed by ``{`` is kept as it is. A value is
expanded once: text that came from a variable is never scanned again.

A malformed reference is a config problem naming the key path -- never a value. An unset variable
without a default is not a malformed definition: the entry is kept as written, marked with the
variable and key path (:class:`~kxen_core.config.models.Unset`), and that one server fails in phase
``config`` with the variable's name and the next step while the others run; ``kxen config check``
still reports it (:func:`unset_problems`). Whatever a variable supplied is a secret: it is remembered
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
EXPANDED_FIELDS = ("env", "headers", "url")
PROJECT_RULE = (
    "project config must not reference host variables (${...}): a repository must not pull the user's "
    "secrets into a server it ships (set the value in user config, where ${VAR} is expanded)"
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
    if not fields:
        return server, []
    if scope != "user":
        return server, [(shown, PROJECT_RULE) for _path, shown, _value in fields]
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
    "PROJECT_RULE",
    "BadReference",
    "UnsetVariable",
    "expand",
    "expand_server",
    "references",
    "unset_problems",
    "unset_reason",
    "unset_rule",
    "unset_warnings",
]

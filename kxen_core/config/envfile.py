"""``envFile`` of a user server entry: variables for the server read from a file when the config is
loaded (VS Code's key, kept by ``kxen mcp import``).

The file is read like every config file (:func:`~kxen_core.config.files.read_limited`: a regular
file, bounded, the user's own and writable by nobody else) and must be named by an absolute path
(``${HOME}/.config/app.env`` expands first). Its lines are ``KEY=VALUE`` (``export KEY=VALUE``
too); blank lines and lines starting with ``#`` are skipped; a value in single quotes is taken as
it is, one in double quotes may hold ``\\n``, ``\\t``, ``\\"`` and ``\\\\``; an unquoted value ends
before a `` #`` comment and loses surrounding space. Nothing else is expanded. A line that is not
that is a problem naming its number, never its text. Every value from the file is a secret: it is
scrubbed from everything kxen prints, and ``kxen mcp get`` shows it as ``(from envFile)``. The
entry's own ``env`` wins over the file. A project entry may not name an env file.
"""

from __future__ import annotations

import os
import re

from kxen_core.config.files import read_text

#: the most variables one env file may set
MAX_VARIABLES = 1000
PROJECT_RULE = (
    "project config must not read env files: a repository must not pull the user's secrets into a server it "
    "ships (name the file in user config)"
)
_LINE = re.compile(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def read_env_file(path: str) -> dict[str, str]:
    """The variables of the env file at ``path``; ValueError naming the rule (never a value)."""
    if not os.path.isabs(path):
        raise ValueError("must be an absolute path (${HOME}/... expands first)")
    text = read_text(path, private=True, missing="cannot be read: no such file")
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.fullmatch(line)
        value = _value(m.group(2)) if m else None
        if m is None or value is None:
            raise ValueError(f"line {number}: not KEY=VALUE (a name of letters, digits and '_', then '=')")
        found[m.group(1)] = value
        if len(found) > MAX_VARIABLES:
            raise ValueError(f"more than {MAX_VARIABLES} variables")
    return found


def _value(text: str) -> str | None:
    if text[:1] == "'":
        end = text.find("'", 1)
        return text[1:end] if end > 0 and _comment_only(text[end + 1 :]) else None
    if text[:1] == '"':
        out, i = [], 1
        while i < len(text):
            ch = text[i]
            if ch == "\\" and i + 1 < len(text):
                out.append(_ESCAPES.get(text[i + 1], "\\" + text[i + 1]))
                i += 2
                continue
            if ch == '"':
                return "".join(out) if _comment_only(text[i + 1 :]) else None
            out.append(ch)
            i += 1
        return None  # no closing quote
    return re.split(r"\s+#", text, maxsplit=1)[0].strip()


def _comment_only(rest: str) -> bool:
    rest = rest.strip()
    return not rest or rest.startswith("#")


__all__ = ["MAX_VARIABLES", "PROJECT_RULE", "read_env_file"]

"""What kxen holds as secret in a configured server entry: env keys that look sensitive, values that
carry credentials, and everything :func:`config_secrets` collects for the scrubbers of
:mod:`kxen_core.safe_text` (:class:`~kxen_core.safe_text.Secrets`)."""

from __future__ import annotations

import re
from typing import Any

from kxen_core.config.project import secret_header
from kxen_core.safe_text import Secrets, query_values

#: env-key fragments (case-insensitive) whose values are shown only as a SHA-256 digest
SENSITIVE_ENV_WORDS = (
    "token",
    "secret",
    "key",
    "password",
    "passwd",
    "pwd",
    "credential",
    "auth",
    "cookie",
    "session",
    "private",
    "pat",
)

_USERINFO_RE = re.compile(r"://[^/?#\s]*@")


#: "pat" (a personal access token) only as a word of its own or the end of the key, so PATH,
#: PATTERN or DISPATCH are not taken for secrets (and PATH stays readable in an approval)
_PAT_RE = re.compile(r"(?:^|[^a-z])pat(?:[^a-z]|$)|pat$")


def sensitive_key(key: str) -> bool:
    lower = key.lower()
    return any(word in lower for word in SENSITIVE_ENV_WORDS if word != "pat") or bool(_PAT_RE.search(lower))


def sensitive_value(value: str) -> bool:
    """A value that carries credentials whatever its key is called (a URL with user:password@)."""
    return bool(_USERINFO_RE.search(value))


def config_secrets(servers: Any, *, sources: Any = ()) -> Secrets:
    """The secrets of configured server entries: query values of ``url`` and the OAuth metadata
    URL, values of credential headers (and the credential after ``Bearer``), values of env keys
    that look sensitive, the OAuth client secret, and every value a host variable supplied
    (``${VAR}`` in user config) with the env or header value holding it; with ``sources``, also
    what plugins hold now (``kxen_register_secrets``: the tokens of a sign-in)."""
    values: list[str] = []
    for server in servers:
        values += _written(server, _entry_secrets(server))
    return Secrets(values, sources=sources)


def _entry_secrets(server: Any) -> list[str]:
    values = list(query_values(server.url))
    if server.oauth is not None:
        values += query_values(server.oauth.authorizationServerMetadataUrl)
        if server.oauth.clientSecret:
            values.append(server.oauth.clientSecret)
        if server.oauth.idpClientSecret:
            values.append(server.oauth.idpClientSecret)
    for name, value in server.headers.items():
        if secret_header(name):
            scheme, _, credential = value.partition(" ")
            values += [value, credential.strip()] if credential and scheme.isalpha() else [value]
    values += [v for k, v in server.env.items() if sensitive_key(k)]
    for expanded in getattr(server, "expanded", ()):  # what host variables supplied (${VAR})
        values += expanded.values
        kind, _, key = expanded.path.partition(".")
        if expanded.values and kind in ("env", "headers"):
            values.append(getattr(server, kind).get(key))
    return values


def _written(server: Any, values: list[str]) -> list[str]:
    """``values`` without the references of an entry kept as written because a variable was unset
    (``${TOKEN}`` is the reference, not the secret: hiding it would hide which variable to set)."""
    if not getattr(server, "unset", ()):
        return values
    return [v for v in values if "${" not in v]


__all__ = ["SENSITIVE_ENV_WORDS", "config_secrets", "sensitive_key", "sensitive_value"]

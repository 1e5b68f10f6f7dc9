"""The guard on what leaves: a call's arguments checked, before anything is sent, for a secret the
user holds and for the shapes of well-known credentials.

What counts as the user's secrets is what kxen scrubs (``Runtime.secrets``, handed to the vote as
``ToolCall.secrets``): configured credential header and sensitive env values, URL query values,
the values ``${VAR}`` references supplied, the OAuth client secret, and the tokens a sign-in plugin
holds now. They are compared in place (no copy is kept for the check), only those of at least
:data:`MIN_SECRET_CHARS` characters (a shorter one matches ordinary text too often). Every string of
the arguments is looked at -- object keys too, at any depth -- and so are the string values one
after the other in order, so a secret split across neighbouring fields is found as well. An encoded secret (base64,
hex, reversed, ...) is not: the guard stops accidents and careless prompts, not a determined model.

The credential shapes (:data:`SHAPES`) are matched in each string: a private key block, cloud and
code-host access keys, common token prefixes.

A hit on a project server or a remote one is ``deny``; on the user's own local server it is
``ask`` (the user may mean it). The reason names the kind of value, never the value. A user entry
turns the guard off for its server with ``"egressGuard": "off"``; a project entry cannot.
"""

from __future__ import annotations

import re
from typing import Any

from kxen_core.hookspecs import hookimpl
from kxen_core.policy import ToolCall, Vote

#: a secret shorter than this is not looked for in arguments
MIN_SECRET_CHARS = 8
#: the most strings of one call's arguments looked at (the safety check bounds them at 1 MiB anyway)
MAX_STRINGS = 100_000

#: (what it is, its pattern): the credential shapes looked for in each string of the arguments
SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")),
    ("an AWS access key", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])")),
    ("a GitHub token", re.compile(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})")),
    ("a GitLab token", re.compile(r"(?<![A-Za-z0-9_-])glpat-[A-Za-z0-9_-]{20,}")),
    ("a Slack token", re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a Stripe secret key", re.compile(r"(?<![A-Za-z0-9_])[sr]k_live_[A-Za-z0-9]{16,}")),
    ("a Google API key", re.compile(r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])")),
    ("an API secret key (sk-)", re.compile(r"(?<![A-Za-z0-9_-])sk-(?:proj-|ant-[a-z0-9]+-)?[A-Za-z0-9_-]{32,}")),
    ("a package registry token", re.compile(r"(?<![A-Za-z0-9_])(?:npm_[A-Za-z0-9]{36}|pypi-[A-Za-z0-9_-]{50,})")),
)
#: any of the shapes (none matches a newline): one search finds whether one is there, then each names which
ANY_SHAPE = re.compile("|".join(f"(?:{pattern.pattern})" for _kind, pattern in SHAPES))
SECRET = "a value kxen holds as secret (a configured credential, a ${VAR} value or a sign-in token)"


def _strings(value: Any, out: list[str], values: list[str]) -> None:
    """Every string of a JSON-like value in order, keys included, into ``out``; the string values
    alone (no keys) into ``values`` (at most MAX_STRINGS of each)."""
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack and len(out) < MAX_STRINGS:
        node, is_key = stack.pop()
        if isinstance(node, str):
            out.append(node)
            if not is_key:
                values.append(node)
        elif isinstance(node, dict):
            for key, item in reversed(list(node.items())):
                stack.append((item, False))
                stack.append((key, True))
        elif isinstance(node, (list, tuple)):
            stack.extend((item, False) for item in reversed(node))


_SCALARS = (int, float, bool, type(None))


def _flat(arguments: Any, out: list[str], values: list[str]) -> bool:
    """:func:`_strings` of the common call, a dict of string keys and plain scalar values, without
    its walk (the same strings in the same order); False for anything else (then nothing is sure)."""
    if type(arguments) is not dict or len(arguments) > MAX_STRINGS // 2:
        return False
    for key, value in arguments.items():
        if type(key) is not str:
            return False
        out.append(key)
        if type(value) is str:
            out.append(value)
            values.append(value)
        elif type(value) not in _SCALARS:
            return False
    return True


def found(arguments: Any, secrets: Any = None) -> str | None:
    """What the arguments carry that must not leave: the kind (a shape's name or :data:`SECRET`), or None."""
    strings: list[str] = []
    values: list[str] = []
    if not _flat(arguments, strings, values):
        strings.clear()
        values.clear()
        _strings(arguments, strings, values)
    return found_in(strings, values, secrets)


def found_in(strings: list[str], values: list[str], secrets: Any = None) -> str | None:
    """:func:`found` of arguments whose strings are ``strings`` (keys and values in order, as
    :func:`_strings` lists them: at most :data:`MAX_STRINGS`) and whose string values are ``values``
    (the votes' shortcut: :meth:`kxen_core.policy.votes.PreparedVotes.allowed_outright`)."""
    if not strings:
        return None
    lines = "\n".join(strings)
    # one search of every string at once: no shape matches a newline, and a newline stands where
    # a string starts or ends for the shapes' look-arounds; on a hit, the first string's kind
    if ANY_SHAPE.search(lines):
        for text in strings:
            for kind, pattern in SHAPES:
                if pattern.search(text):
                    return kind
    held = secrets.values if secrets is not None else ()  # the sources asked once (each ``values`` asks)
    if held:
        # each string (a key included) alone, and the values one after the other: a secret split
        # across neighbouring fields is whole there
        joined = lines + "\n" + "".join(values) if len(values) > 1 else lines  # one value: in lines
        for value in held:
            if len(value) >= MIN_SECRET_CHARS and value in joined:
                return SECRET
    return None


def vote(server: Any, kind: str) -> Vote:
    """The guard's vote on a hit of ``kind`` for ``server``."""
    where = "a remote" if server.is_remote else "a project" if server.scope == "project" else None
    if where is not None:
        return Vote.deny(f"the arguments carry {kind}; it is not sent to {where} server")
    return Vote.ask(f"the arguments carry {kind}")


def _off(server: Any) -> bool:
    return getattr(server, "egressGuard", "on") == "off"


def clear(server: Any, arguments: Any, secrets: Any) -> bool:
    """True when the guard has nothing to say about these arguments for ``server`` (the fast path)."""
    return _off(server) or found(arguments, secrets) is None


def clear_strings(server: Any, strings: list[str], values: list[str], secrets: Any) -> bool:
    """:func:`clear` of arguments already walked (:func:`kxen_core.policy.defaults.flat_strings`);
    past :data:`MAX_STRINGS` strings it is not sure (False)."""
    return len(strings) <= MAX_STRINGS and (_off(server) or found_in(strings, values, secrets) is None)


def masked(arguments: Any, secrets: Any = None) -> Any:
    """The arguments as a person is shown them: secrets as ``***``, credential shapes cut to their
    first four characters and ``…``."""

    def one(text: str) -> str:
        for _kind, pattern in SHAPES:
            text = pattern.sub(lambda m: m.group(0)[:4] + "…", text)
        return secrets.text(text) if secrets else text

    def walk(node: Any, depth: int = 0) -> Any:
        if depth > 64:
            return node
        if isinstance(node, str):
            return one(node)
        if isinstance(node, dict):
            return {one(k) if isinstance(k, str) else k: walk(v, depth + 1) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, depth + 1) for v in node]
        return node

    return walk(arguments)


class ArgumentGuard:
    """The guard as a policy vote (a default plugin, asked on every call)."""

    def __dir__(self) -> list[str]:
        return ["kxen_policy_decision"]

    @hookimpl(trylast=True)
    def kxen_policy_decision(self, call: ToolCall) -> Vote | None:
        if call.server.egressGuard == "off":
            return None
        kind = found(call.arguments, call.secrets)
        return None if kind is None else vote(call.server, kind)


__all__ = ["MIN_SECRET_CHARS", "SECRET", "SHAPES", "ArgumentGuard", "clear", "found", "masked", "vote"]

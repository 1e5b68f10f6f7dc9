"""Server definitions from other MCP hosts' files, converted to kxen entries (``kxen mcp import``).

Read: Claude Desktop (``claude_desktop_config.json``), Claude Code and Cursor (``.mcp.json``,
``.cursor/mcp.json``: ``mcpServers`` whose entries may carry ``"type": "stdio" | "http" | "sse"``),
VS Code (``.vscode/mcp.json``: ``servers`` and ``inputs``; or ``settings.json`` with ``mcp.servers``;
comments and trailing commas allowed) and Gemini CLI (``settings.json``: ``httpUrl`` for Streamable
HTTP, ``url`` for SSE, ``timeout`` in milliseconds).

This module only converts: each entry becomes a kxen entry with notes on what changed, or is
refused with the reasons. Nothing here decides what is valid kxen config -- the caller checks the
converted entries with the loader's own rules before anything is written
(:func:`kxen_core.config.edit.check_document`). Nothing is granted on the way: another host's
``autoApprove``, ``alwaysAllow`` or ``trust`` never becomes an ``allow`` policy.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import attrs

from kxen_core.config.files import read_text
from kxen_core.config.models import check_server_key

FORMATS = ("claude-desktop", "claude-code", "cursor", "vscode", "gemini")

#: keys copied as they are (kxen spells them the same)
COPIED = ("command", "args", "env", "cwd", "url", "headers")
#: other hosts' ``type`` values and the kxen transport each means
TYPES = {"stdio": "stdio", "http": "http", "streamable-http": "http", "streamableHttp": "http", "sse": "sse"}
#: keys dropped with a note: nothing kxen would do differently is lost, or the user decides again
DROPPED = {
    "description": "kxen keeps no description",
    "dev": "VS Code's development mode has no kxen equivalent",
    "gallery": "VS Code's gallery data has no kxen equivalent",
    "version": "kxen keeps no version",
    "trust": "kxen never skips its tool policy for an imported server; set toolPolicies yourself",
    "autoApprove": "kxen never allows tools from an imported file; set toolPolicies yourself",
    "alwaysAllow": "kxen never allows tools from an imported file; set toolPolicies yourself",
    "oauth": "another host's OAuth settings do not carry over; see kxen's oauth keys (docs/config.md)",
    "authProviderType": "another host's OAuth settings do not carry over; see kxen's oauth keys (docs/config.md)",
    "timeout": "kxen's timeouts.requestSeconds is in seconds; set it yourself",
}
#: fields where kxen expands ``${VAR}`` (user config); elsewhere a reference would reach the server as text
EXPANDED = ("env", "headers", "url", "command", "args")
#: VS Code's variables and what they are for kxen: the home from the environment, and the
#: workspace as the directory a stdio server starts in (a relative path)
VSCODE_VARIABLES = {"userHome": "${HOME}", "workspaceFolder": "."}
#: where ``${workspaceFolder}`` may stand: in paths of what runs
WORKSPACE_FIELDS = ("command", "args", "cwd")
_GEMINI_BARE = re.compile(r"(?<!\$)\$([A-Za-z_][A-Za-z0-9_]*)")
_REF = re.compile(r"\$\{([^}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?")
MAX_SHOWN = 40  # characters of a foreign value (a type, a variable) quoted in a reason


@attrs.frozen(kw_only=True)
class Imported:
    """One entry of the foreign file: ``entry`` is the kxen entry (None when refused)."""

    name: str
    entry: dict[str, Any] | None
    reasons: tuple[str, ...] = ()  # why it is refused
    notes: tuple[str, ...] = ()  # what was changed or left out


def read_foreign(path: Path) -> Any:
    """The parsed file: JSON, else JSON with comments and trailing commas (VS Code); ValueError
    naming the rule when it cannot be read."""
    text = read_text(path)
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("not valid JSON: nested too deeply") from None
    except ValueError as first:
        try:
            return json.loads(strip_jsonc(text))
        except (ValueError, RecursionError):
            raise ValueError(f"not valid JSON: {first}") from None


_SPECIAL = re.compile(r'"|//|/\*|,')
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_SPACE = re.compile(r"\s*")


def strip_jsonc(text: str) -> str:
    """``text`` without ``//`` and ``/* */`` comments and trailing commas (outside strings). One
    pass, linear in the text."""
    out: list[str] = []
    i = 0
    while True:
        m = _SPECIAL.search(text, i)
        if m is None:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i : m.start()])
        token, i = m.group(), m.start()
        if token == '"':
            s = _STRING.match(text, i)
            end = s.end() if s else len(text)
            out.append(text[i:end])
            i = end
        elif token == "//":
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
        elif token == "/*":
            end = text.find("*/", i + 2)
            if end < 0:
                raise ValueError("an unclosed /* comment")
            out.append(" ")
            i = end + 2
        else:  # a comma: dropped when only space and comments stand before the closing bracket
            j = _skip(text, i + 1)
            if j >= len(text) or text[j] not in "}]":
                out.append(",")
            i += 1


def _skip(text: str, i: int) -> int:
    """The index of the next character after space and comments from ``i``."""
    while True:
        i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = len(text) if end < 0 else end + 2
        else:
            return i


def detect(path: Path, data: Any) -> str:
    """The format of a foreign file, from its name and shape."""
    parts = {p.lower() for p in Path(path).parts}
    entries = _entries_of(data, "claude-code")
    if isinstance(data, dict) and ("servers" in data or isinstance(data.get("mcp"), dict)) and "mcpServers" not in data:
        return "vscode"
    if ".gemini" in parts or any(isinstance(e, dict) and "httpUrl" in e for e in entries.values()):
        return "gemini"
    if Path(path).name.lower() == "claude_desktop_config.json":
        return "claude-desktop"
    if ".cursor" in parts:
        return "cursor"
    return "claude-code"


def _entries_of(data: Any, fmt: str) -> dict[Any, Any]:
    if not isinstance(data, dict):
        return {}
    if fmt == "vscode":
        found = data.get("servers", data.get("mcp", {}).get("servers") if isinstance(data.get("mcp"), dict) else None)
    else:
        found = data.get("mcpServers")
    return found if isinstance(found, dict) else {}


def convert(data: Any, fmt: str, workspace: Path | None = None) -> tuple[list[Imported], list[str]]:
    """The entries of a parsed foreign file, and notes on the file as a whole. ValueError when the
    file holds no server definitions where ``fmt`` keeps them. ``workspace`` is where a relative
    ``envFile`` (or one under ``${workspaceFolder}``) is found."""
    key = "servers" if fmt == "vscode" else "mcpServers"
    if (
        not isinstance(data, dict)
        or not isinstance(_entries_of(data, fmt), dict)
        or not (key in data or (fmt == "vscode" and isinstance(data.get("mcp"), dict)))
    ):
        raise ValueError(f"no '{key}' object of server definitions (read as {fmt})")
    notes = []
    inputs = data.get("inputs") if fmt == "vscode" else None
    if inputs is None and fmt == "vscode" and isinstance(data.get("mcp"), dict):
        inputs = data["mcp"].get("inputs")
    if inputs:
        notes.append(
            "inputs: not imported: kxen does not prompt for values; entries that use ${input:...} are refused "
            "(set the value in your environment and write ${NAME} in user config)"
        )
    items = [_entry(str(name), raw, fmt, workspace) for name, raw in _entries_of(data, fmt).items()]
    seen: set[str] = set()
    for i, item in enumerate(items):  # two names made valid the same way: only the first keeps it
        if item.name in seen:
            items[i] = attrs.evolve(
                item, entry=None, reasons=(*item.reasons, "another entry of the file has this name")
            )
        seen.add(item.name)
    return items, notes


def _entry(name: str, raw: Any, fmt: str, workspace: Path | None = None) -> Imported:
    reasons: list[str] = []
    notes: list[str] = []
    rule = check_server_key(name)
    if rule:
        better = suggested_name(name)
        if better is None:
            reasons.append(f"{rule}: rename it (kxen mcp add-json NEWNAME JSON)")
        else:
            notes.append(f"{_shown(name)} is not a kxen server name ({rule}): imported as {better!r}")
            name = better
    if not isinstance(raw, dict):
        return Imported(name=name, entry=None, reasons=(*reasons, "a server definition must be an object"))
    entry: dict[str, Any] = {}
    for key, value in raw.items():
        if key in COPIED:
            entry[key] = value
        elif key == "type":
            kind = TYPES.get(value) if isinstance(value, str) else None
            if kind is None:
                reasons.append(f"type {_shown(value)}: no kxen transport for it (stdio, http, sse)")
            elif kind != "stdio":  # stdio is kxen's default with a command
                entry["transport"] = kind
        elif key == "httpUrl":
            entry["url"], entry["transport"] = value, "http"
            if "url" in raw:
                reasons.append("both url and httpUrl: kxen takes one endpoint")
        elif key in ("disabled", "enabled") and isinstance(value, bool):
            entry["enabled"] = value if key == "enabled" else not value
        elif key == "excludeTools" and isinstance(value, list) and all(isinstance(t, str) for t in value):
            entry["toolPolicies"] = {**entry.get("toolPolicies", {}), **{t: "deny" for t in value}}
        elif key == "includeTools" and isinstance(value, list) and all(isinstance(t, str) for t in value):
            # only these tools: every other one is denied; each of these still asks (never "allow")
            entry["defaultToolPolicy"] = "deny"
            listed = raw.get("excludeTools")
            excluded: list[Any] = listed if isinstance(listed, list) else []
            entry["toolPolicies"] = {**{t: "ask" for t in value if t not in excluded}, **entry.get("toolPolicies", {})}
            notes.append("includeTools: only these tools may be called (each asks first); every other one is denied")
        elif key == "timeout" and fmt == "gemini" and type(value) in (int, float) and 0 < value <= 86_400_000:
            entry["timeouts"] = {"requestSeconds": value / 1000}  # Gemini counts milliseconds
        elif key == "envFile" and isinstance(value, str):
            entry["envFile"] = _env_file(value, workspace)
            notes.append(f"envFile: read from {entry['envFile']} when kxen loads (its values are secrets)")
        elif key in DROPPED:
            notes.append(f"{key}: not imported ({DROPPED[key]})")
        else:
            reasons.append(f"{_shown(key)}: no kxen equivalent for this key")
    if fmt == "gemini" and "url" in raw and "httpUrl" not in raw and "type" not in raw:
        entry["transport"] = "sse"  # Gemini's url is an SSE endpoint
        notes.append("url: Gemini's url is an SSE endpoint: imported with transport sse")
    for where, value in _strings(entry):
        if fmt == "gemini" and _GEMINI_BARE.search(value):  # Gemini also expands $VAR
            value = _GEMINI_BARE.sub(lambda m: "${" + m.group(1) + "}", value)
            _put(entry, where, value)
            notes.append(f"{where}: Gemini's $NAME is written ${{NAME}} for kxen")
        converted = _references(where, value, reasons, notes)
        if converted != value:
            _put(entry, where, converted)
        if _plain_secret(where) and "${" not in value:
            notes.append(f"{where}: a secret in plain text: consider ${{NAME}} from your environment (user config)")
    return Imported(name=name, entry=None if reasons else entry, reasons=tuple(reasons), notes=tuple(notes))


def _references(where: str, value: str, reasons: list[str], notes: list[str]) -> str:
    """``value`` with other hosts' ``${env:NAME}`` spelled ``${NAME}``; a reason for every
    reference kxen would not expand here."""
    field = where.split(".")[0].split("[")[0]

    def sub(m: re.Match[str]) -> str:
        body = m.group(1)
        if body in VSCODE_VARIABLES and (body != "workspaceFolder" or field in WORKSPACE_FIELDS):
            new = VSCODE_VARIABLES[body]
            why = "from your environment" if body == "userHome" else "a stdio server starts in the workspace"
            notes.append(f"{where}: ${{{body}}} is written {new!r} for kxen ({why})")
            return new
        if body.startswith("input:"):
            reasons.append(
                f"{where}: ${{{_shown(body, quote=False)}}}: VS Code input variables are not supported (kxen does not "
                "prompt for values): set the value with --env (kxen mcp add NAME --env KEY=VALUE -- COMMAND), or write "
                "${NAME} and set NAME in your environment"
            )
        elif field not in EXPANDED:
            reasons.append(
                f"{where}: kxen expands ${{...}} only in env, headers and url (stdio servers start in the "
                "workspace: a relative path may do)"
            )
        elif body.startswith("env:") and _NAME.fullmatch(body[4:]):
            notes.append(f"{where}: ${{{body}}} is written ${{{body[4:]}}} for kxen")
            return "${" + body[4:] + "}"
        elif not _NAME.fullmatch(body):
            reasons.append(
                f"{where}: ${{{_shown(body, quote=False)}}} is not a variable kxen expands (only ${{NAME}} from "
                "your environment)"
            )
        return m.group()

    return _REF.sub(sub, value)


def _env_file(value: str, workspace: Path | None) -> str:
    """Another host's ``envFile`` as kxen reads it: an absolute path (relative ones, and
    ``${workspaceFolder}``, are the workspace's), ``${userHome}`` as ``${HOME}``."""
    value = value.replace("${userHome}", "${HOME}")
    if workspace is None:
        return value
    value = value.replace("${workspaceFolder}", str(workspace))
    if not value.startswith(("/", "${", "~")) and not re.match(r"[A-Za-z]:[\\/]", value):
        value = os.path.join(str(workspace), value)
    return value


def suggested_name(name: str) -> str | None:
    """A valid kxen server name made from another host's (``my server`` -> ``my-server``,
    ``github.com`` -> ``github-com``), or None when nothing of it is left."""
    text = re.sub(r"[^A-Za-z0-9_-]+", "-", name)
    text = re.sub(r"_{2,}", "_", text).strip("-_")[:32].rstrip("-_")
    return text if text and check_server_key(text) is None else None


def _plain_secret(where: str) -> bool:
    from kxen_core.config.project import secret_header
    from kxen_core.config.secrets import sensitive_key

    field, _, key = where.partition(".")
    return (field == "env" and sensitive_key(key)) or (field == "headers" and secret_header(key))


def _strings(entry: dict[str, Any]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for key in ("command", "cwd", "url"):
        if isinstance(entry.get(key), str):
            found.append((key, entry[key]))
    if isinstance(entry.get("args"), list):
        found += [(f"args[{i}]", a) for i, a in enumerate(entry["args"]) if isinstance(a, str)]
    for key in ("env", "headers"):
        if isinstance(entry.get(key), dict):
            found += [(f"{key}.{k}", v) for k, v in entry[key].items() if isinstance(v, str)]
    return found


def _put(entry: dict[str, Any], where: str, value: str) -> None:
    if where.startswith("args["):
        entry["args"][int(where[5:-1])] = value
    elif "." in where:
        field, _, key = where.partition(".")
        entry[field] = {**entry[field], key: value}
    else:
        entry[where] = value


def _shown(value: Any, *, quote: bool = True) -> str:
    text = value if isinstance(value, str) else json.dumps(value)[:MAX_SHOWN]
    text = text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."
    return repr(text) if quote else text


__all__ = ["FORMATS", "Imported", "convert", "detect", "read_foreign", "strip_jsonc", "suggested_name"]

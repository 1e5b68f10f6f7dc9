"""Tool definitions in the shape each model API takes, built from the entries of
``Runtime.tools()`` (so what is held or filtered there is absent here too), each a new object:

============================  ==================================================================
format                        one tool
============================  ==================================================================
``"openai-chat"``             ``{"type": "function", "function": {"name", "description",
                              "parameters"[, "strict": true]}}`` (Chat Completions ``tools``)
``"openai-responses"``        ``{"type": "function", "name", "description", "parameters",
                              "strict"[, "defer_loading": true]}`` (Responses ``tools``)
``"anthropic"``               ``{"name", "description", "input_schema"[, "defer_loading": true]}``
                              (Messages ``tools``)
``"gemini"``                  ``{"name", "description"[, "parameters"]}``: a function declaration
                              (``functionDeclarations`` of one ``Tool``), its schema in Gemini's
                              subset (:mod:`.gemini_schema`)
============================  ==================================================================

``strict`` (OpenAI formats only) gives each tool in OpenAI's strict subset (:mod:`.openai_schema`)
where it has one; a tool without is given as it is, ``strict`` off, and the reason is in
:attr:`ModelTools.notes`. A ``deferred`` entry (a tool the model finds through search) carries
``defer_loading`` where the format has it and is left out of the others.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import Any

from kxen_core.agent.gemini_schema import gemini_schema
from kxen_core.agent.openai_schema import strict_schema
from kxen_core.agent.tool_names import MODEL_NAME_RE

OPENAI_CHAT = "openai-chat"
OPENAI_RESPONSES = "openai-responses"
ANTHROPIC = "anthropic"
GEMINI = "gemini"
FORMATS = (OPENAI_CHAT, OPENAI_RESPONSES, ANTHROPIC, GEMINI)
#: the formats with a place for a deferred tool (``defer_loading``)
DEFERRING = frozenset({OPENAI_RESPONSES, ANTHROPIC})
#: the most characters of a tool's description given to a model (the rest cut, and said so)
MAX_DESCRIPTION_CHARS = 8000
#: Gemini's function names start with a letter or an underscore
_GEMINI_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}")
_GEMINI_PARAMETER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class ModelTools(list[dict[str, Any]]):
    """The tool definitions of one format (a list, to pass as the API's ``tools``), with ``notes``:
    per model-facing name, what kxen did to the tool (a strict form it has not, keywords dropped,
    left out, and why)."""

    def __init__(self, tools: Iterable[dict[str, Any]] = (), notes: dict[str, str] | None = None) -> None:
        super().__init__(tools)
        self.notes: dict[str, str] = notes if notes is not None else {}


def check_format(format: str) -> str:
    """``format`` when it is one of :data:`FORMATS`; ``ValueError`` naming them otherwise."""
    if format not in FORMATS:
        raise ValueError(f"unknown model-API format {str(format)[:40]!r}: one of {', '.join(FORMATS)}")
    return format


def description(entry: dict[str, Any]) -> str:
    """The tool's description (or its title), at most :data:`MAX_DESCRIPTION_CHARS`."""
    given, title = entry.get("description"), entry.get("title")
    text = given if isinstance(given, str) and given else title if isinstance(title, str) else ""
    if len(text) > MAX_DESCRIPTION_CHARS:
        return text[:MAX_DESCRIPTION_CHARS] + f"\n[cut: {len(text)} characters]"
    return text


def _parameters(entry: dict[str, Any]) -> dict[str, Any]:
    """A copy of the input schema, with ``"properties": {}`` where an object schema has none (the
    OpenAI formats ask for it; an empty object takes no keys either way)."""
    schema = entry.get("inputSchema")
    out = copy.deepcopy(schema) if isinstance(schema, dict) else {"type": "object"}
    if out.get("type") == "object" and "properties" not in out:
        out["properties"] = {}
    return out


def _note(notes: dict[str, str], name: str, text: str) -> None:
    if text:
        notes[name] = f"{notes[name]}; {text}" if name in notes else text


def model_tools(entries: Iterable[dict[str, Any]], format: str, *, strict: bool = False) -> ModelTools:
    """The tool definitions of ``entries`` (``Runtime.tools()``'s) in ``format`` (see the module
    docstring); the entries and their schemas are not changed."""
    check_format(format)
    out = ModelTools()
    for entry in entries:
        name = entry.get("qualifiedName")
        if not isinstance(name, str) or MODEL_NAME_RE.fullmatch(name) is None:
            continue  # every entry of Runtime.tools() has one: a host's own list may not
        deferred = entry.get("deferred") is True
        if deferred and format not in DEFERRING:
            out.notes[name] = f"left out: a deferred tool, and {format} has no deferred loading"
            continue
        tool = _one(entry, name, format, strict, out.notes)
        if tool is None:
            continue
        if deferred:
            tool["defer_loading"] = True
        out.append(tool)
    return out


def _one(entry: dict[str, Any], name: str, format: str, strict: bool, notes: dict[str, str]) -> dict[str, Any] | None:
    text = description(entry)
    if format == GEMINI:
        return _gemini(entry, name, text, notes)
    if format == ANTHROPIC:
        return {"name": name, "description": text, "input_schema": _parameters(entry)}
    parameters: dict[str, Any] | None = None
    if strict:
        parameters, why = strict_schema(entry.get("inputSchema"))
        _note(notes, name, why)
    is_strict = parameters is not None
    if parameters is None:
        parameters = _parameters(entry)
    if format == OPENAI_RESPONSES:
        return {"type": "function", "name": name, "description": text, "parameters": parameters, "strict": is_strict}
    function: dict[str, Any] = {"name": name, "description": text, "parameters": parameters}
    if is_strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _gemini(entry: dict[str, Any], name: str, text: str, notes: dict[str, str]) -> dict[str, Any] | None:
    if _GEMINI_NAME.fullmatch(name) is None:
        _note(notes, name, "left out: Gemini's function names start with a letter or an underscore")
        return None
    schema, why = gemini_schema(entry.get("inputSchema"))
    _note(notes, name, why)
    props = schema.get("properties")
    odd = [k for k in props or () if _GEMINI_PARAMETER.fullmatch(k) is None]
    if odd:
        _note(notes, name, f"parameter names outside Gemini's rule: {', '.join(k[:40] for k in odd[:5])}")
    out: dict[str, Any] = {"name": name, "description": text}
    if props:  # Gemini refuses an OBJECT with no properties: a tool without parameters has none
        out["parameters"] = schema
    return out


__all__ = [
    "ANTHROPIC",
    "DEFERRING",
    "FORMATS",
    "GEMINI",
    "MAX_DESCRIPTION_CHARS",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "ModelTools",
    "check_format",
    "model_tools",
]

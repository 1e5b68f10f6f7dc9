"""A model's tool call, in the shape its API returns it, read into a name and arguments; and what
the agent gets for it (an :class:`~kxen_core.agent.output.AgentOutput`) in the shape that API
takes back.

==========================  ===============================================  ================================
format                      a call (dict or the SDK's object)                its result
==========================  ===============================================  ================================
``"openai-chat"``           ``tool_calls[i]``: ``{"id", "function":           ``{"role": "tool",
                            {"name", "arguments": JSON text}}``               "tool_call_id", "content"}``
``"openai-responses"``      a ``function_call`` item: ``{"call_id",           ``{"type": "function_call_output",
                            "name", "arguments": JSON text}``                 "call_id", "output"}``
``"anthropic"``             a ``tool_use`` block: ``{"id", "name",            ``{"type": "tool_result",
                            "input": {...}}``                                 "tool_use_id", "content",
                                                                              "is_error"}``
``"gemini"``                a ``functionCall`` (or a part holding one):       a part: ``{"functionResponse":
                            ``{"name", "args": {...}, "id"?}``                {"name", "response": {"output"
                                                                              or "error": text}, "id"?}}``
==========================  ===============================================  ================================

A call that cannot be read -- arguments that are not JSON or not a JSON object, no name, a name or
arguments past their bounds -- is a :class:`ModelCall` with an ``error``, answered with an error
result for the model: never an exception. The result's text is the output's text (bounded, binary
contents as kxen's descriptors), never more.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from kxen_core.agent.model_formats import ANTHROPIC, GEMINI, OPENAI_CHAT, OPENAI_RESPONSES, check_format
from kxen_core.agent.output import AgentOutput

#: the most characters of a call's JSON arguments read
MAX_ARGUMENT_CHARS = 1_000_000
#: the most characters of a call's name or id kept
MAX_NAME_CHARS = 256


@attrs.frozen(kw_only=True)
class ModelCall:
    """One tool call of a model: ``name``, ``arguments`` (a dict), ``call_id`` (the API's id for
    it, None where it sent none) and ``error`` (why it cannot be run; None when it can)."""

    format: str
    name: str
    arguments: dict[str, Any] = attrs.field(factory=dict)
    call_id: str | None = None
    error: str | None = None


def _plain(value: Any) -> Any:
    """An SDK object as a dict (pydantic models: ``model_dump()``), anything else as it is."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, dict):
        try:
            return dump()
        except Exception:  # noqa: BLE001 -- a foreign object's dump: the call is then unreadable
            return None
    return value


def _text(value: Any) -> str | None:
    return value[:MAX_NAME_CHARS] if isinstance(value, str) else None


def parse_call(format: str, call: Any) -> ModelCall:
    """``call`` (a dict, or the SDK's object for it) of ``format`` read as a :class:`ModelCall`."""
    check_format(format)
    data = _plain(call)
    if not isinstance(data, dict):
        return ModelCall(format=format, name="", error=f"a {format} tool call is an object, not {type(call).__name__}")
    if format == GEMINI:
        inner = _plain(data.get("functionCall", data.get("function_call")))
        if isinstance(inner, dict):
            data = inner
        return _read(format, data.get("name"), data.get("id"), data.get("args"), needs_id=False)
    if format == ANTHROPIC:
        return _read(format, data.get("name"), data.get("id"), data.get("input"), needs_id=True)
    if format == OPENAI_CHAT:
        function = _plain(data.get("function"))
        function = function if isinstance(function, dict) else {}
        return _read(format, function.get("name"), data.get("id"), _json(function.get("arguments")), needs_id=True)
    return _read(format, data.get("name"), data.get("call_id"), _json(data.get("arguments")), needs_id=True)


class _Broken:
    def __init__(self, why: str) -> None:
        self.why = why


def _json(text: Any) -> Any:
    if text is None or text == "":
        return {}  # a call of a tool without parameters may send none
    if not isinstance(text, str):
        return _Broken(f"the arguments are {type(text).__name__}, not JSON text")
    if len(text) > MAX_ARGUMENT_CHARS:
        return _Broken(f"the arguments are {len(text)} characters, more than {MAX_ARGUMENT_CHARS}")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        return _Broken(f"the arguments are not valid JSON ({str(exc)[:120]})")


def _read(format: str, name: Any, call_id: Any, arguments: Any, *, needs_id: bool) -> ModelCall:
    shown, cid = _text(name), _text(call_id)
    error = None
    if not shown:
        error = "the tool call has no name"
    elif isinstance(name, str) and len(name) > MAX_NAME_CHARS:
        error = f"the tool name is longer than {MAX_NAME_CHARS} characters"
    elif needs_id and not cid:
        error = "the tool call has no id"
    elif isinstance(arguments, _Broken):
        error = arguments.why
    elif arguments is None:
        arguments = {}
    elif not isinstance(arguments, dict):
        error = f"the arguments are a JSON {_kind(arguments)}, not an object"
    if error is not None:
        return ModelCall(format=format, name=shown or "", call_id=cid, error=error)
    return ModelCall(format=format, name=shown or "", call_id=cid, arguments=dict(arguments))


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "number" if isinstance(value, (int, float)) else type(value).__name__


def call_error_text(call: ModelCall) -> str:
    """The text the model gets for a call that cannot be run."""
    return f"InvalidToolCall: {call.name or 'a tool call'} was not run: {call.error}"


def tool_result(call: ModelCall, output: AgentOutput) -> dict[str, Any]:
    """``output`` as the result of ``call`` in the call's format (see the module docstring)."""
    text = output.text
    if call.format == OPENAI_CHAT:
        return {"role": "tool", "tool_call_id": call.call_id or "", "content": text}
    if call.format == OPENAI_RESPONSES:
        return {"type": "function_call_output", "call_id": call.call_id or "", "output": text}
    if call.format == ANTHROPIC:
        return {"type": "tool_result", "tool_use_id": call.call_id or "", "content": text, "is_error": output.is_error}
    response: dict[str, Any] = {"name": call.name, "response": {"error" if output.is_error else "output": text}}
    if call.call_id:
        response["id"] = call.call_id
    return {"functionResponse": response}


__all__ = ["MAX_ARGUMENT_CHARS", "ModelCall", "call_error_text", "parse_call", "tool_result"]

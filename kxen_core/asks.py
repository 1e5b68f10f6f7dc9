"""What a server asks the host for, as host hooks see it (``kxen_sampling_request``,
``kxen_elicitation_request``). Plain values; the handling is in :mod:`kxen_core.protocol.client_requests`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs


@attrs.frozen(kw_only=True)
class SamplingRequest:
    """A server's ``sampling/createMessage``: ``params`` as the server sent it (``messages``,
    ``maxTokens``, ``systemPrompt``, ``modelPreferences``...). Everything in it is the server's text:
    untrusted, and to be escaped before it is shown (``kxen_core.safe_text``)."""

    server: str
    params: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class ElicitationRequest:
    """A server's ``elicitation/create``: the ``message`` to show, the ``requested_schema`` of the
    answer (flat: strings, numbers, booleans, enums), and ``params`` as sent. Untrusted text."""

    server: str
    message: str
    requested_schema: Mapping[str, Any]
    params: Mapping[str, Any]


def apply_schema_defaults(schema: Mapping[str, Any], content: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``content`` plus the ``default`` of each property of an elicitation ``requestedSchema``
    that ``content`` does not have: what a form pre-filled with the defaults (SEP-1034) submits
    when the person changes nothing. For a host's ``kxen_elicitation_request`` handler.

    What the person gave always wins. A default is applied only when it fits its property: the
    property's ``type`` (``string``, ``integer``, ``number``, ``boolean``, or ``array`` of strings),
    and its choices when it has them (``enum``, ``oneOf``/``anyOf`` of ``const``, ``items`` likewise
    for an array); a server's default that breaks its own schema is left out, not sent back.
    ``schema`` and ``content`` are not changed; a schema without ``properties`` adds nothing.
    """
    out = dict(content or {})
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return out
    for name, prop in properties.items():
        if type(name) is str and name not in out and isinstance(prop, Mapping) and "default" in prop:
            if _fits(prop, prop["default"]):
                out[name] = prop["default"]
    return out


def _choices(schema: Mapping[str, Any]) -> list[Any] | None:
    """The values ``schema`` allows (``enum``, or the ``const`` of each ``oneOf``/``anyOf``), or None."""
    enum = schema.get("enum")
    if isinstance(enum, list):
        return enum
    for key in ("oneOf", "anyOf"):
        options = schema.get(key)
        if isinstance(options, list):
            return [o["const"] for o in options if isinstance(o, Mapping) and "const" in o]
    return None


def _fits(prop: Mapping[str, Any], value: Any) -> bool:
    kind = prop.get("type")
    if kind == "string":
        ok = type(value) is str
    elif kind == "integer":  # JSON Schema counts 30.0 as an integer
        ok = type(value) is int or (type(value) is float and value.is_integer())
    elif kind == "number":
        ok = type(value) in (int, float) and math.isfinite(value)
    elif kind == "boolean":
        ok = type(value) is bool
    elif kind == "array":
        items = prop.get("items")
        allowed = _choices(items) if isinstance(items, Mapping) else None
        return type(value) is list and all(type(v) is str and (allowed is None or v in allowed) for v in value)
    else:
        return False
    allowed = _choices(prop)
    return ok and (allowed is None or value in allowed)


__all__ = ["ElicitationRequest", "SamplingRequest", "apply_schema_defaults"]

"""A tool result checked against the tool's ``outputSchema`` before anyone sees it.

A tool that declares an ``outputSchema`` must return conforming ``structuredContent`` (the spec asks
clients to validate it). :func:`check_result` returns the result unchanged when it conforms (or there
is nothing to check) and otherwise an ``isError`` result that says which value broke which rule, so
the agent gets a clear error and nothing crashes.

The check is JSON Schema 2020-12 (the ``jsonschema`` library, imported on first use), bounded for
hostile servers: references stay inside the schema (the catalog refuses the others, and nothing is
ever fetched), the schema is bounded by the catalog's limits, an instance of more than
:data:`MAX_CHECKED_VALUES` values is passed on unchecked (with a note), and the keywords whose cost a
server controls without bound are not evaluated: ``pattern`` and ``patternProperties`` (a crafted
regular expression can run for hours; with ``patternProperties`` ignored, ``additionalProperties``
and ``unevaluatedProperties`` of that schema are ignored too) and ``uniqueItems`` (quadratic).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: keywords whose value is one schema, a list of schemas, or a map of names to schemas
_ONE = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
    }
)
_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_MAP = frozenset({"properties", "$defs", "definitions", "dependentSchemas", "patternProperties"})
#: an instance with more values than this is not checked
MAX_CHECKED_VALUES = 100_000
#: the most characters of a validation message shown
MAX_MESSAGE_CHARS = 500
#: checkers kept, by the id of the schema they were made from (the schema is kept with them)
MAX_CACHED = 1024

_checkers: dict[int, tuple[Any, Any]] = {}


def bounded_schema(schema: Any) -> Any:
    """A copy of ``schema`` without the keywords kxen does not evaluate (see the module docstring);
    keyword-aware, so a property *named* ``pattern`` stays."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("pattern", "uniqueItems", "patternProperties"):
            continue
        if key in ("additionalProperties", "unevaluatedProperties") and "patternProperties" in schema:
            continue
        if key in _MAP and isinstance(value, dict):
            out[key] = {k: bounded_schema(v) for k, v in value.items()}
        elif key in _LIST and isinstance(value, list):
            out[key] = [bounded_schema(v) for v in value]
        elif key in _ONE:
            out[key] = bounded_schema(value)
        else:
            out[key] = value  # data (enum, const, default...) or a keyword without subschemas
    return out


def _count(value: Any, budget: int) -> int:
    """How many values ``value`` holds, counting stops past ``budget`` (iterative, so any depth)."""
    seen = 0
    stack = [value]
    while stack and seen <= budget:
        node = stack.pop()
        seen += 1
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return seen


def _checker(schema: dict[str, Any]) -> Any:
    cached = _checkers.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    from jsonschema import Draft202012Validator

    checker = Draft202012Validator(bounded_schema(schema))
    if len(_checkers) >= MAX_CACHED:
        _checkers.clear()
    _checkers[id(schema)] = (schema, checker)
    return checker


def error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def check_result(
    tool: dict[str, Any], result: dict[str, Any], diag: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """``result`` when it conforms to ``tool``'s ``outputSchema`` (or there is none, or it is an
    error result), else an ``isError`` result naming the value and the rule. ``diag`` gets a note
    when the result could not be checked."""
    schema = tool.get("outputSchema")
    if not isinstance(schema, dict) or result.get("isError") is True:
        return result
    name = str(tool.get("name", ""))[:80]
    if "structuredContent" not in result:
        return error_result(f"kxen: tool {name!r} declares an outputSchema but its result has no structuredContent")
    instance = result["structuredContent"]
    if _count(instance, MAX_CHECKED_VALUES) > MAX_CHECKED_VALUES:
        if diag is not None:
            diag(
                f"tool {name!r}: structuredContent holds more than {MAX_CHECKED_VALUES} values; not checked against "
                "its outputSchema"
            )
        return result
    try:
        error = next(iter(_checker(schema).iter_errors(instance)), None)
    except RecursionError:
        return error_result(
            f"kxen: the structuredContent of tool {name!r} nests too deeply to check against its outputSchema"
        )
    except Exception as exc:  # a schema the library cannot use (a bad keyword value, a reference it cannot resolve)
        if diag is not None:
            diag(f"tool {name!r}: its outputSchema could not be used to check the result ({type(exc).__name__})")
        return result
    if error is None:
        return result
    where = str(getattr(error, "json_path", "$"))[:200]
    message = str(error.message)
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + "..."
    return error_result(
        f"kxen: the structuredContent of tool {name!r} does not match its outputSchema at {where} "
        f"({error.validator}): {message}"
    )


__all__ = ["MAX_CHECKED_VALUES", "bounded_schema", "check_result", "error_result"]

"""A tool call's arguments checked against the tool's ``inputSchema`` before anything is sent.

A call the server would refuse for its arguments is refused by kxen: :func:`check_arguments` returns
an ``isError`` result (what MCP says a server answers for invalid arguments: a tool execution
error the model can correct) naming the argument, the rule and the schema path, bounded to
:data:`MAX_REASON_CHARS`, and nothing is sent. ``None`` means "send it".

The schema is prepared once per distinct schema, not per call (:func:`input_check`): kept by the
identity of the catalog's schema object and by its JSON text, both bounded. The common shape of a
tool's schema (an object whose properties have only a ``type``, ``required``, and
``additionalProperties`` true or false) is checked by a small function built from it: microseconds,
on the benchmarked call path. Anything else is JSON Schema (the ``jsonschema`` library, imported
on first use), bounded the way :mod:`kxen_core.agent.tool_output` bounds an ``outputSchema``: the
keywords whose cost a server controls without bound (``pattern``, ``patternProperties``,
``uniqueItems``) are not evaluated. The fast function only ever accepts what JSON Schema accepts;
whatever it refuses is checked by ``jsonschema`` again, which gives the reason.

A schema kxen cannot evaluate safely is passed as before, unchecked: one that is not a JSON
object, larger than :data:`MAX_SCHEMA_CHARS` or nested deeper than :data:`MAX_SCHEMA_DEPTH`, with
a reference that leaves it (``$ref``/``$dynamicRef`` not starting with ``#``: nothing is ever
fetched), naming a ``$schema`` dialect the library does not know, or that the library refuses as
a schema; so is a call whose arguments hold more than :data:`MAX_CHECKED_VALUES` values or
nest too deeply to check. A top-level ``null`` for a property the schema does not require counts as
the argument left out (MCP's header mirroring treats it so, SEP-2243), and the call is sent as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kxen_core.agent.tool_output import MAX_CHECKED_VALUES, _count, bounded_schema, error_result

#: a schema larger than this (compact JSON characters) is not checked: the catalog's default bound
MAX_SCHEMA_CHARS = 65536
#: a schema nested deeper than this is not checked: the catalog's default bound
MAX_SCHEMA_DEPTH = 32
#: prepared checks kept by schema identity, and by schema text
MAX_CACHED = 1024
#: the most characters of the reason the model gets
MAX_REASON_CHARS = 600

#: the dialects whose ``type``/``properties``/``required``/``additionalProperties`` the fast function
#: matches exactly (draft 4 and older count ``1.0`` as no integer)
_FAST_DIALECTS = frozenset(
    {
        None,
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema",
        "http://json-schema.org/draft-06/schema#",
    }
)
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated", "readOnly"})
_FAST_ROOT = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties", "$schema"}
_FAST_PROPERTY = _ANNOTATIONS | {"type", "format"}  # ``format`` is an annotation unless asserted


def _integer(v: Any) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer())


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: JSON Schema's types as the library checks them (a bool is no integer or number): the Python
#: classes whose instances are of the type, or a function where a class does not say it
_TYPES: dict[str, tuple[type, ...] | Callable[[Any], bool]] = {
    "string": (str,),
    "integer": _integer,
    "number": _number,
    "boolean": (bool,),
    "null": (type(None),),
    "array": (list,),
    "object": (dict,),
}
#: every value is of it (a property with no ``type``, ``true``, ``{}``)
_ANY = (object,)

#: a property's test: ``isinstance(value, test)`` for a tuple of classes, else ``test(value)``
TypeTest = tuple[type, ...] | Callable[[Any], bool]


def _type_test(schema: Any) -> TypeTest | None:
    """The test of a property schema of the fast shape, or None when it is not of that shape."""
    if schema is True or schema == {}:
        return _ANY
    if not isinstance(schema, dict) or not _FAST_PROPERTY.issuperset(schema):
        return None
    kind = schema.get("type")
    if kind is None:
        return _ANY
    if isinstance(kind, str):
        return _TYPES.get(kind)
    if isinstance(kind, list) and kind and all(isinstance(k, str) and k in _TYPES for k in kind):
        return _union([_TYPES[k] for k in kind])
    return None


def _union(tests: list[TypeTest]) -> TypeTest:
    """The test of a ``type`` list: any of ``tests``."""
    classes = tuple(c for t in tests if isinstance(t, tuple) for c in t)
    functions = [t for t in tests if not isinstance(t, tuple)]
    if not functions:
        return classes
    return lambda v: isinstance(v, classes) or any(f(v) for f in functions)


def _fast(schema: dict[str, Any]) -> Callable[[dict[str, Any]], bool] | None:
    """A function that accepts exactly the arguments ``schema`` accepts, for the common shape; None
    for any other schema."""
    if (
        not _FAST_ROOT.issuperset(schema)
        or schema.get("type") != "object"
        or schema.get("$schema") not in _FAST_DIALECTS
    ):
        return None
    props = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not (isinstance(props, dict) and isinstance(required, list) and type(extra) is bool):
        return None
    if not all(isinstance(r, str) for r in required):
        return None
    tests: dict[str, TypeTest] = {}
    for name, sub in props.items():
        test = _type_test(sub)
        if test is None:
            return None
        tests[name] = test
    needed = tuple(dict.fromkeys(required))

    def accepts(args: dict[str, Any]) -> bool:
        for name in needed:
            if name not in args:
                return False
        for key, value in args.items():
            test = tests.get(key)
            if test is None:
                if not extra:
                    return False
            elif isinstance(test, tuple):
                if not isinstance(value, test):
                    return False
            elif not test(value):
                return False
        return True

    return accepts


class InputCheck:
    """What one distinct schema is checked with: the fast function (when it has the common shape)
    and the ``jsonschema`` validator (made on first need)."""

    __slots__ = ("_schema", "_validator", "fast", "required")

    def __init__(self, schema: dict[str, Any]) -> None:
        self._schema = schema
        self.fast = _fast(schema)
        required = schema.get("required")
        #: the top-level properties the schema requires (a null for any other counts as left out)
        self.required = (
            frozenset(r for r in required if isinstance(r, str)) if isinstance(required, list) else frozenset()
        )
        self._validator: Any = None

    def validator(self) -> Any:
        """The library's validator of the bounded schema; None when it cannot be used safely."""
        if self._validator is None:
            self._validator = _library_validator(self._schema) or False
        return self._validator or None


def _library_validator(schema: dict[str, Any]) -> Any:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=None) if "$schema" in schema else Draft202012Validator
    if cls is None:  # a dialect the library does not know: not evaluated
        return None
    bounded = bounded_schema(schema)
    try:
        cls.check_schema(bounded)
    except (SchemaError, RecursionError):
        return None
    return cls(bounded)


def _safe(schema: Any) -> str | None:
    """The schema's compact JSON text when kxen can evaluate it safely, else None."""
    if not isinstance(schema, dict):
        return None
    try:
        text = json.dumps(schema, separators=(",", ":"), sort_keys=True)
    except (RecursionError, TypeError, ValueError):
        return None
    if len(text) > MAX_SCHEMA_CHARS:
        return None
    if '"$ref"' not in text and '"$dynamicRef"' not in text and text.count("{") + text.count("[") < MAX_SCHEMA_DEPTH:
        return text
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            return None
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("$ref", "$dynamicRef") and not (isinstance(value, str) and value.startswith("#")):
                    return None
                stack.append((value, depth + 1))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return text


_by_id: dict[int, tuple[Any, InputCheck | None]] = {}
_by_text: dict[str, InputCheck | None] = {}


def input_check(schema: Any) -> InputCheck | None:
    """The prepared check of ``schema`` (the same object for equal schemas), or None when it is not
    checked (see the module docstring)."""
    cached = _by_id.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    text = _safe(schema)
    check = None
    if text is not None:
        if text in _by_text:
            check = _by_text[text]
        else:
            check = InputCheck(schema)
            if len(_by_text) >= MAX_CACHED:
                _by_text.clear()
            _by_text[text] = check
    if len(_by_id) >= MAX_CACHED:
        _by_id.clear()
    _by_id[id(schema)] = (schema, check)  # kept with it: its id cannot be reused while cached
    return check


def _without_optional_nulls(required: frozenset[str], args: dict[str, Any]) -> dict[str, Any]:
    """``args`` without the top-level ``null`` values of properties the schema does not require: a
    null there means "not given" (MCP's header mirroring omits it, SEP-2243; models send it for an
    optional argument), so it is checked as left out and sent as it is."""
    if None not in args.values():
        return args
    return {k: v for k, v in args.items() if v is not None or k in required}


def check_arguments(tool: dict[str, Any], args: dict[str, Any]) -> dict[str, Any] | None:
    """None when ``args`` may be sent to ``tool`` (they conform, or the schema is not checked), else
    the ``isError`` result the model gets: which argument broke which rule, and where in the schema."""
    check = input_check(tool.get("inputSchema"))
    if check is None:
        return None
    fast = check.fast
    if fast is not None and fast(args):
        return None
    args = _without_optional_nulls(check.required, args)
    if fast is not None and fast(args):
        return None
    validator = check.validator()
    if validator is None or _count(args, MAX_CHECKED_VALUES) > MAX_CHECKED_VALUES:
        return None
    try:
        error = next(iter(validator.iter_errors(args)), None)
    except Exception:  # nested too deeply, or a reference the library cannot resolve: sent as before
        return None
    if error is None:
        return None
    name = str(tool.get("name", ""))[:80]
    where = str(getattr(error, "json_path", "$"))[:120]
    schema_path = "/".join(str(p) for p in error.schema_path)[:120] or "(root)"
    reason = (
        f"kxen: not sent: the arguments of tool {name!r} do not match its inputSchema at {where} "
        f"({error.validator}, schema path {schema_path}): {error.message}"
    )
    if len(reason) > MAX_REASON_CHARS:
        reason = reason[: MAX_REASON_CHARS - 3] + "..."
    return error_result(reason)


__all__ = ["MAX_REASON_CHARS", "MAX_SCHEMA_CHARS", "MAX_SCHEMA_DEPTH", "InputCheck", "check_arguments", "input_check"]

"""The one cattrs converter: validates instead of coercing, forbids unknown keys.

cattrs' default hooks coerce (``"false"`` becomes ``True``, ``1.9`` becomes ``1``); config must never
be read that way, so the scalar hooks here only *check*. Plugins receive this converter from the host
(``make_converter()``) and never build their own.

Building a converter is cheap, but its first structuring of each class generates code (about 5 ms for
a config's classes): config loading and the runtime share one process-wide converter
(:func:`shared_converter`), so that cost is paid once per process, not once per load or runtime.
"""

from __future__ import annotations

import difflib
import functools
from typing import Any, Literal, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import list_structure_factory, mapping_structure_factory
from cattrs.gen import make_dict_structure_fn, override


def _exact(kind: type, label: str):
    def hook(value: Any, _type: Any) -> Any:
        # bool is an int subclass in Python; it is never a valid int/float here
        if isinstance(value, bool) and kind is not bool:
            raise ValueError(f"expected {label}, got a boolean")
        if kind is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, kind):
            # never the value itself: a value in the wrong place may be a credential
            raise ValueError(f"expected {label}, got {type_name(value)}")
        if isinstance(value, str) and not _encodable(value):
            raise ValueError(SURROGATE_RULE)
        return value

    return hook


SURROGATE_RULE = "must be valid Unicode text (it holds a lone surrogate)"


def type_name(value: Any) -> str:
    """How a problem names a value it does not show: its JSON/TOML type only."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return type(value).__name__


def lone_surrogates(data: Any, limit: int = 20) -> list[str]:
    """Key paths (``a.b[0]``) of the strings in parsed JSON ``data`` -- keys included -- that hold a
    lone surrogate (``"\\ud800"``), which no UTF-8 output can carry; at most ``limit``. Iterative, so
    any nesting the parser accepted is fine."""
    found: list[str] = []
    stack: list[tuple[str, Any]] = [("", data)]
    while stack and len(found) < limit:
        path, value = stack.pop()
        if isinstance(value, str):
            if not _encodable(value):
                found.append(path or "(top level)")
        elif isinstance(value, dict):
            for key, inner in reversed(list(value.items())):
                sub = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and not _encodable(key):
                    found.append(sub)
                    continue
                stack.append((sub, inner))
        elif isinstance(value, list):
            for i in reversed(range(len(value))):
                stack.append((f"{path}[{i}]", value[i]))
    return found


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\\ud800" in JSON)
        return False
    return True


#: name fragments (case-insensitive) that mark a key whose value is a credential
SECRET_NAME_WORDS = (
    "token", "secret", "key", "password", "passwd", "pwd", "credential", "auth", "cookie", "session", "private",
)  # fmt: skip


def secret_name(name: str) -> bool:
    lower = name.lower()
    return any(word in lower for word in SECRET_NAME_WORDS)


_NOT_FROM_FILE = ("name", "scope", "source", "expanded")


def _is_collection(origin: type) -> Any:
    def predicate(t: Any) -> bool:
        return get_origin(t) is origin or t is origin

    return predicate


def _validated(c: cattrs.Converter, attribute: attrs.Attribute) -> Any:
    base = c.get_structure_hook(attribute.type)

    def hook(value: Any, type_: Any) -> Any:
        value = base(value, type_)
        try:
            attribute.validator(None, attribute, value)  # type: ignore[misc]
        except (ValueError, TypeError) as exc:
            if secret_name(attribute.name):
                # a validator may quote the value; under a name like this it is likely a credential
                raise ValueError("invalid value (not shown: the key looks secret)") from exc
            raise
        except Exception:  # a validator that needs the instance runs again in __init__
            pass
        return value

    return hook


def configure_converter(c: cattrs.Converter) -> cattrs.Converter:
    c.register_structure_hook(str, _exact(str, "a string"))
    c.register_structure_hook(int, _exact(int, "an integer"))
    c.register_structure_hook(float, _exact(float, "a number"))
    c.register_structure_hook(bool, _exact(bool, "true or false"))

    def literal_factory(type_: Any) -> Any:
        allowed = get_args(type_)

        def hook(value: Any, _type: Any) -> Any:
            if isinstance(value, bool) or not isinstance(value, str) or value not in allowed:
                # the value is not shown: a string in the wrong place may be a credential
                got = "" if isinstance(value, str) else f" (got {type_name(value)})"
                raise ValueError(f"must be one of {', '.join(map(str, allowed))}{got}")
            return value

        return hook

    c.register_structure_hook_factory(lambda t: get_origin(t) is Literal, literal_factory)

    # cattrs would turn any iterable into a list ("abc" -> ["a", "b", "c"]) and read a dict's keys;
    # config lists must be JSON arrays and mappings JSON objects
    def strict(base_factory: Any, kind: type, label: str) -> Any:
        def factory(type_: Any) -> Any:
            inner = base_factory(type_, c)

            def hook(value: Any, t: Any) -> Any:
                if not isinstance(value, kind):
                    raise ValueError(f"expected {label}, got {type(value).__name__}")
                return inner(value, t)

            return hook

        return factory

    for origin, base, label in (
        (list, list_structure_factory, "a list"),
        (dict, mapping_structure_factory, "an object"),
    ):
        c.register_structure_hook_factory(_is_collection(origin), strict(base, origin, label))

    def attrs_factory(cl: type) -> Any:
        attrs.resolve_types(cl)
        overrides: dict[str, Any] = {}
        for a in attrs.fields(cl):
            if a.name in _NOT_FROM_FILE:
                # fields the loader fills in (name, scope, source) must not be accepted from a file
                overrides[a.name] = override(omit=True)
            elif a.validator is not None:
                # run the field's validator while structuring it, so a problem names its key path
                overrides[a.name] = override(struct_hook=_validated(c, a))
        return make_dict_structure_fn(cl, c, _cattrs_forbid_extra_keys=True, **overrides)

    c.register_structure_hook_factory(attrs.has, attrs_factory)
    return c


def format_exception(exc: BaseException, type_: Any) -> str:
    """One config problem in words, for ``cattrs.transform_error`` (validators' messages pass through)."""
    if isinstance(exc, ValueError) and str(exc):
        return str(exc)
    if isinstance(exc, KeyError):
        return "required key missing"
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return f"unknown key(s): {', '.join(sorted(exc.extra_fields))}" + _did_you_mean(exc)
    if isinstance(exc, TypeError) and type_ is not None:
        return f"wrong type, expected {getattr(type_, '__name__', type_)}"
    if get_origin(type_) is Literal:
        return "must be one of " + ", ".join(map(str, get_args(type_)))
    return f"invalid value ({type(exc).__name__})"


#: keys other MCP hosts use for a kxen key (Claude Code, Cursor and VS Code ``type``; Gemini ``httpUrl``)
KEY_ALIASES = {"type": "transport", "httpUrl": "url", "serverUrl": "url", "environment": "env", "disabled": "enabled"}


def _did_you_mean(exc: cattrs.ForbiddenExtraKeysError) -> str:
    """' (did you mean 'x'?)' for unknown keys close to a known one."""
    known = [a.name for a in attrs.fields(exc.cl) if a.name not in _NOT_FROM_FILE] if attrs.has(exc.cl) else []
    hints = []
    foreign = False
    for key in sorted(exc.extra_fields):
        alias = KEY_ALIASES.get(str(key))
        foreign = foreign or alias in known
        near = [alias] if alias in known else difflib.get_close_matches(str(key), known, n=1, cutoff=0.7)
        if near:
            hints.append(f"{near[0]!r} for {str(key)[:40]!r}" if len(exc.extra_fields) > 1 else repr(near[0]))
    more = " kxen mcp import converts other hosts' files" if foreign else ""
    return f" (did you mean {', '.join(hints)}?{more})" if hints else ""


def make_converter() -> cattrs.Converter:
    return configure_converter(cattrs.Converter(forbid_extra_keys=True, detailed_validation=True))


@functools.cache
def shared_converter() -> cattrs.Converter:
    """The process-wide converter (built by :func:`make_converter` on first use). Configured once and
    never changed: it keeps only cattrs' generated structuring functions between loads."""
    return make_converter()

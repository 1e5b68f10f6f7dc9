"""The core's own rules for one catalog item (transport-independent; plugins add stricter ones
through ``kxen_catalog_page``), and the pass of a page's items through them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kxen_core.protocol.catalog import Catalog
    from kxen_core.protocol.catalog_reuse import Reuse

#: the most arguments one prompt may declare
MAX_PROMPT_ARGUMENTS = 32
#: the longest prompt argument name
MAX_ARGUMENT_NAME_CHARS = 64


def base_problem(kind: str, item: Any, key_field: str) -> str | None:
    """The core's own item rules (transport-independent); plugins add stricter ones."""
    if type(item) is not dict:
        return "not an object"
    key = item.get(key_field)
    if type(key) is not str or not key:
        return f"'{key_field}' must be a non-empty string"
    if len(key) > 2048:
        return f"'{key_field}' is longer than 2048 characters"
    if kind == "tools":
        schema = item.get("inputSchema")
        if schema is not None and type(schema) is not dict:
            return "'inputSchema' must be an object"
    desc = item.get("description")
    if desc is not None and type(desc) is not str:
        return "'description' must be a string"
    if kind == "prompts":
        return _prompt_arguments_problem(item.get("arguments"))
    return None


_DICT_OR_NONE = (dict, type(None))
_STR_OR_NONE = (str, type(None))


def _prompt_arguments_problem(arguments: Any) -> str | None:
    """A prompt's ``arguments``: a list of objects with distinct non-empty string names and a
    boolean ``required`` when given (get-prompt checks calls against them)."""
    if arguments is None:
        return None
    if type(arguments) is not list:
        return "'arguments' must be a list"
    if len(arguments) > MAX_PROMPT_ARGUMENTS:
        return f"more than {MAX_PROMPT_ARGUMENTS} arguments"
    names: set[str] = set()
    for i, arg in enumerate(arguments):
        if type(arg) is not dict:
            return f"arguments[{i}] is not an object"
        name = arg.get("name")
        if type(name) is not str or not name or len(name) > MAX_ARGUMENT_NAME_CHARS:
            return f"arguments[{i}].name must be a string of 1-{MAX_ARGUMENT_NAME_CHARS} characters"
        if name in names:
            return f"arguments[{i}].name repeats {name[:80]!r}"
        names.add(name)
        if "required" in arg and type(arg["required"]) is not bool:
            return f"arguments[{i}].required must be true or false"
        if arg.get("description") is not None and type(arg["description"]) is not str:
            return f"arguments[{i}].description must be a string"
    return None


def label(item: Any, key_field: str, page: int, index: int) -> str:
    key = item.get(key_field) if type(item) is dict else None
    name = repr(key[:80]) if type(key) is str and key else f"#{index}"
    return f"page {page} item {name}"


def valid_items(
    catalog: Catalog, kind: str, key_field: str, number: int, raw: list[Any], reuse: Reuse
) -> tuple[list[dict[str, Any]], list[bytes | None], frozenset[int]]:
    """The items of ``raw`` that pass the core's rules (a diagnostic for each one skipped), each
    one listed before unchanged being that earlier object; their keys; the known indices."""
    valid: list[dict[str, Any]] = []
    tools = kind == "tools"
    for i, item in enumerate(raw):
        if tools and type(item) is dict:  # a tool that passes every core rule, checked inline
            key = item.get("name")
            if (
                type(key) is str
                and 0 < len(key) <= 2048
                and type(item.get("inputSchema")) in _DICT_OR_NONE
                and type(item.get("description")) in _STR_OR_NONE
            ):
                valid.append(item)
                continue
        problem = base_problem(kind, item, key_field)
        if problem:
            catalog.diag(f"{label(item, key_field, number, i)} skipped: {problem}")
        else:
            valid.append(item)
    keys, known = reuse.take(valid)
    return valid, keys, known


__all__ = ["MAX_ARGUMENT_NAME_CHARS", "MAX_PROMPT_ARGUMENTS", "base_problem", "label", "valid_items"]

"""Local references of a JSON Schema, for the converters of the model-API formats
(:mod:`.openai_schema`, :mod:`.gemini_schema`): a ``$ref`` into the same document (``#``,
``#/$defs/X``, ``#/definitions/X``, any JSON pointer) found, anything else refused, and the bounds
both converters keep while they walk a schema.

Both converters inline what a reference points to (so the schemas they make hold no ``$ref``):
a chain of references deeper than :data:`MAX_REF_DEPTH` (a recursive schema, or one made to blow
up) and a walk of more than :data:`MAX_NODES` schema nodes end the conversion there.
"""

from __future__ import annotations

from typing import Any

#: references followed inside one another at most (a recursive schema stops here)
MAX_REF_DEPTH = 8
#: schema nodes one conversion visits at most (inlined references count each time)
MAX_NODES = 10_000
#: the most characters of a reference shown in a note
MAX_REF_SHOWN = 100


class SchemaLimit(Exception):
    """A schema that a converter cannot go on with; the message says where and why."""


def resolve(root: Any, ref: Any) -> Any:
    """What ``ref`` (a ``$ref`` value) points to inside ``root``; :class:`SchemaLimit` for a
    reference that is not local or leads nowhere."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise SchemaLimit(f"a $ref that is not local to the schema: {str(ref)[:MAX_REF_SHOWN]!r}")
    node = root
    pointer = ref[1:]
    if pointer and not pointer.startswith("/"):
        raise SchemaLimit(f"a $ref kxen cannot follow: {ref[:MAX_REF_SHOWN]!r}")
    for raw in pointer.split("/")[1:] if pointer else ():
        step = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        else:
            raise SchemaLimit(f"a $ref that leads nowhere: {ref[:MAX_REF_SHOWN]!r}")
    return node


class Walk:
    """The bounds of one conversion: nodes visited and references open, each checked on entry."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.nodes = 0
        self.refs: list[str] = []

    def visit(self, where: str) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise SchemaLimit(f"the schema has more than {MAX_NODES} nodes (at {where})")

    def enter_ref(self, ref: Any, where: str) -> Any:
        """What ``ref`` points to; call :meth:`leave_ref` once its target is converted."""
        if len(self.refs) >= MAX_REF_DEPTH:
            raise SchemaLimit(f"$ref nested deeper than {MAX_REF_DEPTH} (a recursive schema?) at {where}")
        target = resolve(self.root, ref)
        self.refs.append(str(ref))
        return target

    def leave_ref(self) -> None:
        self.refs.pop()


__all__ = ["MAX_NODES", "MAX_REF_DEPTH", "SchemaLimit", "Walk", "resolve"]

"""What the model sees: qualified tool names (the bounded output: :mod:`kxen_core.agent.output`)."""

from __future__ import annotations

from kxen_core.agent.tool_names import SEPARATOR, model_name


def qualified_name(server: str, tool: str) -> str:
    """The model-facing name of ``tool`` of ``server``: ``<server>__<tool>`` when that is provider-safe,
    else a stable shortened form (:func:`kxen_core.agent.tool_names.model_name`)."""
    return model_name(server, tool)


def split_qualified(name: str) -> tuple[str, str]:
    """``server__tool`` -> (server, tool): the inverse of :func:`qualified_name` for every plain name.

    Server names never contain ``__`` and never end with ``_`` (:func:`~kxen_core.config.check_server_key`),
    so no ``__`` can start inside the server name: the first one is the separator. A shortened name
    gives its server and its shortened tool part: resolve it through the server's name map
    (``Runtime.call_tool`` does).
    """
    server, sep, tool = name.partition(SEPARATOR)
    if not sep or not server or not tool:
        raise ValueError(f"not a qualified tool name (expected <server>__<tool>): {name[:100]!r}")
    return server, tool
